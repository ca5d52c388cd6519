#include "cluster/job_spec.h"

#include <fmt/format.h>

#include <filesystem>

#include <cmath>
#include <random>
#include <set>
#include <sstream>

#include "plan/cost/schedules.h"
#include "runtime/comm/redis/redis_client.h"

namespace hydrozoa::cluster {
namespace {

// A scalar option value as text ("32", "0.5", "true", "net").
std::string scalarText(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  return fmt::format("{}", v.get<double>());
}

void readModel(ObjectReader& top, JobSpec* s) {
  const Json* raw = top.raw("model");
  if (!raw) {
    top.fail("model", "missing (give model.name: a zoo model such as cnn, or a TorchScript file)");
    return;
  }
  if (raw->is_string()) {  // "model: cnn" is short for {name: cnn}
    s->model = raw->get<std::string>();
    return;
  }
  ObjectReader r(*raw, top.child("model"));
  s->model = r.string("name");
  if (const Json* options = r.raw("options")) {
    if (!options->is_object()) {
      r.fail("options", "expected a map of option: value");
    } else {
      for (const auto& item : options->items()) {
        if (item.value().is_object() || item.value().is_array() || item.value().is_null()) {
          r.fail("options", fmt::format("{} must be a single value", item.key()));
          break;
        }
        s->model_options.emplace_back(item.key(), scalarText(item.value()));
      }
    }
  }
  r.rejectUnknownKeys();
  top.adopt(r.status());
}

void readData(ObjectReader& top, JobSpec* s) {
  const Json* raw = top.raw("data");
  if (!raw) return;
  ObjectReader r(*raw, top.child("data"));
  s->dataset = r.optString("dataset").value_or(s->dataset);
  s->data_path = r.optString("path").value_or("");
  if (r.has("shuffle")) s->shuffle = r.boolean("shuffle");
  if (r.has("drop_last")) s->drop_last = r.boolean("drop_last");
  s->synthetic_train = r.optCount("synthetic_train", kSamplesRange).value_or(s->synthetic_train);
  s->synthetic_test = r.optCount("synthetic_test", kSamplesRange).value_or(s->synthetic_test);
  r.rejectUnknownKeys();
  top.adopt(r.status());
}

void readOptimizer(ObjectReader& parent, OptimizerSpec* o) {
  const Json* raw = parent.raw("optimizer");
  if (!raw) return;
  if (raw->is_string()) {
    o->name = raw->get<std::string>();
    return;
  }
  ObjectReader r(*raw, parent.child("optimizer"));
  o->name = r.optString("name").value_or(o->name);
  if (r.has("lr")) o->lr = r.positive("lr");
  if (r.has("momentum")) o->momentum = r.nonNegative("momentum");
  if (r.has("nesterov")) o->nesterov = r.boolean("nesterov");
  if (r.has("weight_decay")) o->weight_decay = r.nonNegative("weight_decay");
  if (r.has("beta1")) o->beta1 = r.nonNegative("beta1");
  if (r.has("beta2")) o->beta2 = r.nonNegative("beta2");
  if (r.has("eps")) o->eps = r.positive("eps");
  r.rejectUnknownKeys();
  parent.adopt(r.status());
}

void readSchedule(ObjectReader& parent, LrScheduleSpec* l) {
  const Json* raw = parent.raw("lr_schedule");
  if (!raw) return;
  if (raw->is_string()) {
    l->name = raw->get<std::string>();
    return;
  }
  ObjectReader r(*raw, parent.child("lr_schedule"));
  l->name = r.optString("name").value_or(l->name);
  l->warmup_steps = r.optCount("warmup_steps", {0, kStepsRange.max}).value_or(l->warmup_steps);
  l->step_epochs = r.optCount("step_epochs", kStepsRange).value_or(l->step_epochs);
  if (r.has("gamma")) l->gamma = r.positive("gamma");
  if (r.has("min_lr")) l->min_lr = r.nonNegative("min_lr");
  r.rejectUnknownKeys();
  parent.adopt(r.status());
}

void readLossScale(ObjectReader& parent, JobSpec* s) {
  const Json* raw = parent.raw("loss_scale");
  if (!raw) return;
  ObjectReader r(*raw, parent.child("loss_scale"));
  if (r.has("initial")) s->loss_scale_initial = r.positive("initial");
  s->loss_scale_growth_interval = r.optCount("growth_interval", kStepsRange).value_or(s->loss_scale_growth_interval);
  r.rejectUnknownKeys();
  parent.adopt(r.status());
}

void readTraining(ObjectReader& top, JobSpec* s) {
  const Json* raw = top.raw("training");
  if (!raw) return;
  ObjectReader r(*raw, top.child("training"));
  s->epochs = r.optCount("epochs", kStepsRange).value_or(s->epochs);
  s->max_steps = r.optCount("max_steps", kStepsRange);
  s->global_batch = r.optCount("global_batch", kSamplesRange).value_or(s->global_batch);
  readOptimizer(r, &s->optimizer);
  readSchedule(r, &s->lr_schedule);
  s->seed = static_cast<std::uint64_t>(r.optInteger("seed", 0).value_or(0));
  if (r.has("eval")) s->eval = r.boolean("eval");
  s->threads = static_cast<int>(r.optCount("threads", kThreadsRange).value_or(s->threads));
  s->device = r.optString("device").value_or(s->device);
  s->precision = r.optString("precision").value_or(s->precision);
  readLossScale(r, s);
  r.rejectUnknownKeys();
  top.adopt(r.status());
}

void readCluster(ObjectReader& top, JobSpec* s) {
  const Json* raw = top.raw("cluster");
  if (!raw) return;
  ObjectReader r(*raw, top.child("cluster"));
  s->workers = static_cast<int>(r.optCount("workers", kWorkersRange).value_or(s->workers));
  s->launcher = r.optString("launcher").value_or(s->launcher);
  if (r.has("bandwidth")) s->bandwidth = r.bandwidth("bandwidth");
  if (r.has("memory")) s->memory = r.bytes("memory");
  if (r.has("latency")) s->latency = r.seconds("latency");
  if (auto d = r.optString("start_delay")) {
    auto parsed = parseStartDelay(*d, r.child("start_delay"));
    if (parsed.ok()) {
      s->start_delay = *parsed;
    } else {
      r.adopt(parsed.status());
    }
  }
  if (r.has("memory_limit")) s->memory_limit = r.bytes("memory_limit");
  if (r.has("cpu_limit")) s->cpu_limit = r.positive("cpu_limit");
  s->platform = r.optString("platform").value_or(s->platform);
  if (r.has("heartbeat_interval")) s->heartbeat_interval = r.seconds("heartbeat_interval");
  if (r.has("heartbeat_timeout")) s->heartbeat_timeout = r.seconds("heartbeat_timeout");
  if (r.has("start_timeout")) s->start_timeout = r.seconds("start_timeout");
  s->max_recoveries = static_cast<int>(r.optCount("max_recoveries", {0, 1000}).value_or(s->max_recoveries));
  s->control_port = static_cast<int>(r.optCount("control_port", {0, 65535}).value_or(0));
  s->channel = r.optString("channel").value_or(s->channel);
  s->channel_password_file = r.optString("channel_password_file").value_or(s->channel_password_file);
  s->channel_sync = r.optString("channel_sync").value_or(s->channel_sync);
  if (r.has("channel_timeout")) s->channel_timeout = r.seconds("channel_timeout");
  if (r.has("function_timeout")) s->function_timeout = r.seconds("function_timeout");
  if (const Json* stragglers = r.raw("stragglers")) {
    auto parsed = readStragglers(*stragglers, r.child("stragglers"));
    if (parsed.ok()) {
      s->stragglers = *parsed;
    } else {
      r.adopt(parsed.status());
    }
  }
  if (const Json* tiers = r.raw("tiers")) {
    auto parsed = readTiers(*tiers, r.child("tiers"));
    if (parsed.ok()) {
      s->tiers = *parsed;
    } else {
      r.adopt(parsed.status());
    }
  }
  if (const Json* slurm = r.raw("slurm")) {
    ObjectReader q(*slurm, r.child("slurm"));
    s->slurm.partition = q.optString("partition").value_or("");
    s->slurm.account = q.optString("account").value_or("");
    if (auto args = q.optString("args")) s->slurm.args = splitWords(*args);
    s->slurm.coordinator_host = q.optString("coordinator_host").value_or("");
    if (q.has("allocation_timeout")) s->slurm.allocation_timeout = q.seconds("allocation_timeout");
    q.rejectUnknownKeys();
    r.adopt(q.status());
  }
  r.rejectUnknownKeys();
  top.adopt(r.status());
}

void readPlan(ObjectReader& top, JobSpec* s) {
  const Json* raw = top.raw("plan");
  if (!raw) return;
  if (raw->is_string()) {  // "auto", or a plan.json path
    if (raw->get<std::string>() != "auto") s->plan_file = raw->get<std::string>();
    return;
  }
  ObjectReader r(*raw, top.child("plan"));
  s->plan_file = r.optString("file").value_or("");
  s->profile_file = r.optString("profile").value_or("");
  if (auto v = r.optCount("data_parallel", kWorkersRange)) s->data_parallel = static_cast<int>(*v);
  if (auto v = r.optCount("stages", kWorkersRange)) s->stages = static_cast<int>(*v);
  if (auto v = r.optCount("tensor_parallel", kWorkersRange)) s->tensor_parallel = static_cast<int>(*v);
  if (r.has("scatter_gather")) s->scatter_gather = r.boolean("scatter_gather");
  s->microbatches = r.optCount("microbatches", kMicrobatchesRange);
  s->microbatch_size = r.optCount("microbatch_size", kSamplesRange);
  s->schedule = r.optString("schedule");
  if (auto v = r.optCount("chunks", kChunksRange)) s->chunks = static_cast<int>(*v);
  if (r.has("recompute")) s->recompute = r.boolean("recompute");
  if (s->schedule) {
    r.adopt(plan::parseSchedule(*s->schedule, r.child("schedule")).status());
  }
  s->objective = r.optString("objective").value_or(s->objective);
  r.rejectUnknownKeys();
  top.adopt(r.status());
}

void readScaling(ObjectReader& top, JobSpec* s) {
  const Json* raw = top.raw("scaling");
  if (!raw) return;
  if (raw->is_string()) {  // scaling: adabatch
    s->scaling.policy = raw->get<std::string>();
    return;
  }
  ObjectReader r(*raw, top.child("scaling"));
  ScalingSpec& sc = s->scaling;
  sc.policy = r.optString("policy").value_or(sc.policy);
  sc.min_replicas = static_cast<int>(r.optCount("min_replicas", kWorkersRange).value_or(sc.min_replicas));
  sc.max_replicas = static_cast<int>(r.optCount("max_replicas", {0, kWorkersRange.max}).value_or(sc.max_replicas));  // 0: the plan's
  sc.every_epochs = r.optCount("every_epochs", kStepsRange).value_or(sc.every_epochs);
  sc.every_steps = r.optCount("every_steps", {0, kStepsRange.max}).value_or(sc.every_steps);
  if (r.has("lr_decay")) sc.lr_decay = r.positive("lr_decay");
  if (r.has("replan")) sc.replan = r.boolean("replan");
  sc.rule = r.optString("rule").value_or("");
  if (const Json* table = r.raw("schedule")) {
    if (!table->is_object()) {
      r.fail("schedule", "expected a table of epoch: replicas, e.g. {1: 1, 3: 2, 5: 4}");
    } else {
      for (const auto& [epoch, replicas] : table->items()) {
        auto e = parseCount(epoch, "epoch", kStepsRange);
        // JSON reads positive numbers as unsigned: compare before any narrowing.
        const bool replicasOk =
            replicas.is_number_unsigned()
                ? replicas.get<std::uint64_t>() <= static_cast<std::uint64_t>(kWorkersRange.max) &&
                      replicas.get<std::uint64_t>() >= static_cast<std::uint64_t>(kWorkersRange.min)
                : replicas.is_number_integer() && inRange(replicas.get<std::int64_t>(), kWorkersRange);
        if (!e.ok() || !replicasOk) {
          r.fail("schedule", fmt::format("\"{}: {}\" is not epoch: replicas (epochs from 1, replicas {})", epoch,
                                         replicas.dump(), describeRange(kWorkersRange)));
          break;
        }
        sc.schedule[*e] = static_cast<int>(replicas.get<std::int64_t>());
      }
    }
  }
  r.rejectUnknownKeys();
  top.adopt(r.status());
}

void readOutput(ObjectReader& top, JobSpec* s) {
  const Json* raw = top.raw("output");
  if (!raw) return;
  ObjectReader r(*raw, top.child("output"));
  s->out_dir = r.optString("dir").value_or("");
  s->checkpoint_every_epochs = r.optCount("checkpoint_every_epochs", {0, kStepsRange.max}).value_or(s->checkpoint_every_epochs);
  s->trace_steps = r.optCount("trace_steps", {0, kStepsRange.max}).value_or(s->trace_steps);
  s->checkpoint_dir = r.optString("checkpoint_dir").value_or("");
  r.rejectUnknownKeys();
  top.adopt(r.status());
}

}  // namespace

Result<StartDelay> parseStartDelay(const std::string& text, const std::string& what) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  auto bad = [&] {
    return invalidArgument(fmt::format("{}: \"{}\" is not a start-up delay; write 30s, fixed 30s, uniform 20s 60s "
                                       "(least, most) or normal 90s 30s (mean, standard deviation)",
                                       what, text));
  };
  StartDelay d;
  if (words.size() == 1) words.insert(words.begin(), "fixed");
  if (words.empty()) return bad();
  d.distribution = words[0];
  const std::size_t want = d.distribution == "fixed" ? 2 : 3;
  if ((d.distribution != "fixed" && d.distribution != "uniform" && d.distribution != "normal") ||
      words.size() != want) {
    return bad();
  }
  auto a = parseSeconds(words[1], what);
  if (!a.ok()) return bad();
  d.a = *a;
  if (want == 3) {
    auto b = parseSeconds(words[2], what);
    if (!b.ok()) return bad();
    d.b = *b;
  }
  if (d.distribution == "uniform" && d.b < d.a) return bad();
  return d;
}

