#include "plan/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "core/limits.h"
#include "profile/field_checks.h"

namespace hydrozoa::plan {

std::string PlanStage::layersText() const {
  std::string out;
  for (const LayerRange& r : layerRanges()) out += fmt::format("{}{}-{}", out.empty() ? "" : " + ", r.first, r.last);
  return out;
}
namespace {

using profile::bytesIn;
using profile::kUsdPerHourRange;
using profile::NumberRange;
using profile::numberIn;
using profile::optBytesIn;
using profile::optNumberIn;

// Samples per second and per dollar: a thousand times more than the largest
// global batch every microsecond is more than any prediction.
constexpr NumberRange kRateRange{0, 1e15, "samples"};
constexpr NumberRange kBubbleRange{0, 1, "a fraction"};
// Sharing (up to 65,536 threads a core) times contention (kBusySlowdownRange).
constexpr NumberRange kComputeScaleRange{1, 65536.0 * 100, "a factor"};
// The allreduce fit's seconds per byte (profile/profile.cc reads the same).
constexpr NumberRange kAlphaRange{-1, 1, "seconds per byte"};
constexpr Range kSharedMemoryReplicasRange{2, kWorkersRange.max};
constexpr NumberRange kPlannedBandwidthRange{0, static_cast<double>(kMaxBytes), "bytes per second"};
// vCPUs of one worker: a share of an instance, or none given (0).
constexpr NumberRange kWorkerVcpusRange{0, profile::kVcpusRange.max, "vCPUs"};

Json sharedMemoryJson(const std::optional<SharedMemoryCost>& c) {
  if (!c) return nullptr;
  return {{"s_per_byte", c->seconds_per_byte}, {"s_per_allreduce", c->seconds_per_allreduce}, {"replicas", c->replicas}};
}

double optSeconds(ObjectReader& r, const char* key) {
  return optNumberIn(r, key, profile::kSecondsRange).value_or(0);
}

}  // namespace

std::string PlanAlternative::strategy(bool threeD) const {
  return strategyText(data_parallel, pipeline_stages, stage_replicas, tensor_parallel, threeD);
}

Plan planOfProfile(const profile::Profile& profile) {
  Plan p;
  p.model = profile.model;
  p.model_options = profile.options;
  p.profile_source = profile.source;
  p.device = profile.device;
  for (const auto& l : profile.layers) p.layer_names.push_back(l.name);
  return p;
}

Plan makePlan(const SearchResult& result, const profile::Profile& profile, const SearchOptions& o,
              const std::string& platform) {
  const Candidate& c = result.best();
  Plan p = planOfProfile(profile);
  p.data_parallel = c.data_parallel;
  p.pipeline_stages = c.stages;
  p.tensor_parallel = c.tensor_parallel;
  p.scatter_gather = o.scatter_gather && c.tensor_parallel > 1;
  p.microbatch_size = c.microbatch_size;
  p.num_microbatches = c.microbatches;
  p.schedule = o.schedule;
  p.chunks = chunksOf(o.schedule, o.chunks);
  p.recompute = o.recompute;
  for (const StageDetail& d : c.stage_details) {
    PlanStage s;
    if (!c.stage_replicas.empty()) s.replicas = c.stage_replicas.at(p.stages.size());
    s.first_layer = d.first_layer;
    s.last_layer = d.last_layer;
    s.chunks = d.chunks;
    s.memory_bytes = d.memory;
    s.parameter_bytes = d.parameter_bytes;
    s.forward_seconds = d.forward;
    s.backward_seconds = d.backward;
    s.allreduce_seconds = d.allreduce;
    s.allreduce_exposed_seconds = d.allreduce_exposed;
    s.update_seconds = d.update;
    s.worker = d.worker.description;
    s.vcpus = d.worker.vcpus;
    s.worker_memory_bytes = d.worker.memory;
    s.accelerator = d.worker.accelerator;
    s.cost_per_hour = d.worker.cost_per_hour;
    p.stages.push_back(std::move(s));
  }
  p.iteration_seconds = c.iteration;
  p.pipeline_seconds = c.pipeline.total;
  p.allreduce_seconds = c.allreduce;
  p.update_seconds = c.update;
  p.samples_per_second = c.samples_per_second;
  p.cost_per_hour = c.cost_per_hour;
  p.samples_per_dollar = c.samples_per_dollar;
  p.bubble_fraction = c.bubble_fraction;
  p.partition_gap_seconds = c.partition_gap;
  p.compute_scale = c.compute_scale;
  p.workers = o.workers;
  p.host_cores = o.host_cores;
  p.threads = o.threads;
  p.busy_slowdown = o.busy_slowdown;
  p.memory_limit = result.memory_limit;
  p.bandwidth = o.bandwidth;
  p.allreduce_alpha = o.allreduce_alpha;
  p.allreduce_beta = o.allreduce_beta;
  p.latency = o.latency;
  p.transfer_latency = o.transfer_latency;
  p.shared_memory = o.shared_memory;
  p.global_batch_requested = o.global_batch;
  p.objective = objectiveName(o.objective);
  p.platform = platform;
  for (size_t i = 0; i < result.considered.size(); ++i) {
    const Candidate& r = result.considered[i];
    PlanAlternative a;
    a.data_parallel = r.data_parallel;
    a.pipeline_stages = r.stages;
    a.tensor_parallel = r.tensor_parallel;
    a.stage_replicas = r.stage_replicas;
    a.microbatch_size = r.microbatch_size;
    a.num_microbatches = r.microbatches;
    a.feasible = r.feasible;
    a.chosen = static_cast<int>(i) == result.chosen;
    a.note = r.reason;
    a.iteration_seconds = r.iteration;
    a.samples_per_second = r.samples_per_second;
    a.cost_per_hour = r.cost_per_hour;
    a.samples_per_dollar = r.samples_per_dollar;
    a.max_worker_memory = r.maxWorkerMemory();
    p.alternatives.push_back(std::move(a));
  }
  return p;
}

namespace {

// NOTE [Unevenly replicated stages]
// PipeDream's planner may give stage s its own number of copies r_s
// (1F1B-RR, seed 003 §2.3): the step's K = data_parallel · num_microbatches
// microbatches go round-robin over each stage's copies, microbatch k to
// copy k mod r_s, so the input stage's copies are the plan's
// data_parallel and every r_s must divide K (else the copies of a stage
// would not each take the same share).
Status checkReplicas(Plan& p, const std::string& origin) {
  if (p.stages.front().replicas != p.data_parallel) {
    return parseError(fmt::format("{}: stages[0].replicas is {} but strategy.data_parallel is {}: the input stage's "
                                  "copies are the plan's data-parallel degree",
                                  origin, p.stages.front().replicas, p.data_parallel));
  }
  const std::int64_t K = std::int64_t{p.data_parallel} * p.num_microbatches;
  std::int64_t workers = 0;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    workers += p.replicasOf(s);
    if (K % p.replicasOf(s) != 0) {
      return parseError(fmt::format("{}: stages[{}].replicas is {}, which does not divide the {} microbatches of a step "
                                    "(data_parallel {} × num_microbatches {}): microbatches go round-robin over a "
                                    "stage's copies; make num_microbatches a multiple of {}",
                                    origin, s, p.replicasOf(s), K, p.data_parallel, p.num_microbatches,
                                    std::lcm(p.replicasOf(s), p.data_parallel) / p.data_parallel));
    }
  }
  if (workers * p.tensor_parallel > kWorkersRange.max) {
    return parseError(fmt::format("{}: the stages' replicas add up to {} workers{}, out of range; expected {}", origin,
                                  workers * p.tensor_parallel,
                                  p.tensor_parallel > 1 ? fmt::format(" ({} × tensor_parallel {})", workers,
                                                                      p.tensor_parallel)
                                                        : "",
                                  describeRange(kWorkersRange)));
  }
  if (p.tensor_parallel > 1 && !p.evenlyReplicated()) {
    return parseError(fmt::format("{}: strategy.tensor_parallel {} needs every stage replicated alike "
                                  "(strategy.data_parallel copies each)",
                                  origin, p.tensor_parallel));
  }
  if (!p.evenlyReplicated() && p.chunks > 1) {
    return parseError(fmt::format("{}: the interleaved schedule needs every stage replicated alike "
                                  "(strategy.data_parallel copies each)",
                                  origin));
  }
  p.workers = static_cast<int>(workers) * p.tensor_parallel;  // unless inputs.workers says more
  return Status();
}

}  // namespace

