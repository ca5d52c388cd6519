#include "runtime/worker/role.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <optional>
#include <tuple>

#include "core/limits.h"
#include "runtime/comm/redis/redis_transport.h"
#include "runtime/exec/tags.h"
#include "wire/control.h"

namespace hydrozoa::runtime {
namespace {

// Whether `working` replicas of `microbatches` microbatches of `size` make
// the global batch (each factor already range-checked; no product overflows).
bool splitsTheBatch(std::int64_t globalBatch, int working, std::int64_t size, std::int64_t microbatches) {
  return globalBatch % size == 0 && globalBatch / size == static_cast<std::int64_t>(working) * microbatches;
}

}  // namespace

Result<Role> parseRole(const Json& a) {
  Role r;
  ObjectReader o(a, "assign");
  r.generation = static_cast<int>(o.integer("generation", 0, 1 << 30));
  r.rank = static_cast<int>(o.integer("rank", 0, kWorkersRange.max - 1));
  r.world = static_cast<int>(o.integer("world_size", 1, kWorkersRange.max));
  r.replica = static_cast<int>(o.integer("replica", 0, kWorkersRange.max - 1));
  r.replicas = static_cast<int>(o.integer("replicas", 1, kWorkersRange.max));
  r.stage = static_cast<int>(o.integer("stage", 0, kWorkersRange.max - 1));
  r.stages = static_cast<int>(o.integer("stages", 1, kWorkersRange.max));
  if (o.has("tensor_parallel")) {
    r.tensor_parallel = static_cast<int>(o.integer("tensor_parallel", 1, kWorkersRange.max));
    r.tensor_rank = static_cast<int>(o.integer("tensor_rank", 0, kWorkersRange.max - 1));
  }
  if (o.has("scatter_gather")) r.scatter_gather = o.boolean("scatter_gather");
  r.first_layer = static_cast<int>(o.integer("first_layer", 0, kLayersRange.max));
  r.last_layer = static_cast<int>(o.integer("last_layer", 0, kLayersRange.max));
  r.microbatch_size = o.integer("microbatch_size", 1, kSamplesRange.max);
  r.microbatches = o.integer("microbatches", 1, kMicrobatchesRange.max);
  r.idle_replicas = static_cast<int>(o.optInteger("idle_replicas", 0, kWorkersRange.max - 1).value_or(0));
  r.train_size = o.integer("train_size", 1, kSamplesRange.max);
  r.test_size = o.integer("test_size", 0, kSamplesRange.max);
  r.start_step = o.integer("start_step", 0, kStepsRange.max);
  r.total_steps = o.integer("total_steps", 0, kStepsRange.max);
  r.stop_step = o.integer("stop_step", 0, kStepsRange.max);
  r.epoch_start_step = o.integer("epoch_start_step", 0, kStepsRange.max);
  r.first_epoch = o.integer("first_epoch", 0, kStepsRange.max);
  r.global_batch = o.integer("global_batch", 1, kSamplesRange.max);
  r.lr_factor = o.positive("lr_factor");
  r.hold_at_epoch_end = o.boolean("hold_at_epoch_end");
  r.shared_memory = o.boolean("shared_memory");
  r.listen_host = o.string("listen_host");
  r.checkpoint_root = o.string("checkpoint_root");
  r.trace_path = o.string("trace_path");
  r.checkpoint = o.optString("checkpoint").value_or("");
  r.state_from = static_cast<int>(o.optInteger("state_from", 0, kWorkersRange.max - 1).value_or(-1));
  r.schedule = o.optString("schedule").value_or("gpipe");
  if (const Json* cpus = o.raw("cpus"); cpus && cpus->is_array()) {
    for (const auto& c : *cpus) r.cpus.push_back(c.get<int>());
  }
  r.cpus_shared = o.boolean("cpus_shared");
  if (o.has("recompute")) r.recompute = o.boolean("recompute");
  if (const Json* ranges = o.raw("layer_ranges"); ranges && ranges->is_array()) {
    for (const Json& range : *ranges) {
      const bool valid = range.is_array() && range.size() == 2 && range[0].is_number_integer() &&
                         range[1].is_number_integer() && range[0].get<std::int64_t>() >= 0 &&
                         range[0].get<std::int64_t>() <= range[1].get<std::int64_t>() &&
                         range[1].get<std::int64_t>() < kLayersRange.max;
      if (!valid || r.layer_ranges.size() >= static_cast<size_t>(kMaxChunks)) {
        o.fail("layer_ranges", fmt::format("expected at most {} [first, last] layer ranges", kMaxChunks));
        break;
      }
      r.layer_ranges.emplace_back(range[0].get<int>(), range[1].get<int>());
    }
  }
  std::vector<int> stageReplicas;
  if (const Json* replicas = o.raw("stage_replicas"); replicas && replicas->is_array()) {
    for (const Json& count : *replicas) {
      const bool valid = count.is_number_integer() && count.get<std::int64_t>() >= 1 &&
                         count.get<std::int64_t>() <= kWorkersRange.max &&
                         static_cast<std::int64_t>(stageReplicas.size()) < kWorkersRange.max;
      if (!valid) {
        o.fail("stage_replicas", "expected a replica count per stage");
        break;
      }
      stageReplicas.push_back(count.get<int>());
    }
  }
  if (const Json* channel = o.raw("channel")) {
    ObjectReader c(*channel, "assign.channel");
    r.channel.url = c.string("url");
    r.channel.password = c.string("password");
    r.channel.ns = c.string("ns");
    r.channel.sync = c.string("sync");
    r.channel.timeout = c.positive("timeout");
    r.channel.state = c.optString("state").value_or("");
    r.channel.restore = c.optString("restore").value_or("");
    c.rejectUnknownKeys();
    HZ_RETURN_IF_ERROR(c.status());
    HZ_RETURN_IF_ERROR(redis::parseUrl(r.channel.url, "assign.channel.url").status());
    HZ_RETURN_IF_ERROR(redis::parseSyncMethod(r.channel.sync, "assign.channel.sync").status());
    for (const auto& [name, prefix, empty] : {std::tuple{"ns", &r.channel.ns, false},
                                              std::tuple{"state", &r.channel.state, true},
                                              std::tuple{"restore", &r.channel.restore, true}}) {
      if ((prefix->empty() && !empty) || prefix->size() > 200) {
        return invalidArgument(fmt::format("assign.channel.{}: expected a key prefix of 1 to 200 characters", name));
      }
    }
  }
  const Json& job = o.object("job");
  HZ_RETURN_IF_ERROR(o.status());
  if (r.layer_ranges.empty()) r.layer_ranges.emplace_back(r.first_layer, r.last_layer);
  if (!stageReplicas.empty() &&
      (static_cast<int>(stageReplicas.size()) != r.stages || r.stage >= r.stages ||
       stageReplicas[static_cast<size_t>(r.stage)] != r.replicas || r.replica >= r.replicas)) {
    return invalidArgument("assign.stage_replicas: expected one count per stage, this stage's its replicas");
  }
  if (r.tensor_rank >= r.tensor_parallel || (r.tensor_parallel > 1 && !stageReplicas.empty())) {
    return invalidArgument("assign.tensor_rank: expected a rank below tensor_parallel, and stages replicated evenly");
  }
  if (r.state_from >= 0 && (r.state_from >= r.replicas || r.state_from == r.replica || !r.checkpoint.empty() ||
                           r.stages != 1 || r.tensor_parallel != 1 || !stageReplicas.empty() || o.has("channel"))) {
    return invalidArgument(
        "assign.state_from: expected another replica of a one-stage job without tensor groups, a channel or a "
        "checkpoint to start from");
  }
  if (r.idle_replicas > 0 &&
      (r.idle_replicas >= r.replicas || r.stages != 1 || r.tensor_parallel != 1 || !stageReplicas.empty() ||
       !splitsTheBatch(r.global_batch, r.replicas - r.idle_replicas, r.microbatch_size, r.microbatches))) {
    return invalidArgument(
        "assign.idle_replicas: expected fewer than the replicas, of a one-stage job without tensor groups, the "
        "others taking the global batch in their microbatches");
  }
  r.stage_replicas = std::move(stageReplicas);
  HZ_ASSIGN_OR_RETURN(r.job, cluster::parseJobSpec(job, "assign.job"));
  return r;
}

Result<Regroup> parseRegroup(const Json& m, const Role& role) {
  Regroup g;
  ObjectReader o(m, "regroup");
  g.at_step = o.integer("at_step", 1, kStepsRange.max);
  g.generation = static_cast<int>(o.integer("generation", 0, 1 << 30));
  g.replicas = static_cast<int>(o.integer("replicas", 1, kWorkersRange.max));
  g.microbatches = o.integer("microbatches", 1, kMicrobatchesRange.max);
  g.joiners = static_cast<int>(o.integer("joiners", 0, kWorkersRange.max - 1));
  g.idle_replicas = static_cast<int>(o.optInteger("idle_replicas", 0, kWorkersRange.max - 1).value_or(0));
  HZ_RETURN_IF_ERROR(o.status());
  if (role.stages != 1 || role.tensor_parallel != 1 || !role.stage_replicas.empty() || !role.channel.url.empty()) {
    return invalidArgument("regroup: only the replicas of a one-stage job without tensor groups or a channel regroup");
  }
  if (g.joiners >= g.replicas) {
    return invalidArgument(fmt::format("regroup: {} joiners in a group of {} leave no running worker", g.joiners,
                                       g.replicas));
  }
  if (g.idle_replicas >= g.replicas) {
    return invalidArgument(fmt::format("regroup: {} idle replicas of {} leave none to compute", g.idle_replicas,
                                       g.replicas));
  }
  if (role.replica >= g.replicas) {
    return invalidArgument(fmt::format("regroup: {} replicas leave out this worker's replica {}", g.replicas,
                                       role.replica));
  }
  if (!splitsTheBatch(role.global_batch, g.replicas - g.idle_replicas, role.microbatch_size, g.microbatches)) {
    return invalidArgument(fmt::format("regroup: {} microbatches of {} on each of {} replicas are not the global "
                                       "batch of {}",
                                       g.microbatches, role.microbatch_size, g.replicas - g.idle_replicas,
                                       role.global_batch));
  }
  return g;
}

}  // namespace hydrozoa::runtime