std::string formatStartDelay(const StartDelay& d) {
  auto s = [](Seconds x) { return fmt::format("{}s", x); };
  if (d.distribution == "fixed") return s(d.a);
  return fmt::format("{} {} {}", d.distribution, s(d.a), s(d.b));
}

Seconds drawStartDelay(const StartDelay& d, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  if (d.distribution == "uniform") return std::uniform_real_distribution<double>(d.a, d.b)(rng);
  if (d.distribution == "normal") return std::max(0.0, std::normal_distribution<double>(d.a, d.b)(rng));
  return d.a;
}

namespace {

Json scalingToJson(const ScalingSpec& s) {
  Json j = {{"policy", s.policy},
            {"min_replicas", s.min_replicas},
            {"max_replicas", s.max_replicas},
            {"every_epochs", s.every_epochs},
            {"every_steps", s.every_steps},
            {"lr_decay", s.lr_decay},
            {"replan", s.replan}};
  if (!s.rule.empty()) j["rule"] = s.rule;
  if (!s.schedule.empty()) {
    Json table = Json::object();
    for (const auto& [epoch, replicas] : s.schedule) table[std::to_string(epoch)] = replicas;
    j["schedule"] = table;
  }
  return j;
}

// cluster.channel and its companions; errors name the field (the caller adds the file).
Status validateChannel(const JobSpec& s) {
  auto bad = [](const std::string& field, const std::string& what) {
    return invalidArgument(fmt::format("{}: {}", field, what));
  };
  if (s.channel_sync != "pipelined" && s.channel_sync != "lambdaml") {
    return bad("cluster.channel_sync", fmt::format("unknown method \"{}\"; use pipelined (FuncPipe's scatter-reduce) "
                                                   "or lambdaml (LambdaML's)",
                                                   s.channel_sync));
  }
  if (!(s.function_timeout >= 10 && s.function_timeout <= 24 * 3600)) {
    return bad("cluster.function_timeout", "must be from 10s to 24h (AWS Lambda's limit is 15min)");
  }
  if (!(s.channel_timeout >= 1 && s.channel_timeout <= 24 * 3600)) {
    return bad("cluster.channel_timeout", "must be from 1s to 24h");
  }
  if (s.channel.empty() || s.channel == "redis") {
    if (!s.channel_password_file.empty()) {
      return bad("cluster.channel_password_file",
                 "is the password of a Redis server of your own (cluster.channel: redis://HOST:PORT); a job that starts "
                 "its own (channel redis, or none given) generates one");
    }
    return Status();
  }
  return runtime::redis::parseUrl(s.channel, "cluster.channel").status();
}

}  // namespace