int workerRank(const std::vector<int>& replicas, int stage, int replica) {
  int rank = 0;
  for (size_t s = 0; s < replicas.size(); ++s) {
    rank += std::min(replicas[s], replica) + (static_cast<int>(s) < stage && replicas[s] > replica ? 1 : 0);
  }
  return rank;
}

std::vector<int> Plan::stageReplicas() const {
  std::vector<int> replicas;
  for (size_t s = 0; s < stages.size(); ++s) replicas.push_back(replicasOf(s));
  return replicas;
}

bool Plan::evenlyReplicated() const {
  for (size_t s = 0; s < stages.size(); ++s) {
    if (replicasOf(s) != data_parallel) return false;
  }
  return true;
}

int workerRank(const std::vector<int>& replicas, int stage, int replica, int tensorParallel, int tensorRank) {
  HZ_CHECK(tensorParallel >= 1 && 0 <= tensorRank && tensorRank < tensorParallel);
  return workerRank(replicas, stage, replica) * tensorParallel + tensorRank;
}

int Plan::workersUsed() const {
  int n = 0;
  for (size_t s = 0; s < stages.size(); ++s) n += replicasOf(s);
  return n * tensor_parallel;
}

Json planToJson(const Plan& p) {
  Json options = Json::object();
  for (const auto& [k, v] : p.model_options) options[k] = v;
  Json stages = Json::array();
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const PlanStage& s = p.stages[i];
    Json chunks = Json::array();
    for (const LayerRange& r : s.chunks) chunks.push_back({r.first, r.last});
    stages.push_back({{"first_layer", s.first_layer},
                      {"last_layer", s.last_layer},
                      {"replicas", p.replicasOf(i)},
                      {"memory_bytes", s.memory_bytes},
                      {"parameter_bytes", s.parameter_bytes},
                      {"forward_seconds", s.forward_seconds},
                      {"backward_seconds", s.backward_seconds},
                      {"allreduce_seconds", s.allreduce_seconds},
                      {"allreduce_exposed_seconds", s.allreduce_exposed_seconds},
                      {"update_seconds", s.update_seconds},
                      {"worker",
                       {{"description", s.worker},
                        {"vcpus", s.vcpus},
                        {"memory_bytes", s.worker_memory_bytes},
                        {"accelerator", s.accelerator},
                        {"cost_per_hour", s.cost_per_hour}}}});
    if (!s.chunks.empty()) stages.back()["chunks"] = chunks;
  }
  Json alternatives = Json::array();
  for (const auto& a : p.alternatives) {
    alternatives.push_back({{"data_parallel", a.data_parallel},
                            {"pipeline_stages", a.pipeline_stages},
                            {"tensor_parallel", a.tensor_parallel},
                            {"microbatch_size", a.microbatch_size},
                            {"num_microbatches", a.num_microbatches},
                            {"feasible", a.feasible},
                            {"chosen", a.chosen},
                            {"note", a.note},
                            {"iteration_seconds", a.iteration_seconds},
                            {"samples_per_second", a.samples_per_second},
                            {"cost_per_hour", a.cost_per_hour},
                            {"samples_per_dollar", a.samples_per_dollar},
                            {"max_worker_memory_bytes", a.max_worker_memory}});
    if (!a.stage_replicas.empty()) alternatives.back()["stage_replicas"] = a.stage_replicas;
  }
  Json strategy = {{"data_parallel", p.data_parallel},
                   {"pipeline_stages", p.pipeline_stages},
                   {"tensor_parallel", p.tensor_parallel}};
  if (p.scatter_gather) strategy["scatter_gather"] = true;
  return {{"schema", kPlanSchema},
          {"model", {{"name", p.model}, {"options", options}, {"layers", p.layer_names}}},
          {"profile", {{"source", p.profile_source}, {"device", p.device}}},
          {"strategy", strategy},
          {"microbatch_size", p.microbatch_size},
          {"num_microbatches", p.num_microbatches},
          {"schedule", scheduleName(p.schedule)},
          {"chunks", p.chunks},
          {"recompute", p.recompute},
          {"global_batch", p.globalBatch()},
          {"stages", stages},
          {"predicted",
           {{"iteration_seconds", p.iteration_seconds},
            {"pipeline_seconds", p.pipeline_seconds},
            {"allreduce_seconds", p.allreduce_seconds},
            {"update_seconds", p.update_seconds},
            {"samples_per_second", p.samples_per_second},
            {"cost_per_hour", p.cost_per_hour},
            {"samples_per_dollar", p.samples_per_dollar},
            {"bubble_fraction", p.bubble_fraction},
            {"partition_gap_seconds", p.partition_gap_seconds},
            {"compute_scale", p.compute_scale}}},
          {"inputs",
           {{"workers", p.workers},
            {"host_cores", p.host_cores > 0 ? Json(p.host_cores) : Json(nullptr)},
            {"threads", p.threads},
            {"busy_slowdown", p.busy_slowdown},
            {"memory_limit_bytes", p.memory_limit ? Json(*p.memory_limit) : Json(nullptr)},
            {"bandwidth_bytes_per_s", p.bandwidth},
            {"allreduce_alpha_s_per_byte", p.allreduce_alpha},
            {"allreduce_beta_s", p.allreduce_beta},
            {"latency_s", p.latency},
            {"transfer_latency_s", p.transfer_latency},
            {"shared_memory_allreduce", sharedMemoryJson(p.shared_memory)},
            {"global_batch", p.global_batch_requested ? Json(*p.global_batch_requested) : Json(nullptr)},
            {"objective", p.objective},
            {"platform", p.platform}}},
          {"alternatives", alternatives}};
}