namespace hydrozoa::runtime {

namespace {

using Getenv = const char* (*)(const char*);

const char* processEnv(const char* name) { return std::getenv(name); }

// The variable's value as a count from `least` to 2^20; nullopt where it is
// unset or empty.
Result<std::optional<int>> countFromEnv(Getenv getenv, const char* name, long least, const char* meaning) {
  const char* value = getenv(name);
  if (value == nullptr || *value == '\0') return std::optional<int>();
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(value, &end, 10);
  if (errno != 0 || *end != '\0' || n < least || n > (1L << 20)) {
    return invalidArgument(fmt::format("{}={} is not {} (a whole number from {}); unset it or set it right", name,
                                       value, meaning, least));
  }
  return std::optional<int>(static_cast<int>(n));
}

}  // namespace

Result<int> localRank(const Role& role, Getenv getenv) {
  if (getenv == nullptr) getenv = processEnv;
  for (const char* name : {"SLURM_LOCALID", "LOCAL_RANK"}) {
    HZ_ASSIGN_OR_RETURN(std::optional<int> n, countFromEnv(getenv, name, 0, "a worker's rank on its machine"));
    if (n) return *n;
  }
  return role.rank;
}

Result<int> localWorkers(const Role& role, Getenv getenv) {
  if (getenv == nullptr) getenv = processEnv;
  HZ_ASSIGN_OR_RETURN(std::optional<int> n,
                      countFromEnv(getenv, "LOCAL_WORLD_SIZE", 1, "the number of workers on this machine"));
  if (n) return *n;
  const char* slurm = getenv("SLURM_LOCALID");
  if (slurm != nullptr && *slurm != '\0') return 1;
  return role.world;
}

}  // namespace hydrozoa::runtime