namespace {

// NOTE [Tiers are data-parallel replicas]: AgileML's tiers hold data-parallel
// workers; here each is a replica of one stage, and the transient ones leave
// and come back at step boundaries with the global batch unchanged
// (cluster/coordinator.cc), which a pipeline or a changing policy would not
// allow.
Status validateTierPlan(const JobSpec& s, const std::string& origin) {
  const TierSpec& t = s.tiers;
  if (!t.enabled()) return Status();
  HZ_RETURN_IF_ERROR(validateTiers(t, origin + ": cluster.tiers"));
  const int workers = t.reliable + t.transient;
  auto bad = [&](const std::string& m) {
    return invalidArgument(fmt::format("{}: cluster.tiers (reliable {}, transient {}): {}", origin, t.reliable,
                                       t.transient, m));
  };
  if (s.data_parallel && *s.data_parallel != workers) {
    return bad(fmt::format("each worker is a data-parallel replica, but plan.data_parallel is {}: drop it or make "
                           "it {}",
                           *s.data_parallel, workers));
  }
  if (s.stages.value_or(1) != 1 || s.tensor_parallel.value_or(1) != 1) {
    return bad("each worker is a whole replica of the model: use stages: 1 and tensor_parallel: 1");
  }
  if (s.scaling.policy != "fixed") {
    return bad(fmt::format("the tiers change the replicas at step boundaries; scaling.policy {} changes them at "
                           "epochs too: use one or the other",
                           s.scaling.policy));
  }
  if (!s.channel.empty() || s.launcher == "function" || s.launcher == "slurm") {
    return bad("replays a spot market for workers of this machine or its containers: use launcher local or "
               "container, without a channel");
  }
  if (s.global_batch % workers != 0) {
    return bad(fmt::format("{} replicas do not divide training.global_batch {}", workers, s.global_batch));
  }
  return Status();
}

}  // namespace