Result<Plan> planFromJson(const Json& j, const std::string& origin) {
  Plan p;
  ObjectReader top(j, origin);
  const std::string schema = top.string("schema");
  if (top.ok() && schema != kPlanSchema) {
    top.fail("schema", fmt::format("is \"{}\", this hydrozoa reads \"{}\" (re-run `hydrozoa plan`)",
                                   printable(schema), kPlanSchema));
  }
  HZ_RETURN_IF_ERROR(top.status());
  {
    ObjectReader model(top.object("model"), top.child("model"));
    p.model = model.string("name");
    if (const Json* options = model.raw("options"); options && options->is_object()) {
      for (const auto& item : options->items()) {
        p.model_options.emplace_back(item.key(), item.value().is_string() ? item.value().get<std::string>()
                                                                          : item.value().dump());
      }
    }
    if (const Json* layers = model.raw("layers"); layers && layers->is_array()) {
      for (const auto& l : *layers) p.layer_names.push_back(l.is_string() ? l.get<std::string>() : l.dump());
    }
    HZ_RETURN_IF_ERROR(model.status());
  }
  if (const Json* prof = top.raw("profile")) {
    ObjectReader r(*prof, top.child("profile"));
    p.profile_source = r.optString("source").value_or("");
    p.device = r.optString("device").value_or("");
    HZ_RETURN_IF_ERROR(r.status());
  }
  {
    ObjectReader s(top.object("strategy"), top.child("strategy"));
    p.data_parallel = static_cast<int>(s.count("data_parallel", kWorkersRange));
    p.pipeline_stages = static_cast<int>(s.count("pipeline_stages", kWorkersRange));
    p.tensor_parallel = static_cast<int>(s.optCount("tensor_parallel", kWorkersRange).value_or(1));  // older plans: 1
    if (s.has("scatter_gather")) p.scatter_gather = s.boolean("scatter_gather");
    HZ_RETURN_IF_ERROR(s.status());
  }
  p.microbatch_size = top.count("microbatch_size", kSamplesRange);
  p.num_microbatches = top.count("num_microbatches", kMicrobatchesRange);
  const std::optional<std::string> schedule = top.optString("schedule");
  p.chunks = static_cast<int>(top.optCount("chunks", kChunksRange).value_or(1));
  if (top.has("recompute")) p.recompute = top.boolean("recompute");
  const Json& stages = top.array("stages", /*nonEmpty=*/true);
  HZ_RETURN_IF_ERROR(top.status());
  if (schedule) {
    HZ_ASSIGN_OR_RETURN(p.schedule, parseSchedule(*schedule, top.child("schedule")));
  }
  if ((p.chunks > 1) != (p.schedule == ScheduleKind::kInterleaved)) {
    return parseError(fmt::format("{}: chunks is {} with the {} schedule: only the interleaved schedule has more than "
                                  "one chunk per stage, and it has at least 2",
                                  origin, p.chunks, scheduleName(p.schedule)));
  }
  // The global batch A·M·m is what every worker's loop runs over: one range.
  const std::int64_t globalBatch =
      saturatingMul(saturatingMul(p.data_parallel, p.microbatch_size), p.num_microbatches);
  if (!inRange(globalBatch, kSamplesRange)) {
    return parseError(fmt::format("{}: strategy.data_parallel {} × num_microbatches {} × microbatch_size {} is a global "
                                  "batch of {} samples, out of range; expected {}",
                                  origin, p.data_parallel, p.num_microbatches, p.microbatch_size, globalBatch,
                                  describeRange(kSamplesRange)));
  }
  // Written for people and tools; when there, it must agree.
  if (const auto written = top.optCount("global_batch", kSamplesRange); written && *written != globalBatch) {
    top.fail("global_batch", fmt::format("is {} but data_parallel × num_microbatches × microbatch_size is {}", *written,
                                         globalBatch));
  }
  HZ_RETURN_IF_ERROR(top.status());
  if (const std::int64_t workers = std::int64_t{p.data_parallel} * p.pipeline_stages * p.tensor_parallel;
      workers > kWorkersRange.max) {
    return parseError(fmt::format("{}: strategy.data_parallel {} × pipeline_stages {}{} is {} workers, out of range; "
                                  "expected {}",
                                  origin, p.data_parallel, p.pipeline_stages,
                                  p.tensor_parallel > 1 ? fmt::format(" × tensor_parallel {}", p.tensor_parallel) : "",
                                  workers, describeRange(kWorkersRange)));
  }
  if (p.scatter_gather && p.tensor_parallel == 1) {
    return parseError(fmt::format("{}: strategy.scatter_gather splits stage boundaries over a tensor group, but "
                                  "tensor_parallel is 1: remove it or set tensor_parallel above 1",
                                  origin));
  }
  if (p.tensor_parallel > 1 && asynchronous(p.schedule)) {
    return parseError(fmt::format("{}: strategy.tensor_parallel {} needs a schedule that flushes every step (gpipe, "
                                  "1f1b or interleaved), not {}",
                                  origin, p.tensor_parallel, scheduleName(p.schedule)));
  }
  for (size_t i = 0; i < stages.size(); ++i) {
    ObjectReader r(stages[i], top.element("stages", i));
    PlanStage s;
    s.first_layer = static_cast<int>(r.integer("first_layer", 0, kLayersRange.max - 1));
    s.last_layer = static_cast<int>(r.integer("last_layer", 0, kLayersRange.max - 1));
    s.replicas = static_cast<int>(r.optCount("replicas", kWorkersRange).value_or(p.data_parallel));
    s.memory_bytes = bytesIn(r, "memory_bytes");
    s.parameter_bytes = optBytesIn(r, "parameter_bytes").value_or(0);
    s.forward_seconds = optSeconds(r, "forward_seconds");
    s.backward_seconds = optSeconds(r, "backward_seconds");
    s.allreduce_seconds = optSeconds(r, "allreduce_seconds");
    // Plans written before the overlap was modelled: all of it.
    s.allreduce_exposed_seconds =
        optNumberIn(r, "allreduce_exposed_seconds", profile::kSecondsRange).value_or(s.allreduce_seconds);
    s.update_seconds = optSeconds(r, "update_seconds");  // plans written before it: not counted
    if (const Json* chunks = r.raw("chunks"); chunks || p.chunks > 1) {
      const bool valid = chunks && chunks->is_array() && static_cast<int>(chunks->size()) == p.chunks;
      for (size_t c = 0; valid && c < chunks->size(); ++c) {
        const Json& range = (*chunks)[c];
        if (!range.is_array() || range.size() != 2 || !range[0].is_number_integer() ||
            !range[1].is_number_integer() || !inRange(range[0].get<std::int64_t>() + 1, kLayersRange) ||
            !inRange(range[1].get<std::int64_t>() + 1, kLayersRange)) {
          r.fail("chunks", fmt::format("chunk {} is not a [first_layer, last_layer] pair of layer indices", c));
          break;
        }
        s.chunks.push_back({range[0].get<int>(), range[1].get<int>()});
      }
      if (!valid) r.fail("chunks", fmt::format("expected {} [first_layer, last_layer] ranges (chunks)", p.chunks));
      if (r.status().ok() && (s.chunks.front().first != s.first_layer || s.chunks.front().last != s.last_layer)) {
        r.fail("chunks", "the first chunk must be first_layer..last_layer");
      }
    }
    if (const Json* w = r.raw("worker")) {
      ObjectReader wr(*w, r.child("worker"));
      s.worker = wr.optString("description").value_or("");
      s.vcpus = optNumberIn(wr, "vcpus", kWorkerVcpusRange).value_or(0);
      s.worker_memory_bytes = optBytesIn(wr, "memory_bytes").value_or(0);
      s.accelerator = wr.optString("accelerator").value_or("");
      s.cost_per_hour = optNumberIn(wr, "cost_per_hour", kUsdPerHourRange).value_or(0);
      HZ_RETURN_IF_ERROR(wr.status());
    }
    HZ_RETURN_IF_ERROR(r.status());
    p.stages.push_back(s);
  }
  if (static_cast<int>(p.stages.size()) != p.pipeline_stages) {
    return parseError(fmt::format("{}: strategy.pipeline_stages is {} but stages lists {}", origin, p.pipeline_stages,
                                  p.stages.size()));
  }
  HZ_RETURN_IF_ERROR(checkReplicas(p, origin));
  // The pieces (stages, or interleaved their chunks in model order) tile the model.
  const std::vector<LayerRange> pieces = p.pieces();
  for (size_t i = 0; i < pieces.size(); ++i) {
    const int expectedFirst = i == 0 ? 0 : pieces[i - 1].last + 1;
    if (pieces[i].first != expectedFirst || pieces[i].last < pieces[i].first) {
      const size_t stage = i % p.stages.size(), chunk = i / p.stages.size();
      return parseError(fmt::format("{}: stages[{}]{}: first_layer {} and last_layer {}: stages must be consecutive, "
                                    "non-empty ranges starting at layer 0 (expected first_layer {})",
                                    origin, stage, p.chunks > 1 ? fmt::format(".chunks[{}]", chunk) : "",
                                    pieces[i].first, pieces[i].last, expectedFirst));
    }
  }
  if (!p.layer_names.empty() && pieces.back().last + 1 != static_cast<int>(p.layer_names.size())) {
    return parseError(fmt::format("{}: the last stage's last_layer is {} but the model has {} layers (the last stage "
                                  "ends at the last layer)",
                                  origin, pieces.back().last, p.layer_names.size()));
  }
  if (const Json* pred = top.raw("predicted")) {
    ObjectReader r(*pred, top.child("predicted"));
    p.iteration_seconds = numberIn(r, "iteration_seconds", profile::kSecondsRange);
    p.samples_per_second = numberIn(r, "samples_per_second", kRateRange);
    p.cost_per_hour = numberIn(r, "cost_per_hour", kUsdPerHourRange);
    p.samples_per_dollar = numberIn(r, "samples_per_dollar", kRateRange);
    p.pipeline_seconds = optNumberIn(r, "pipeline_seconds", profile::kSecondsRange).value_or(p.iteration_seconds);
    p.allreduce_seconds = optSeconds(r, "allreduce_seconds");
    p.update_seconds = optSeconds(r, "update_seconds");
    p.bubble_fraction = optNumberIn(r, "bubble_fraction", kBubbleRange).value_or(0);
    p.partition_gap_seconds = optSeconds(r, "partition_gap_seconds");
    p.compute_scale = optNumberIn(r, "compute_scale", kComputeScaleRange).value_or(1);
    HZ_RETURN_IF_ERROR(r.status());
  }
  if (const Json* in = top.raw("inputs")) {
    ObjectReader r(*in, top.child("inputs"));
    p.workers = static_cast<int>(r.optCount("workers", kWorkersRange).value_or(p.workers));
    // null or absent: planned with a core per worker thread.
    p.host_cores = static_cast<int>(r.optCount("host_cores", kThreadsRange).value_or(0));
    p.threads = static_cast<int>(r.optCount("threads", kThreadsRange).value_or(1));
    p.busy_slowdown = optNumberIn(r, "busy_slowdown", profile::kBusySlowdownRange).value_or(1);
    p.memory_limit = optBytesIn(r, "memory_limit_bytes", /*min=*/1);
    // 0: planned without a bandwidth.
    p.bandwidth = optNumberIn(r, "bandwidth_bytes_per_s", kPlannedBandwidthRange).value_or(0);
    p.allreduce_alpha = optNumberIn(r, "allreduce_alpha_s_per_byte", kAlphaRange).value_or(0);
    p.allreduce_beta = optSeconds(r, "allreduce_beta_s");
    p.latency = optSeconds(r, "latency_s");  // plans written before it: none
    p.transfer_latency = optSeconds(r, "transfer_latency_s");  // likewise
    if (const Json* shm = r.raw("shared_memory_allreduce"); shm && !shm->is_null()) {
      ObjectReader m(*shm, r.child("shared_memory_allreduce"));
      SharedMemoryCost c;
      c.seconds_per_byte = numberIn(m, "s_per_byte", profile::kSecondsPerByteRange);
      c.seconds_per_allreduce = optSeconds(m, "s_per_allreduce");
      c.replicas = static_cast<int>(m.count("replicas", kSharedMemoryReplicasRange));
      HZ_RETURN_IF_ERROR(m.status());
      p.shared_memory = c;
    }
    p.global_batch_requested = r.optCount("global_batch", kSamplesRange);
    p.objective = r.optString("objective").value_or("");
    p.platform = r.optString("platform").value_or("");
    HZ_RETURN_IF_ERROR(r.status());
  }
  if (const Json* alts = top.raw("alternatives"); alts && alts->is_array()) {
    for (size_t i = 0; i < alts->size(); ++i) {
      ObjectReader r((*alts)[i], top.element("alternatives", i));
      PlanAlternative a;
      a.data_parallel = static_cast<int>(r.count("data_parallel", kWorkersRange));
      a.pipeline_stages = static_cast<int>(r.count("pipeline_stages", kWorkersRange));
      a.tensor_parallel = static_cast<int>(r.optCount("tensor_parallel", kWorkersRange).value_or(1));
      // 0: none (an infeasible strategy has no microbatches).
      a.microbatch_size = r.optInteger("microbatch_size", 0, kSamplesRange.max).value_or(0);
      a.num_microbatches = r.optInteger("num_microbatches", 0, kMicrobatchesRange.max).value_or(0);
      a.feasible = r.boolean("feasible");
      a.chosen = r.has("chosen") && r.boolean("chosen");
      a.note = r.optString("note").value_or("");
      a.iteration_seconds = optSeconds(r, "iteration_seconds");
      a.samples_per_second = optNumberIn(r, "samples_per_second", kRateRange).value_or(0);
      a.cost_per_hour = optNumberIn(r, "cost_per_hour", kUsdPerHourRange).value_or(0);
      a.samples_per_dollar = optNumberIn(r, "samples_per_dollar", kRateRange).value_or(0);
      a.max_worker_memory = optBytesIn(r, "max_worker_memory_bytes").value_or(0);
      if (const Json* reps = r.raw("stage_replicas")) {
        if (!reps->is_array() || reps->size() != static_cast<size_t>(a.pipeline_stages)) {
          return parseError(fmt::format("{}.stage_replicas: expected a list of {} copies, one per stage",
                                        top.element("alternatives", i), a.pipeline_stages));
        }
        for (size_t k = 0; k < reps->size(); ++k) {
          const Json& v = (*reps)[k];
          if (!v.is_number_integer() || !inRange(v.get<std::int64_t>(), kWorkersRange)) {
            return parseError(fmt::format("{}.stage_replicas[{}]: expected a whole number of copies, {}",
                                          top.element("alternatives", i), k, describeRange(kWorkersRange)));
          }
          a.stage_replicas.push_back(v.get<int>());
        }
      }
      HZ_RETURN_IF_ERROR(r.status());
      p.alternatives.push_back(a);
    }
  }
  return p;
}

Result<Plan> parsePlan(const std::string& text, const std::string& origin) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return parseError(origin + ": the file is empty");
  HZ_ASSIGN_OR_RETURN(Json j, parseJson(text, origin));
  return planFromJson(j, origin);
}

Result<Plan> loadPlan(const std::string& path) {
  HZ_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  return parsePlan(text, path);
}

Status savePlan(const Plan& plan, const std::string& path) {
  // Names from YAML files (a job's model options) may hold bytes that are not UTF-8.
  return writeFileAtomically(path, planToJson(plan).dump(1, ' ', false, Json::error_handler_t::replace) + "\n");
}

std::vector<LayerRange> Plan::pieces() const {
  std::vector<LayerRange> out;
  for (int c = 0; c < chunks; ++c) {
    for (const PlanStage& s : stages) {
      const std::vector<LayerRange> ranges = s.layerRanges();
      if (static_cast<size_t>(c) < ranges.size()) out.push_back(ranges[static_cast<size_t>(c)]);
    }
  }
  return out;
}

}  // namespace hydrozoa::plan
