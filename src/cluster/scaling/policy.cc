#include "cluster/scaling/policy.h"

#include <fmt/format.h>
#include <muParser.h>

#include <algorithm>
#include <cmath>

namespace hydrozoa::cluster {
namespace {

int clampReplicas(double v, int lo, int hi) {
  if (!std::isfinite(v)) return lo;
  return static_cast<int>(std::clamp<double>(std::llround(v), lo, hi));
}

class Fixed final : public ScalingPolicy {
 public:
  explicit Fixed(int replicas) : replicas_(replicas) {}
  const char* name() const override { return "fixed"; }
  int initialReplicas() const override { return replicas_; }
  ScalingDecision decide(const ScalingInputs& in) const override { return decision(in, replicas_, 1.0, "fixed"); }

 private:
  int replicas_;
};

class Schedule final : public ScalingPolicy {
 public:
  Schedule(std::map<std::int64_t, int> table, int before) : table_(std::move(table)), before_(before) {}
  const char* name() const override { return "schedule"; }
  int initialReplicas() const override { return at(1); }
  ScalingDecision decide(const ScalingInputs& in) const override {
    const int r = at(in.epoch);
    return decision(in, r, 1.0, fmt::format("schedule: {} replicas from epoch {}", r, in.epoch));
  }

 private:
  int at(std::int64_t epoch) const {
    auto it = table_.upper_bound(epoch);
    return it == table_.begin() ? before_ : std::prev(it)->second;
  }
  std::map<std::int64_t, int> table_;
  int before_;
};

class AdaBatch final : public ScalingPolicy {
 public:
  AdaBatch(int lo, int hi, std::int64_t every, double decay) : lo_(lo), hi_(hi), every_(every), decay_(decay) {}
  const char* name() const override { return "adabatch"; }
  int initialReplicas() const override { return lo_; }
  ScalingDecision decide(const ScalingInputs& in) const override {
    // Doublings so far, stopping at the maximum.
    int doublings = 0;
    std::int64_t r = lo_;
    for (std::int64_t k = (in.epoch - 1) / every_; k > 0 && r * 2 <= hi_; --k) {
      r *= 2;
      ++doublings;
    }
    return decision(in, static_cast<int>(r), std::pow(decay_, doublings),
                    fmt::format("adabatch: {} replicas from epoch {} (learning rate x{:.4g})", r, in.epoch,
                                std::pow(decay_, doublings)));
  }

 private:
  int lo_, hi_;
  std::int64_t every_;
  double decay_;
};

// NOTE [Scaling rules]
// A rule is a muparser expression (C-like: + - * / ^, comparisons, && ||,
// ?:, min, max, rint, floor, ceil, log2, ...) over the variables below; its value, rounded
// and clamped to [min_replicas, max_replicas], is the replicas from the
// boundary on.
struct RuleVariables {
  double epoch = 1, step = 0, replicas = 1, min_replicas = 1, max_replicas = 1, test_accuracy = -1, loss = 0,
         epoch_seconds = 0, samples_per_s = 0, cost_usd = 0;
};

double floorOf(double x) { return std::floor(x); }
double ceilOf(double x) { return std::ceil(x); }

void defineVariables(mu::Parser& p, RuleVariables& v) {
  p.DefineFun("floor", floorOf);
  p.DefineFun("ceil", ceilOf);
  p.DefineVar("epoch", &v.epoch);
  p.DefineVar("step", &v.step);
  p.DefineVar("replicas", &v.replicas);
  p.DefineVar("min_replicas", &v.min_replicas);
  p.DefineVar("max_replicas", &v.max_replicas);
  p.DefineVar("test_accuracy", &v.test_accuracy);
  p.DefineVar("loss", &v.loss);
  p.DefineVar("epoch_seconds", &v.epoch_seconds);
  p.DefineVar("samples_per_s", &v.samples_per_s);
  p.DefineVar("cost_usd", &v.cost_usd);
}

// Compiles `rule`, evaluating it once on sample values so that unknown
// variables and syntax errors surface now.
Status checkRule(const std::string& rule, const std::string& where) {
  if (rule.empty()) return invalidArgument(fmt::format("{}: the rule policy needs a rule, e.g. \"test_accuracy < "
                                                       "0.85 ? replicas * 2 : replicas\"", where));
  try {
    RuleVariables v;
    mu::Parser p;
    defineVariables(p, v);
    p.SetExpr(rule);
    (void)p.Eval();
  } catch (const mu::Parser::exception_type& e) {
    return invalidArgument(fmt::format("{}: \"{}\": {} (variables: epoch, step, replicas, min_replicas, "
                                       "max_replicas, test_accuracy, loss, epoch_seconds, samples_per_s, cost_usd)",
                                       where, rule, e.GetMsg()));
  }
  return Status();
}

class Rule final : public ScalingPolicy {
 public:
  Rule(std::string rule, int lo, int hi, int initial) : rule_(std::move(rule)), lo_(lo), hi_(hi), initial_(initial) {}
  const char* name() const override { return "rule"; }
  int initialReplicas() const override { return initial_; }
  bool usesMetrics() const override { return true; }
  ScalingDecision decide(const ScalingInputs& in) const override {
    RuleVariables v;
    v.epoch = static_cast<double>(in.epoch);
    v.step = static_cast<double>(in.step);
    v.replicas = in.replicas;
    v.min_replicas = lo_;
    v.max_replicas = hi_;
    v.test_accuracy = in.test_accuracy;
    v.loss = in.loss;
    v.epoch_seconds = in.epoch_seconds;
    v.samples_per_s = in.samples_per_s;
    v.cost_usd = in.cost_usd;
    double value = in.replicas;
    try {
      mu::Parser p;  // a parser per call keeps decide() const and thread-safe
      defineVariables(p, v);
      p.SetExpr(rule_);
      value = p.Eval();
    } catch (const mu::Parser::exception_type& e) {
      return {in.replicas, 1.0, fmt::format("rule: \"{}\" failed ({}); keeping {} replicas", rule_, e.GetMsg(),
                                            in.replicas)};
    }
    const int r = clampReplicas(value, lo_, hi_);
    return decision(in, r, 1.0,
                    fmt::format("rule: \"{}\" = {:.4g} -> {} replicas from epoch {}", rule_, value, r, in.epoch));
  }