bool knownPrecision(const std::string& precision) {
  return precision == "fp32" || precision == "bf16" || precision == "fp16";
}

std::string fp16ScheduleProblem(const std::string& schedule) {
  return fmt::format("fp16 skips a step with an inf or NaN gradient on every worker at once, and the {} schedule "
                     "updates its stages at different steps: use a synchronous schedule (gpipe, 1f1b, interleaved) "
                     "or precision bf16",
                     schedule);
}

Status validateJobSpec(const JobSpec& s, const std::string& origin) {
  auto bad = [&](const std::string& field, const std::string& what) {
    return invalidArgument(fmt::format("{}: {}: {}", origin, field, what));
  };
  if (s.model.empty()) return bad("model.name", "missing (a zoo model such as cnn, or a TorchScript file)");
  static const std::set<std::string> kDatasets = {"fashion_mnist", "cifar10", "text", "synthetic"};
  if (!kDatasets.count(s.dataset)) {
    return bad("data.dataset", fmt::format("unknown dataset \"{}\"; use fashion_mnist, cifar10, text or synthetic",
                                           s.dataset));
  }
  if ((s.dataset == "cifar10" || s.dataset == "text") && s.data_path.empty()) {
    return bad("data.path", fmt::format("the {} dataset needs a path", s.dataset));
  }
  if (s.optimizer.name != "sgd" && s.optimizer.name != "adam") {
    return bad("training.optimizer.name", fmt::format("unknown optimizer \"{}\"; use sgd or adam", s.optimizer.name));
  }
  if (s.lr_schedule.name != "constant" && s.lr_schedule.name != "step" && s.lr_schedule.name != "cosine") {
    return bad("training.lr_schedule.name",
               fmt::format("unknown schedule \"{}\"; use constant, step or cosine", s.lr_schedule.name));
  }
  if (s.device != "auto" && s.device != "cpu" && s.device != "cuda") {
    return bad("training.device", fmt::format("\"{}\" must be auto, cpu or cuda", s.device));
  }
  if (!knownPrecision(s.precision)) {
    return bad("training.precision", fmt::format("\"{}\" must be fp32, bf16 or fp16", s.precision));
  }
  if (s.loss_scale_initial < 1 || s.loss_scale_initial > 0x1p64) {
    return bad("training.loss_scale.initial", "must be from 1 to 2^64 (fp16's gradients reach 65504; 65536 is usual)");
  }
  if (s.precision == "fp16" && s.schedule) {
    const auto kind = plan::parseSchedule(*s.schedule, "plan.schedule");
    if (kind.ok() && plan::asynchronous(*kind)) return bad("training.precision", fp16ScheduleProblem(*s.schedule));
  }
  if (s.launcher != "auto" && s.launcher != "local" && s.launcher != "container" && s.launcher != "function" &&
      s.launcher != "slurm") {
    return bad("cluster.launcher",
               fmt::format("unknown launcher \"{}\"; use auto, local, container, function or slurm", s.launcher));
  }
  if (s.slurm.allocation_timeout < 1 || s.slurm.allocation_timeout > 7 * 24 * 3600) {
    return bad("cluster.slurm.allocation_timeout", "must be from 1s to 7 days");
  }
  for (const std::string& a : s.slurm.args) {
    if (a.empty() || a[0] != '-') {
      return bad("cluster.slurm.args", fmt::format("\"{}\" is not an option: give salloc/srun options, one word "
                                                   "each (\"--time=2:00:00 --qos=low\")", a));
    }
  }
  if (s.latency < 0 || s.latency > 10) return bad("cluster.latency", "must be from 0 to 10s");
  if (Status c = validateChannel(s); !c.ok()) return c.withPrefix(origin);
  if (s.latency > 0 && s.launcher == "local") {
    return bad("cluster.latency", "is added by containers' network shaping; plain processes (launcher local) would "
                                  "ignore it: drop the latency or use launcher container (as root)");
  }
  if (s.memory_limit && *s.memory_limit < 16 * kMB) return bad("cluster.memory_limit", "must be at least 16MB");
  if (s.memory && *s.memory < 16 * kMB) return bad("cluster.memory", "must be at least 16MB");
  if (s.bandwidth && !(*s.bandwidth > 0)) return bad("cluster.bandwidth", "must be positive, e.g. 1Gbit/s");
  if (s.cpu_limit && !(*s.cpu_limit <= 4096)) return bad("cluster.cpu_limit", "must be at most 4096 vCPUs");
  if (!(s.start_timeout > 0)) return bad("cluster.start_timeout", "must be positive, e.g. 120s");
  if (s.epochs < 1) return bad("training.epochs", "must be at least 1");
  if (s.global_batch < 1) return bad("training.global_batch", "must be at least 1");
  if (s.workers < 1) return bad("cluster.workers", "must be at least 1");
  if (s.threads < 1) return bad("training.threads", "must be at least 1");
  if (!(s.heartbeat_interval > 0)) return bad("cluster.heartbeat_interval", "must be positive, e.g. 1s");
  if (!(s.heartbeat_timeout > s.heartbeat_interval)) {
    return bad("cluster.heartbeat_timeout", "must be longer than heartbeat_interval");
  }
  if (s.max_recoveries < 0 || s.max_recoveries > 1000) return bad("cluster.max_recoveries", "must be 0 to 1000");
  if (s.control_port < 0 || s.control_port > 65535) return bad("cluster.control_port", "must be 0 to 65535");
  if (!s.plan_file.empty() && !s.profile_file.empty()) {
    return bad("plan.profile", "is for planning here, but plan.file gives a plan already: keep one of them");
  }
  // Both at most kWorkersRange.max, so the product fits in 64 bits.
  const std::int64_t A = s.data_parallel.value_or(1), B = s.stages.value_or(1), T = s.tensor_parallel.value_or(1);
  if (s.data_parallel && s.stages && A * B * T > s.workers) {
    if (T > 1) {
      return bad("plan", fmt::format("data_parallel {} × stages {} × tensor_parallel {} needs {} workers but "
                                     "cluster.workers is {}",
                                     A, B, T, A * B * T, s.workers));
    }
    return bad("plan", fmt::format("data_parallel {} × stages {} needs {} workers but cluster.workers is {}", A, B,
                                   A * B, s.workers));
  }
  if (T > s.workers) {
    return bad("plan.tensor_parallel", fmt::format("{} needs at least {} workers but cluster.workers is {}", T, T,
                                                   s.workers));
  }
  if (T > 1 && !s.channel.empty()) {
    return bad("plan.tensor_parallel", "splits layers over workers that talk to each other directly, not through a "
                                       "channel: remove cluster.channel or use tensor_parallel: 1");
  }
  HZ_RETURN_IF_ERROR(validateScalingSpec(s.scaling, origin));
  HZ_RETURN_IF_ERROR(validateStragglers(s.stragglers, s.workers, origin + ": cluster.stragglers"));
  HZ_RETURN_IF_ERROR(validateFlexrr(s.flexrr, origin + ": flexrr"));
  HZ_RETURN_IF_ERROR(validateTierPlan(s, origin));
  if (s.data_parallel && s.global_batch % A != 0) {
    return bad("plan.data_parallel", fmt::format("{} replicas do not divide training.global_batch {}", A,
                                                 s.global_batch));
  }
  return Status();
}

