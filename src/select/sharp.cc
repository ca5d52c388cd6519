#include "select/sharp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <tuple>

#include "plan/solver/milp.h"

namespace hydrozoa::select {

namespace {

constexpr std::int64_t kMaxSimulatedUnits = 100'000'000;
constexpr size_t kMaxTimeline = 100'000;
constexpr std::int64_t kMaxMilpUnits = 40;

Seconds unitSeconds(const ShardUnit& u) { return u.load + u.compute; }

Seconds tailSeconds(const ModelWork& m) {
  Seconds s = 0;
  for (const ShardUnit& u : m.tail) s += unitSeconds(u);
  return s;
}

Seconds minibatchSeconds(const ModelWork& m) {
  Seconds s = 0;
  for (const ShardUnit& u : m.units) s += unitSeconds(u);
  return s;
}

Status checkModels(const std::vector<ModelWork>& models, int workers) {
  if (workers < 1 || workers > 4096) return invalidArgument(fmt::format("{} workers: from 1 to 4096", workers));
  if (models.empty()) return invalidArgument("no models to train");
  std::int64_t units = 0;
  for (const ModelWork& m : models) {
    if (m.units.empty() || m.minibatches < 1) {
      return invalidArgument(fmt::format("model {} has no units to run", m.name));
    }
    std::vector<ShardUnit> all = m.units;
    all.insert(all.end(), m.tail.begin(), m.tail.end());
    for (const ShardUnit& u : all) {
      if (!(u.load >= 0 && u.compute >= 0) || !std::isfinite(u.load) || !std::isfinite(u.compute)) {
        return invalidArgument(fmt::format("model {}: a unit's load {} s and compute {} s must be times", m.name,
                                           u.load, u.compute));
      }
    }
    if (m.minibatches > kMaxSimulatedUnits / static_cast<std::int64_t>(m.units.size()) ||
        m.tail.size() > static_cast<size_t>(kMaxSimulatedUnits) ||
        (units += m.totalUnits()) > kMaxSimulatedUnits) {
      return invalidArgument(fmt::format("more than {} units to schedule", kMaxSimulatedUnits));
    }
  }
  return Status();
}

}  // namespace

std::int64_t ModelWork::totalUnits() const {
  return minibatches * static_cast<std::int64_t>(units.size()) + static_cast<std::int64_t>(tail.size());
}

const ShardUnit& ModelWork::unit(std::int64_t k) const {
  const auto n = static_cast<std::int64_t>(units.size());
  return k < minibatches * n ? units[static_cast<size_t>(k % n)] : tail[static_cast<size_t>(k - minibatches * n)];
}

Result<Order> parseOrder(const std::string& name) {
  if (name == "lrtf") return Order::kLrtf;
  if (name == "random") return Order::kRandom;
  if (name == "round_robin") return Order::kRoundRobin;
  if (name == "sequential") return Order::kSequential;
  return invalidArgument(
      fmt::format("unknown shard scheduler \"{}\"; known: lrtf, random, round_robin, sequential", name));
}

const char* orderName(Order order) {
  switch (order) {
    case Order::kLrtf: return "lrtf";
    case Order::kRandom: return "random";
    case Order::kRoundRobin: return "round_robin";
    case Order::kSequential: return "sequential";
  }
  return "?";
}

ShardScheduler::ShardScheduler(std::vector<ModelWork> models, Order order, std::uint64_t seed)
    : models_(std::move(models)), order_(order), rng_(seed) {
  next_.assign(models_.size(), 0);
  running_.assign(models_.size(), false);
  for (const ModelWork& m : models_) {
    perMinibatch_.push_back(minibatchSeconds(m));
    left_ += m.totalUnits();
  }
}

Seconds ShardScheduler::remaining(int model) const {
  const auto i = static_cast<size_t>(model);
  const ModelWork& m = models_[i];
  const auto n = static_cast<std::int64_t>(m.units.size());
  const std::int64_t first = next_[i] - (running_[i] ? 1 : 0);  // its first unit not finished
  if (first >= m.minibatches * n) {
    Seconds s = 0;
    for (std::int64_t k = first; k < m.totalUnits(); ++k) s += unitSeconds(m.unit(k));
    return s;
  }
  Seconds s = static_cast<double>(m.minibatches - first / n - 1) * perMinibatch_[i] + tailSeconds(m);
  for (std::int64_t k = first % n; k < n; ++k) s += unitSeconds(m.units[static_cast<size_t>(k)]);
  return s;
}

int ShardScheduler::pick() {
  std::vector<int> ready;
  for (size_t m = 0; m < models_.size(); ++m) {
    if (!running_[m] && next_[m] < models_[m].totalUnits()) {
      ready.push_back(static_cast<int>(m));
    }
  }
  if (ready.empty()) return -1;
  switch (order_) {
    case Order::kSequential:
      for (bool r : running_) {
        if (r) return -1;
      }
      return ready[0];
    case Order::kLrtf: {
      int best = ready[0];
      for (int m : ready) {
        if (remaining(m) > remaining(best)) best = m;
      }
      return best;
    }
    case Order::kRandom:
      return ready[static_cast<size_t>(rng_() % ready.size())];
    case Order::kRoundRobin: {
      for (int m : ready) {
        if (m > last_) return last_ = m;
      }
      return last_ = ready[0];
    }
  }
  return -1;
}

void ShardScheduler::started(int model) {
  running_[static_cast<size_t>(model)] = true;
  ++next_[static_cast<size_t>(model)];
}

void ShardScheduler::finished(int model) {
  running_[static_cast<size_t>(model)] = false;
  --left_;
}

void ShardScheduler::dropped(int model) {
  const auto i = static_cast<size_t>(model);
  left_ -= models_[i].totalUnits() - (next_[i] - (running_[i] ? 1 : 0));
  next_[i] = models_[i].totalUnits();
  running_[i] = false;
}

void ShardScheduler::resumeAt(int model, std::int64_t next) {
  const auto i = static_cast<size_t>(model);
  HZ_CHECK(!running_[i] && next_[i] == 0 && next >= 0 && next <= models_[i].totalUnits());
  next_[i] = next;
  left_ -= next;
}

void ShardScheduler::abandoned(int model) {
  HZ_CHECK(running_[static_cast<size_t>(model)]);
  running_[static_cast<size_t>(model)] = false;
  --next_[static_cast<size_t>(model)];
}

Result<SharpResult> simulateSharp(const std::vector<ModelWork>& models, const SharpOptions& o) {
  HZ_RETURN_IF_ERROR(checkModels(models, o.workers));
  ShardScheduler sched(models, o.order, o.seed);
  struct Worker {
    int cur = -1, pre = -1;         // the model whose unit it computes; whose unit it loads
    std::int64_t curUnit = 0, preUnit = 0;
    Seconds curStart = 0, curEnd = 0, preReady = 0;
    Seconds wake = -1;              // its next event; -1: none
  };
  std::vector<Worker> w(static_cast<size_t>(o.workers));
  using Event = std::pair<Seconds, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  SharpResult r;
  double busy = 0;
  const auto unitOf = [&](int m, std::int64_t k) -> const ShardUnit& { return models[static_cast<size_t>(m)].unit(k); };
  const auto take = [&](Worker& x, Seconds t) {  // start loading the next unit of the model the order picks
    const int m = sched.pick();
    if (m < 0) return;
    x.pre = m;
    x.preUnit = sched.nextUnit(m);
    x.preReady = t + unitOf(m, x.preUnit).load;
    sched.started(m);
  };
  // Moves worker `i` on at time t, and sets its next event.
  const std::function<void(size_t, Seconds)> advance = [&](size_t i, Seconds t) {
    Worker& x = w[i];
    if (x.cur >= 0 && x.curEnd <= t) {
      busy += x.curEnd - x.curStart;
      if (o.timeline && r.timeline.size() < kMaxTimeline) {
        r.timeline.push_back({static_cast<int>(i), x.cur, x.curUnit, x.curStart, x.curEnd});
      }
      r.makespan = std::max(r.makespan, x.curEnd);
      sched.finished(x.cur);
      x.cur = -1;
    }
    if (x.cur < 0 && x.pre < 0) take(x, t);
    if (x.cur < 0 && x.pre >= 0 && x.preReady <= t) {
      x.cur = x.pre;
      x.curUnit = x.preUnit;
      x.curStart = t;
      x.curEnd = t + unitOf(x.cur, x.curUnit).compute;
      x.pre = -1;
    }
    if (o.double_buffer && x.cur >= 0 && x.pre < 0) take(x, t);
    x.wake = x.cur >= 0 ? x.curEnd : x.pre >= 0 ? x.preReady : -1;
    if (x.wake >= 0) events.emplace(x.wake, static_cast<int>(i));
  };
  for (size_t i = 0; i < w.size(); ++i) advance(i, 0);
  while (!events.empty()) {
    const auto [t, i] = events.top();
    events.pop();
    if (w[static_cast<size_t>(i)].wake != t) continue;  // superseded
    advance(static_cast<size_t>(i), t);
    // A unit done makes its model's next ready: idle workers (and, double
    // buffering, computing ones with nothing loading) take it.
    for (size_t k = 0; k < w.size(); ++k) {
      const Worker& x = w[k];
      if (x.cur < 0 && x.pre < 0) {
        advance(k, t);
      } else if (o.double_buffer && x.cur >= 0 && x.pre < 0) {
        take(w[k], t);  // loads while it computes; its compute's end is its event still
      }
    }
  }
  if (!sched.done()) return internalError("the shard schedule stopped with units left");
  r.utilisation = r.makespan > 0 ? busy / (o.workers * r.makespan) : 0;
  return r;
}

Seconds oneAfterAnother(const std::vector<ModelWork>& models) {
  Seconds s = 0;
  for (const ModelWork& m : models) s += minibatchSeconds(m) * static_cast<double>(m.minibatches) + tailSeconds(m);
  return s;
}

Result<SharpResult> optimalSharp(const std::vector<ModelWork>& models, int workers, Seconds limit) {
  HZ_RETURN_IF_ERROR(checkModels(models, workers));
  struct Unit {
    int model;
    std::int64_t index;
    Seconds load, seconds;
  };
  std::vector<Unit> units;
  for (size_t m = 0; m < models.size(); ++m) {
    const ModelWork& model = models[m];
    for (std::int64_t k = 0; k < model.totalUnits(); ++k) {
      const ShardUnit& u = model.unit(k);
      units.push_back({static_cast<int>(m), k, u.load, unitSeconds(u)});
      if (static_cast<std::int64_t>(units.size()) > kMaxMilpUnits) {
        return invalidArgument(fmt::format("the exact schedule is for at most {} units (an NP-hard job shop); "
                                           "this workload has more",
                                           kMaxMilpUnits));
      }
    }
  }
  const double big = oneAfterAnother(models) + 1;  // no schedule is longer than one after another
  plan::Milp lp;
  const int c = lp.addVariable(0, big, 1.0, false);
  std::vector<int> start;
  std::vector<std::vector<int>> on(units.size());  // on[u][p]: unit u runs on worker p
  for (size_t u = 0; u < units.size(); ++u) {
    start.push_back(lp.addVariable(0, big, 0.0, false));
    lp.addConstraint({{c, 1.0}, {start[u], -1.0}}, plan::Milp::kAtLeast, units[u].seconds);
    if (u > 0 && units[u].model == units[u - 1].model) {  // after its model's unit before
      lp.addConstraint({{start[u], 1.0}, {start[u - 1], -1.0}}, plan::Milp::kAtLeast, units[u - 1].seconds);
    }
    std::vector<std::pair<int, double>> one;
    for (int p = 0; p < workers; ++p) {
      on[u].push_back(workers == 1 ? -1 : lp.addVariable(0, 1, 0.0, true));
      if (workers > 1) one.emplace_back(on[u].back(), 1.0);
    }
    if (workers > 1) lp.addConstraint(one, plan::Milp::kEqual, 1);
  }
  if (workers > 1) lp.addConstraint({{on[0][0], 1.0}}, plan::Milp::kEqual, 1);  // the workers are alike
  // Two units of different models on one worker: one after the other.
  for (size_t u = 0; u < units.size(); ++u) {
    for (size_t v = u + 1; v < units.size(); ++v) {
      if (units[u].model == units[v].model) continue;
      const int after = lp.addVariable(0, 1, 0.0, true);  // 1: u after v
      for (int p = 0; p < workers; ++p) {
        std::vector<std::pair<int, double>> uAfter = {{start[u], 1.0}, {start[v], -1.0}, {after, -big}};
        std::vector<std::pair<int, double>> vAfter = {{start[v], 1.0}, {start[u], -1.0}, {after, big}};
        double slack = 0;
        if (workers > 1) {  // binding only when both are on p
          for (auto* t : {&uAfter, &vAfter}) {
            t->emplace_back(on[u][static_cast<size_t>(p)], -big);
            t->emplace_back(on[v][static_cast<size_t>(p)], -big);
          }
          slack = 2 * big;
        }
        lp.addConstraint(uAfter, plan::Milp::kAtLeast, units[v].seconds - big - slack);
        lp.addConstraint(vAfter, plan::Milp::kAtLeast, units[u].seconds - slack);
      }
    }
  }
  HZ_ASSIGN_OR_RETURN(const plan::Milp::Solution s, lp.solve(limit));
  SharpResult r;
  r.makespan = s.values[static_cast<size_t>(c)];
  double busy = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    int worker = 0;
    for (int p = 0; p < workers; ++p) {
      if (workers > 1 && s.values[static_cast<size_t>(on[u][static_cast<size_t>(p)])] > 0.5) worker = p;
    }
    const Seconds at = s.values[static_cast<size_t>(start[u])];
    r.timeline.push_back({worker, units[u].model, units[u].index, at + units[u].load, at + units[u].seconds});
    busy += units[u].seconds - units[u].load;
  }
  r.utilisation = r.makespan > 0 ? busy / (workers * r.makespan) : 0;
  return r;
}

}  // namespace hydrozoa::select