 private:
  std::string rule_;
  int lo_, hi_, initial_;
};

}  // namespace

Status validateScalingSpec(const ScalingSpec& s, const std::string& origin) {
  auto bad = [&](const std::string& field, const std::string& why) {
    return invalidArgument(fmt::format("{}: scaling.{}: {}", origin, field, why));
  };
  if (s.policy != "fixed" && s.policy != "schedule" && s.policy != "adabatch" && s.policy != "rule") {
    return bad("policy", fmt::format("unknown policy \"{}\"; use fixed, schedule, adabatch or rule", s.policy));
  }
  if (s.min_replicas < 1) return bad("min_replicas", "must be at least 1");
  if (s.max_replicas != 0 && s.max_replicas < s.min_replicas) {
    return bad("max_replicas", fmt::format("must be at least min_replicas ({})", s.min_replicas));
  }
  if (s.every_epochs < 1) return bad("every_epochs", "must be at least 1");
  if (!(s.lr_decay > 0 && s.lr_decay <= 1)) return bad("lr_decay", "must be in (0, 1]");
  if (s.every_steps < 0) return bad("every_steps", "must not be negative");
  if (s.policy == "schedule") {
    if (s.schedule.empty()) return bad("schedule", "the schedule policy needs a table, e.g. {1: 1, 3: 2, 5: 4}");
    for (const auto& [epoch, replicas] : s.schedule) {
      if (epoch < 1) return bad("schedule", fmt::format("epoch {} is not an epoch (they count from 1)", epoch));
      if (replicas < 1) return bad("schedule", fmt::format("epoch {}: {} replicas (at least 1)", epoch, replicas));
    }
  }
  if (s.policy == "rule") return checkRule(s.rule, origin + ": scaling.rule");
  return Status();
}

Result<std::unique_ptr<ScalingPolicy>> ScalingPolicy::make(const ScalingSpec& s, int planReplicas) {
  HZ_RETURN_IF_ERROR(validateScalingSpec(s, "the job"));
  if (planReplicas < 1) return invalidArgument("the plan has no data-parallel replicas");
  const int hi = s.max_replicas > 0 ? s.max_replicas : std::max(planReplicas, s.min_replicas);
  std::unique_ptr<ScalingPolicy> p;
  if (s.policy == "fixed") {
    p.reset(new Fixed(planReplicas));
  } else if (s.policy == "schedule") {
    p.reset(new Schedule(s.schedule, planReplicas));
  } else if (s.policy == "adabatch") {
    p.reset(new AdaBatch(s.min_replicas, hi, s.every_epochs, s.lr_decay));
  } else {
    p.reset(new Rule(s.rule, s.min_replicas, hi, std::clamp(planReplicas, s.min_replicas, hi)));
  }
  p->replan_ = s.replan;
  return p;
}

}  // namespace hydrozoa::cluster
