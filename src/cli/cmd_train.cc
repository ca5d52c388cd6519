// `hydrozoa train`: its flags and job spec, checked by the front end before
// the job runs in the full program (cli/torch_side.h).
#include <fmt/format.h>

#include <sys/stat.h>

#include <cstdlib>
#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/torch_side.h"
#include "cluster/coordinator.h"
#include "cluster/job_spec.h"
#include "core/units.h"
#include "plan/cost/schedules.h"

namespace hydrozoa::cli {
namespace {

struct TrainArgs {
  std::string job, resume, out, plan, profile, worker_binary;
  std::string data_parallel, stages, tensor_parallel, microbatches, microbatch_size, max_steps, epochs, seed, workers, global_batch;
  std::string channel, channel_password_file, channel_sync, platform, function_timeout;
  std::string launcher, bandwidth, latency, start_delay, memory_limit, cpu_limit, max_recoveries;
  std::string scaling, min_replicas, max_replicas, every_epochs;
  std::string partition, account, slurm_args, coordinator_host, schedule, chunks, events, stragglers;
  bool no_progress = false, replan = false, refresh_profile = false, recompute = false, scatter_gather = false;
  bool flexrr = false;
  std::string tiers, spot_trace, precision;
  bool bidbrain = false, checkpoint_restart = false;
};

// Every range given below fits the field it fills, so narrowing is safe.
template <class T>
void assignCount(T* out, std::int64_t v) { *out = static_cast<T>(v); }
template <class T>
void assignCount(std::optional<T>* out, std::int64_t v) { *out = static_cast<T>(v); }

// `*out` = the flag's value within `range`, when the flag was given.
template <class T>
Status overrideCount(const std::string& text, const char* flag, Range range, T* out) {
  HZ_ASSIGN_OR_RETURN(std::optional<std::int64_t> v, optionalCount(text, flag, range));
  if (v) assignCount(out, *v);
  return Status();
}

Status applyOverrides(const TrainArgs& a, cluster::JobSpec* s) {
  HZ_RETURN_IF_ERROR(overrideCount(a.data_parallel, "--data-parallel", kWorkersRange, &s->data_parallel));
  HZ_RETURN_IF_ERROR(overrideCount(a.stages, "--stages", kWorkersRange, &s->stages));
  HZ_RETURN_IF_ERROR(overrideCount(a.tensor_parallel, "--tensor-parallel", kWorkersRange, &s->tensor_parallel));
  HZ_RETURN_IF_ERROR(overrideCount(a.microbatches, "--microbatches", kMicrobatchesRange, &s->microbatches));
  HZ_RETURN_IF_ERROR(overrideCount(a.microbatch_size, "--microbatch-size", kSamplesRange, &s->microbatch_size));
  HZ_RETURN_IF_ERROR(overrideCount(a.chunks, "--chunks", kChunksRange, &s->chunks));
  if (a.recompute) s->recompute = true;
  if (!a.precision.empty()) {
    if (!cluster::knownPrecision(a.precision)) return invalidArgument("--precision " + a.precision + ": use fp32, bf16 or fp16");
    s->precision = a.precision;
  }
  if (a.scatter_gather) s->scatter_gather = true;
  if (a.flexrr) s->flexrr.enabled = true;
  if (!a.stragglers.empty()) {
    HZ_ASSIGN_OR_RETURN(s->stragglers, cluster::parseStragglers(a.stragglers, "--stragglers"));
  }
  HZ_RETURN_IF_ERROR(overrideCount(a.epochs, "--epochs", kStepsRange, &s->epochs));
  HZ_RETURN_IF_ERROR(overrideCount(a.workers, "--workers", kWorkersRange, &s->workers));
  HZ_RETURN_IF_ERROR(overrideCount(a.global_batch, "--global-batch", kSamplesRange, &s->global_batch));
  if (!a.seed.empty()) {
    HZ_ASSIGN_OR_RETURN(std::int64_t seed, parseCount(a.seed, "--seed", {0, INT64_MAX}));
    s->seed = static_cast<std::uint64_t>(seed);
  }
  if (!a.schedule.empty()) {
    HZ_ASSIGN_OR_RETURN(const plan::ScheduleKind kind, plan::parseSchedule(a.schedule, "--schedule"));
    s->schedule = a.schedule;
    if (s->precision == "fp16" && plan::asynchronous(kind)) {
      return invalidArgument(fmt::format("--schedule {} with {}: {}", a.schedule,
                                         a.precision.empty() ? "training.precision fp16" : "--precision fp16",
                                         cluster::fp16ScheduleProblem(a.schedule)));
    }
  }
  if (!a.launcher.empty()) s->launcher = a.launcher;
  if (!a.platform.empty()) s->platform = a.platform;
  if (!a.function_timeout.empty()) {
    HZ_ASSIGN_OR_RETURN(s->function_timeout, parseSeconds(a.function_timeout, "--function-timeout"));
  }
  if (!a.channel.empty()) s->channel = a.channel;
  if (!a.channel_password_file.empty()) s->channel_password_file = a.channel_password_file;
  if (!a.channel_sync.empty()) s->channel_sync = a.channel_sync;
  if (!a.partition.empty()) s->slurm.partition = a.partition;
  if (!a.account.empty()) s->slurm.account = a.account;
  if (!a.slurm_args.empty()) s->slurm.args = cluster::splitWords(a.slurm_args);
  if (!a.coordinator_host.empty()) s->slurm.coordinator_host = a.coordinator_host;
  const bool slurmFlags = !(a.partition + a.account + a.slurm_args + a.coordinator_host).empty();
  if (slurmFlags && s->launcher != "slurm") {
    return invalidArgument("--partition, --account, --slurm-args and --coordinator-host are for the Slurm launcher: "
                           "add --launcher slurm");
  }
  if (!a.bandwidth.empty()) {
    HZ_ASSIGN_OR_RETURN(s->bandwidth, parseBandwidth(a.bandwidth, "--bandwidth"));
  }
  if (!a.latency.empty()) {
    HZ_ASSIGN_OR_RETURN(s->latency, parseSeconds(a.latency, "--latency"));
  }
  if (!a.start_delay.empty()) {
    HZ_ASSIGN_OR_RETURN(s->start_delay, cluster::parseStartDelay(a.start_delay, "--start-delay"));
  }
  if (!a.memory_limit.empty()) {
    HZ_ASSIGN_OR_RETURN(s->memory_limit, parseBytes(a.memory_limit, "--memory-limit"));
    if (*s->memory_limit < 16 * kMB) return invalidArgument("--memory-limit: " + a.memory_limit + " is less than 16MB");
  }
  if (!a.cpu_limit.empty()) {
    char* end = nullptr;
    const double v = std::strtod(a.cpu_limit.c_str(), &end);
    if (*end != '\0' || !(v > 0) || !(v <= 4096)) return invalidArgument("--cpu-limit: \"" + a.cpu_limit + "\" is not a positive number of vCPUs");
    s->cpu_limit = v;
  }
  HZ_RETURN_IF_ERROR(overrideCount(a.max_recoveries, "--max-recoveries", {0, 1000}, &s->max_recoveries));
  if (!a.scaling.empty()) s->scaling.policy = a.scaling;
  HZ_RETURN_IF_ERROR(overrideCount(a.min_replicas, "--min-replicas", kWorkersRange, &s->scaling.min_replicas));
  HZ_RETURN_IF_ERROR(overrideCount(a.max_replicas, "--max-replicas", kWorkersRange, &s->scaling.max_replicas));
  HZ_RETURN_IF_ERROR(overrideCount(a.every_epochs, "--every-epochs", kStepsRange, &s->scaling.every_epochs));
  if (a.replan) s->scaling.replan = true;
  if (!a.out.empty()) s->out_dir = a.out;
  if (!a.plan.empty()) s->plan_file = a.plan;
  if (!a.profile.empty()) s->profile_file = a.profile;
  if (!a.tiers.empty()) {
    HZ_RETURN_IF_ERROR(cluster::parseTierCounts(a.tiers, "--tiers", &s->tiers));
    // The tiers make the job's workers data-parallel replicas of one stage,
    // whatever the spec pinned (the command line's own pins still hold).
    if (a.data_parallel.empty()) s->data_parallel.reset();
    if (a.stages.empty()) s->stages.reset();
    if (a.microbatches.empty()) s->microbatches.reset();
  }
  if (a.checkpoint_restart) s->tiers.checkpoint_restart = true;
  const bool tiers = s->tiers.enabled() || !a.tiers.empty();
  if (!a.spot_trace.empty()) {
    if (!tiers) {
      return invalidArgument("--spot-trace replays the transient tier's spot market: give --tiers "
                             "reliable=R,transient=T too (or cluster.tiers in the job spec)");
    }
    s->tiers.spot_trace = a.spot_trace;
  }
  if (a.bidbrain) {
    if (!tiers) {
      return invalidArgument("--bidbrain bids for the transient tier: give --tiers reliable=R,transient=T and "
                             "--spot-trace FILE too (or cluster.tiers in the job spec)");
    }
    s->tiers.bidder = "bidbrain";
    s->tiers.bid.reset();  // BidBrain's to choose
  }
  if (a.checkpoint_restart && !tiers) {
    return invalidArgument("--checkpoint-restart is for tiers that are all transient: give --tiers "
                           "reliable=0,transient=T and --spot-trace FILE too");
  }
  if (tiers) HZ_RETURN_IF_ERROR(cluster::validateTiers(s->tiers, a.tiers.empty() ? "cluster.tiers" : "--tiers"));
  cluster::applyTiers(s);
  // Pinning the strategy on the command line pins the workers it needs.
  if (s->data_parallel && s->stages && a.workers.empty()) {
    s->workers = std::max(s->workers, *s->data_parallel * *s->stages * s->tensor_parallel.value_or(1));
  }
  return Status();
}

Status runTrain(const TrainArgs& a) {
  // The run directory and everything in it are the user's alone (workers
  // inherit this mask).
  ::umask(077);
  cluster::TrainOptions o;
  if (!a.resume.empty()) {
    if (!a.job.empty()) return invalidArgument("give a job spec or --resume RUN_DIR, not both");
    HZ_ASSIGN_OR_RETURN(o.spec, cluster::loadJobSpec(a.resume + "/job.yaml"));
    if (!a.out.empty() || !a.plan.empty()) {
      return invalidArgument("a resumed run keeps its output directory; --plan is for a new run (pin --stages, "
                             "--data-parallel or --tensor-parallel to re-plan a resumed one)");
    }
    o.resume_dir = a.resume;
    // NOTE [Re-planned resume]: a checkpoint holds whole layers, so any
    // split of the model loads it; a pinned strategy plans the run again.
    o.replan = !a.data_parallel.empty() || !a.stages.empty() || !a.tensor_parallel.empty();
  } else {
    if (a.job.empty()) return invalidArgument("give a job spec (e.g. hydrozoa train examples/fashion_mnist_cnn.yaml)");
    HZ_ASSIGN_OR_RETURN(o.spec, cluster::loadJobSpec(a.job));
  }
  HZ_RETURN_IF_ERROR(applyOverrides(a, &o.spec));
  HZ_RETURN_IF_ERROR(cluster::validateJobSpec(o.spec, a.job.empty() ? a.resume + "/job.yaml" : a.job));
  HZ_ASSIGN_OR_RETURN(o.stop_after, optionalCount(a.max_steps, "--max-steps", kStepsRange));
  o.executable = a.worker_binary;
  o.progress = !a.no_progress;
  o.refresh_profile = a.refresh_profile;
  return trainJob(std::move(o), a.events);
}

}  // namespace

void addTrainCommand(CLI::App& app, Status* status) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a job: plan, launch workers, train, checkpoint, report");
  cmd->footer(
      "Examples:\n"
      "  hydrozoa train examples/fashion_mnist_cnn.yaml\n"
      "  hydrozoa train examples/fashion_mnist_cnn.yaml --data-parallel 2 --stages 2 --microbatches 4 --max-steps 5 "
      "--seed 1 --out runs/x\n"
      "  hydrozoa train --resume runs/x\n"
      "  hydrozoa train examples/fashion_mnist_cnn.yaml --launcher container --bandwidth 50MB/s\n"
      "  hydrozoa train examples/fashion_mnist_cnn.yaml --launcher slurm --partition gpu --slurm-args "
      "\"--time=1:00:00\"\n"
      "Ctrl-C stops every worker after the same step and checkpoints it (resume with --resume);\n"
      "kill -USR1 $(jq .pid RUN/coordinator.json) checkpoints a running job; kill -USR2 preempts it (a clean stop,\n"
      "status \"preempted\").\n");
  cmd->add_option("job", a->job, "Job spec (YAML), see docs/train.md");
  cmd->add_option("--resume", a->resume, "Continue the run in this directory from its latest checkpoint");
  cmd->add_option("--out", a->out, "Run directory (default: runs/<name>-<time>)");
  cmd->add_option("--plan", a->plan, "Use this plan.json instead of planning");
  cmd->add_option("--profile", a->profile,
                  "Plan from this profile (e.g. from `hydrozoa profile --from-run`) instead of profiling the model");
  cmd->add_option("--data-parallel", a->data_parallel, "Pin the number of data-parallel replicas");
  cmd->add_option("--stages", a->stages, "Pin the number of pipeline stages");
  cmd->add_option("--tensor-parallel", a->tensor_parallel,
                  "Pin the workers that split each stage's transformer layers (docs/tensor_parallel.md)");
  cmd->add_flag("--scatter-gather", a->scatter_gather,
                "With tensor parallelism, send each stage boundary 1/t from every worker of a tensor group and "
                "all-gather it at the receivers (Megatron's scatter/gather) instead of whole from every worker");
  cmd->add_flag("--flexrr", a->flexrr,
                "Data-parallel replicas that fall behind hand some of their microbatches to faster ones within the "
                "step (FlexRR's rapid reassignment; the same training; docs/stragglers.md)");
  cmd->add_option("--stragglers", a->stragglers,
                  "Slow workers down for experiments: 'worker=1,slowdown=3x[,mode=quota|pause|sleep][,start=10s,"
                  "for=30s]' or 'worker=2,pause=200ms,every=2s'; several separated by ';' (docs/stragglers.md)");
  cmd->add_option("--tiers", a->tiers,
                  "Reliable (on-demand) and transient (spot) workers, 'reliable=1,transient=3': data-parallel "
                  "replicas; the transient ones leave at a step boundary when their spot market, replayed from "
                  "--spot-trace, rises above the bid, and come back when it falls (docs/spot.md)");
  cmd->add_option("--spot-trace", a->spot_trace,
                  "The transient tier's spot price history (the cloud's JSON export, e.g. examples/spot_prices.json)");
  cmd->add_flag("--checkpoint-restart", a->checkpoint_restart,
                "With --tiers reliable=0,transient=T: all workers transient, the state in checkpoints; evicted, the "
                "run stops and restarts from its checkpoint when the price falls (cluster.tiers.checkpoint_restart; "
                "docs/spot.md)");
  cmd->add_flag("--bidbrain", a->bidbrain,
                "BidBrain bids for the transient tier: how many transient workers to hold and at what bid, by the "
                "expected cost per unit of work (cluster.tiers.bidder: bidbrain; docs/spot.md)");
  cmd->add_option("--microbatches", a->microbatches, "Pin the number of microbatches per step");
  cmd->add_option("--microbatch-size", a->microbatch_size, "Pin the microbatch size");
  cmd->add_option("--schedule", a->schedule,
                  "Pipeline schedule: gpipe (default), 1f1b (the same training, fewer activations held), "
                  "interleaved (with --chunks, a smaller bubble), 2bw (no flush between steps, weights one update "
                  "stale), pipedream (an update per microbatch, weight stashing) or pipedream-vs (the same with "
                  "vertical sync; docs/schedules.md)");
  cmd->add_option("--chunks", a->chunks, "Model chunks per stage with --schedule interleaved (default 2)");
  cmd->add_flag("--recompute", a->recompute,
                "Recompute activations in the backward pass: each stage keeps only its microbatches' inputs "
                "(less memory, a forward pass more per microbatch)");
  cmd->add_option("--precision", a->precision,
                  "fp32 (default), bf16 or fp16: the passes in that type, the weights in fp32; fp16 with dynamic loss "
                  "scaling (docs/gpu.md)");
  cmd->add_option("--max-steps", a->max_steps,
                  "Stop this run after this many steps in all, with a checkpoint (--resume goes on to the job's end)");
  cmd->add_option("--epochs", a->epochs, "Epochs to train");
  cmd->add_option("--global-batch", a->global_batch, "Samples per step");
  cmd->add_option("--workers", a->workers, "Worker budget");
  cmd->add_option("--seed", a->seed, "Seed for weights, data order and dropout");
  cmd->add_option("--launcher", a->launcher,
                  "auto (containers when root, else processes), local (processes), container, function (serverless "
                  "functions: docs/functions.md), or slurm (job steps on a Slurm cluster, docs/slurm.md)");
  cmd->add_option("--platform", a->platform,
                  "Pricing catalog (aci, lambda, ...: data/pricing/, or a file); --launcher function needs a function "
                  "platform");
  cmd->add_option("--function-timeout", a->function_timeout,
                  "Functions: how long an invocation may run, e.g. 15min (default 900s); state is saved and fresh "
                  "invocations continue before it");
  cmd->add_option("--channel", a->channel,
                  "Workers exchange tensors through a Redis store: redis (the job starts its own) or "
                  "redis://HOST:PORT (docs/functions.md)");
  cmd->add_option("--channel-password-file", a->channel_password_file,
                  "The password of the Redis server given with --channel (a file; never on the command line)");
  cmd->add_option("--channel-sync", a->channel_sync,
                  "The stage allreduce through the channel: pipelined (FuncPipe's scatter-reduce) or lambdaml");
  cmd->add_option("--partition", a->partition, "Slurm: the partition to run the workers in");
  cmd->add_option("--account", a->account, "Slurm: the account to charge");
  cmd->add_option("--slurm-args", a->slurm_args,
                  "Slurm: more salloc options, one word each, e.g. \"--time=2:00:00 --qos=low\"");
  cmd->add_option("--coordinator-host", a->coordinator_host,
                  "Slurm: the address workers reach the coordinator at (default: this host's toward slurmctld)");
  cmd->add_option("--bandwidth", a->bandwidth,
                  "Each worker's network bandwidth, e.g. 50MB/s: planned with, and shaped to in containers");
  cmd->add_option("--latency", a->latency, "Containers: added latency of each worker's egress, e.g. 1ms");
  cmd->add_option("--start-delay", a->start_delay,
                  "Start-up delay of each worker: 30s, 'uniform 20s 60s' or 'normal 90s 30s'");
  cmd->add_option("--memory-limit", a->memory_limit,
                  "Containers and Slurm: memory per worker (default: the plan's right-sized memory)");
  cmd->add_option("--cpu-limit", a->cpu_limit,
                  "Containers and Slurm: vCPUs per worker (default: the plan's right-sized vCPUs)");
  cmd->add_option("--scaling", a->scaling, "Scaling policy: fixed, schedule, adabatch or rule (docs/scaling.md)");
  cmd->add_option("--min-replicas", a->min_replicas, "Scaling: fewest data-parallel replicas (adabatch starts here)");
  cmd->add_option("--max-replicas", a->max_replicas, "Scaling: most data-parallel replicas");
  cmd->add_option("--every-epochs", a->every_epochs, "Scaling (adabatch): epochs between doublings");
  cmd->add_flag("--replan", a->replan, "Scaling: plan the pipeline again for the new replicas at each change");
  cmd->add_option("--max-recoveries", a->max_recoveries,
                  "Lost workers to recover from per run (default 3); 0 stops the job on the first loss");
  cmd->add_option("--worker-binary", a->worker_binary, "Run workers from this hydrozoa binary");
  cmd->add_flag("--no-progress", a->no_progress, "No live progress line");
  cmd->add_option("--events", a->events,
                  "Append the job's events to this file as they happen, one JSON object a line (steps, epochs, "
                  "checkpoints, lost workers, scaling, the end; docs/train.md)");
  cmd->add_flag("--refresh-profile", a->refresh_profile, "Profile the model again instead of using the cached profile");
  cmd->callback([a, status] { *status = runTrain(*a); });
}

}  // namespace hydrozoa::cli