std::vector<std::string> splitWords(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

void applyTiers(JobSpec* s) {
  if (!s->tiers.enabled()) return;
  const int workers = s->tiers.reliable + s->tiers.transient;
  if (!s->data_parallel) s->data_parallel = workers;
  if (!s->stages) s->stages = 1;
  s->workers = std::max(s->workers, workers);
}

Result<JobSpec> parseJobSpec(const Json& j, const std::string& origin) {
  JobSpec s;
  ObjectReader top(j, origin);
  HZ_RETURN_IF_ERROR(top.status());
  s.name = top.optString("name").value_or(s.name);
  readModel(top, &s);
  readData(top, &s);
  readTraining(top, &s);
  readCluster(top, &s);
  readPlan(top, &s);
  readScaling(top, &s);
  readOutput(top, &s);
  if (const Json* flexrr = top.raw("flexrr")) {
    auto parsed = readFlexrr(*flexrr, top.child("flexrr"));
    if (parsed.ok()) {
      s.flexrr = *parsed;
    } else {
      top.adopt(parsed.status());
    }
  }
  top.rejectUnknownKeys();
  HZ_RETURN_IF_ERROR(top.status());
  applyTiers(&s);
  HZ_RETURN_IF_ERROR(validateJobSpec(s, origin));
  return s;
}

Result<JobSpec> loadJobSpec(const std::string& path) {
  HZ_ASSIGN_OR_RETURN(Json j, readYamlFile(path));
  if (j.is_null()) return parseError(path + ": the file is empty");
  return parseJobSpec(j, path);
}

Json jobSpecToJson(const JobSpec& s) {
  Json options = Json::object();
  for (const auto& [k, v] : s.model_options) options[k] = v;
  Json plan = {{"objective", s.objective}};
  if (!s.plan_file.empty()) plan["file"] = s.plan_file;
  if (!s.profile_file.empty()) plan["profile"] = s.profile_file;
  if (s.data_parallel) plan["data_parallel"] = *s.data_parallel;
  if (s.stages) plan["stages"] = *s.stages;
  if (s.tensor_parallel) plan["tensor_parallel"] = *s.tensor_parallel;
  if (s.scatter_gather) plan["scatter_gather"] = *s.scatter_gather;
  if (s.microbatches) plan["microbatches"] = *s.microbatches;
  if (s.microbatch_size) plan["microbatch_size"] = *s.microbatch_size;
  if (s.schedule) plan["schedule"] = *s.schedule;
  if (s.chunks) plan["chunks"] = *s.chunks;
  if (s.recompute) plan["recompute"] = *s.recompute;
  Json training = {{"epochs", s.epochs},
                   {"global_batch", s.global_batch},
                   {"optimizer",
                    {{"name", s.optimizer.name},
                     {"lr", s.optimizer.lr},
                     {"momentum", s.optimizer.momentum},
                     {"nesterov", s.optimizer.nesterov},
                     {"weight_decay", s.optimizer.weight_decay},
                     {"beta1", s.optimizer.beta1},
                     {"beta2", s.optimizer.beta2},
                     {"eps", s.optimizer.eps}}},
                   {"lr_schedule",
                    {{"name", s.lr_schedule.name},
                     {"warmup_steps", s.lr_schedule.warmup_steps},
                     {"step_epochs", s.lr_schedule.step_epochs},
                     {"gamma", s.lr_schedule.gamma},
                     {"min_lr", s.lr_schedule.min_lr}}},
                   {"seed", s.seed},
                   {"eval", s.eval},
                   {"threads", s.threads},
                   {"device", s.device},
                   {"precision", s.precision}};
  if (s.precision == "fp16") {
    training["loss_scale"] = {{"initial", s.loss_scale_initial}, {"growth_interval", s.loss_scale_growth_interval}};
  }
  if (s.max_steps) training["max_steps"] = *s.max_steps;
  Json cluster = {{"workers", s.workers},
                  {"launcher", s.launcher},
                  {"platform", s.platform},
                  {"heartbeat_interval", s.heartbeat_interval},
                  {"heartbeat_timeout", s.heartbeat_timeout},
                  {"start_timeout", s.start_timeout},
                  {"max_recoveries", s.max_recoveries},
                  {"control_port", s.control_port}};
  if (s.bandwidth) cluster["bandwidth"] = *s.bandwidth;
  if (s.latency > 0) cluster["latency"] = s.latency;
  if (s.start_delay) cluster["start_delay"] = formatStartDelay(*s.start_delay);
  if (s.memory_limit) cluster["memory_limit"] = *s.memory_limit;
  if (s.cpu_limit) cluster["cpu_limit"] = *s.cpu_limit;
  if (s.memory) cluster["memory"] = *s.memory;
  if (s.launcher == "function") cluster["function_timeout"] = s.function_timeout;
  if (!s.channel.empty()) {
    cluster["channel"] = s.channel;
    cluster["channel_sync"] = s.channel_sync;
    cluster["channel_timeout"] = s.channel_timeout;
    if (!s.channel_password_file.empty()) cluster["channel_password_file"] = s.channel_password_file;
  }
  if (!s.stragglers.empty()) {
    Json list = Json::array();
    for (const StragglerSpec& x : s.stragglers) list.push_back(formatStraggler(x));
    cluster["stragglers"] = list;
  }
  if (s.tiers.enabled()) cluster["tiers"] = tiersToJson(s.tiers);
  if (s.launcher == "slurm") {
    std::string args;
    for (const auto& a : s.slurm.args) args += (args.empty() ? "" : " ") + a;
    cluster["slurm"] = {{"partition", s.slurm.partition},
                        {"account", s.slurm.account},
                        {"args", args},
                        {"coordinator_host", s.slurm.coordinator_host},
                        {"allocation_timeout", s.slurm.allocation_timeout}};
  }
  Json data = {{"dataset", s.dataset}, {"shuffle", s.shuffle}, {"drop_last", s.drop_last}};
  if (!s.data_path.empty()) data["path"] = s.data_path;
  if (s.dataset == "synthetic") {
    data["synthetic_train"] = s.synthetic_train;
    data["synthetic_test"] = s.synthetic_test;
  }
  return {{"name", s.name},
          {"model", {{"name", s.model}, {"options", options}}},
          {"data", data},
          {"training", training},
          {"cluster", cluster},
          {"plan", plan},
          {"scaling", scalingToJson(s.scaling)},
          {"flexrr", flexrrToJson(s.flexrr)},
          {"output",
           {{"dir", s.out_dir},
            {"checkpoint_every_epochs", s.checkpoint_every_epochs},
            {"checkpoint_dir", s.checkpoint_dir},
            {"trace_steps", s.trace_steps}}}};
}

void makePathsAbsolute(JobSpec* spec, bool modelIsFile) {
  auto absolute = [](std::string* path) {
    if (!path->empty()) *path = std::filesystem::absolute(*path).lexically_normal().string();
  };
  if (modelIsFile) absolute(&spec->model);
  absolute(&spec->data_path);
  absolute(&spec->plan_file);
  absolute(&spec->profile_file);
  absolute(&spec->checkpoint_dir);
  absolute(&spec->tiers.spot_trace);
}

}  // namespace hydrozoa::cluster
