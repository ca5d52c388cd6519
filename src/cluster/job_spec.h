// The job spec: what `hydrozoa train job.yaml` trains, on what, how, and
// where its outputs go (docs/train.md). Pure C++.
//
// Every key has a default except model.name; unknown keys are errors that
// list the known ones. A spec round-trips through jobSpecToJson(), which is
// what the run directory's job.yaml holds (the resolved spec).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/files.h"
#include "cluster/scaling/policy.h"
#include "cluster/stragglers.h"
#include "cluster/tiers.h"
#include "core/status.h"
#include "core/units.h"

namespace hydrozoa::cluster {

struct OptimizerSpec {
  std::string name = "sgd";  // sgd (momentum 0 or more) | adam
  double lr = 0.05;
  double momentum = 0.9;     // sgd
  bool nesterov = false;     // sgd
  double weight_decay = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam
};

struct LrScheduleSpec {
  std::string name = "constant";  // constant | step | cosine
  std::int64_t warmup_steps = 0;  // linear ramp from 0 to lr
  std::int64_t step_epochs = 1;   // step: multiply by gamma every step_epochs epochs
  double gamma = 0.1;
  double min_lr = 0;              // cosine: the floor
};

// How long a worker takes to start (a cloud container: pulling its image,
// booting; GPU containers take minutes). The container launcher waits this
// long before the worker's process begins; it is not billed.
struct StartDelay {
  std::string distribution = "fixed";  // fixed | uniform | normal
  Seconds a = 0;  // fixed: the delay; uniform: the least; normal: the mean
  Seconds b = 0;  // uniform: the most; normal: the standard deviation
};

// "30s", "fixed 30s", "uniform 20s 60s", "normal 90s 30s".
Result<StartDelay> parseStartDelay(const std::string& text, const std::string& what);
std::string formatStartDelay(const StartDelay& d);
// One draw, deterministic in `seed` (normal: truncated at 0).
Seconds drawStartDelay(const StartDelay& d, std::uint64_t seed);

// cluster.slurm: how the Slurm launcher asks for its resources (docs/slurm.md).
struct SlurmSpec {
  std::string partition, account;   // "" : the cluster's defaults
  std::vector<std::string> args;    // more salloc/srun options, one word each ("--time=2:00:00", "--qos=low")
  std::string coordinator_host;     // the address workers reach the coordinator at; "" : this host's toward slurmctld
  Seconds allocation_timeout = 600; // waiting for an allocation; then it is given up, nothing left queued
};

// "--time=2:00:00  --qos=low" -> {"--time=2:00:00", "--qos=low"}: words
// between whitespace (cluster.slurm.args, --slurm-args).
std::vector<std::string> splitWords(const std::string& text);

struct JobSpec {
  std::string name = "job";
  // model
  std::string model;  // zoo name or TorchScript path (required)
  std::vector<std::pair<std::string, std::string>> model_options;
  // data
  std::string dataset = "synthetic";  // fashion_mnist | cifar10 | text | synthetic
  std::string data_path;              // "" : the dataset's default
  bool shuffle = true;
  bool drop_last = false;
  std::int64_t synthetic_train = 1024, synthetic_test = 256;
  // training
  std::int64_t epochs = 1;
  std::optional<std::int64_t> max_steps;  // stop after this many steps in all
  std::int64_t global_batch = 64;
  OptimizerSpec optimizer;
  LrScheduleSpec lr_schedule;
  std::uint64_t seed = 0;
  bool eval = true;
  int threads = 1;              // compute threads per worker
  std::string device = "auto";  // auto | cpu | cuda
  // fp32 | bf16 | fp16: the passes under autocast to that type, weights,
  // gradients and optimizer state in fp32 (NOTE [Mixed precision],
  // runtime/precision.h); fp16 with dynamic loss scaling (NOTE [Loss
  // scaling], runtime/loss_scale.h): training.loss_scale.initial, the
  // scale it starts at, and .growth_interval, the clean steps in a row after
  // which it doubles.
  std::string precision = "fp32";
  double loss_scale_initial = 65536;
  std::int64_t loss_scale_growth_interval = 2000;
  // cluster
  int workers = 1;
  std::string launcher = "auto";  // auto (container as root, else local) | local | container | function | slurm
  Seconds function_timeout = 900;  // function: how long an invocation may run (the platform's limit)
  std::optional<BytesPerSecond> bandwidth;  // for planning and shaping; default: measured here
  Seconds latency = 0;                      // container: added one-way delay of each worker's egress
  std::optional<StartDelay> start_delay;    // container, function: before each worker starts (none: 0;
                                            // a function platform's catalog cold_start)
  std::optional<Bytes> memory_limit;        // container, slurm: default the plan's right-sized worker memory
  std::optional<double> cpu_limit;          // container, slurm: vCPUs; default the plan's right-sized vCPUs
  std::optional<Bytes> memory;              // per worker, for planning
  std::string platform = "aci";             // pricing catalog
  Seconds heartbeat_interval = 1;
  Seconds heartbeat_timeout = 10;
  Seconds start_timeout = 120;              // to register and build
  int max_recoveries = 3;                   // lost workers recovered per run; 0: a loss stops the job
  int control_port = 0;                     // 0: any free port
  SlurmSpec slurm;                          // slurm: partition, account, more options
  // Slow workers injected for experiments (cluster.stragglers, --stragglers;
  // docs/stragglers.md).
  std::vector<StragglerSpec> stragglers;
  // Reliable and transient workers, the transient ones on a replayed spot
  // market (cluster.tiers, --tiers, --spot-trace; docs/spot.md, "Live tiers").
  TierSpec tiers;
  // The data plane (docs/functions.md, "The channel"): "" : workers connect
  // to each other (Gloo); "redis": through a redis-server the job starts
  // beside the coordinator; "redis://host:port": through that server, with
  // the password in channel_password_file ("" : none).
  std::string channel;
  std::string channel_password_file;
  std::string channel_sync = "pipelined";  // pipelined (FuncPipe) | lambdaml: the stage allreduce through it
  Seconds channel_timeout = 120;  // a read that gets nothing this long: its message is lost (the peer died, or the key)
  // plan
  std::string plan_file;  // "" : plan here
  std::string profile_file;  // plan from this profile instead of measuring one ("" : measure, or the cache)
  std::optional<int> data_parallel, stages;
  // Workers sharing each stage's transformer layers (plan.tensor_parallel,
  // --tensor-parallel; docs/tensor_parallel.md); unset: the planner's choice.
  std::optional<int> tensor_parallel;
  // Stage boundaries sent 1/t from each slice of a tensor group and
  // all-gathered by the receivers (plan.scatter_gather, --scatter-gather;
  // PTD-P §4.4.1; no effect at t = 1); unset: the plan's.
  std::optional<bool> scatter_gather;
  std::optional<std::int64_t> microbatches, microbatch_size;
  // The pipeline schedule (plan.schedule, --schedule; docs/schedules.md):
  // unset, the plan's (gpipe when planned here).
  std::optional<std::string> schedule;
  std::optional<int> chunks;  // model chunks per stage, interleaved (plan.chunks, --chunks)
  std::optional<bool> recompute;  // recompute activations in the backward pass (plan.recompute, --recompute)
  std::string objective = "fastest";
  // FlexRR's rapid reassignment among data-parallel replicas (flexrr:,
  // --flexrr; docs/stragglers.md).
  FlexrrSpec flexrr;
  // scaling (policy at epoch boundaries; docs/scaling.md)
  ScalingSpec scaling;
  // output
  std::string out_dir;  // "" : runs/<name>-<time>
  std::int64_t checkpoint_every_epochs = 1;
  // A directory every worker and the coordinator reach (a shared
  // filesystem): workers write their checkpoints there. "" : each worker
  // ships its checkpoints to the coordinator, into <run>/checkpoints.
  std::string checkpoint_dir;
  std::int64_t trace_steps = 20;  // steps per epoch recorded in trace.json
};

// Reads a spec from parsed YAML/JSON; `origin` names the file in errors.
Result<JobSpec> parseJobSpec(const Json& j, const std::string& origin);
Result<JobSpec> loadJobSpec(const std::string& path);

// The resolved spec, every key present.
Json jobSpecToJson(const JobSpec& spec);

// What tiers imply where the spec leaves it open: each of the R + T workers
// a data-parallel replica of one stage (plan.data_parallel, plan.stages,
// cluster.workers). No effect without tiers.
void applyTiers(JobSpec* spec);

// The files the spec names (its data, plan, profile, checkpoint directory
// and, when `modelIsFile`, its TorchScript model) as absolute paths from the
// working directory, so that the spec works from anywhere (a resumed run,
// the cluster scheduler's job processes).
void makePathsAbsolute(JobSpec* spec, bool modelIsFile);

// training.precision's values: fp32, bf16, fp16.
bool knownPrecision(const std::string& precision);
// Why fp16 cannot run under asynchronous schedule `schedule`, and the fix
// (NOTE [Loss scaling], runtime/loss_scale.h).
std::string fp16ScheduleProblem(const std::string& schedule);

// Checks the values (positive sizes, known names) and that pins agree with
// the workers; parse functions call it, callers that change a spec do too.
Status validateJobSpec(const JobSpec& spec, const std::string& origin);

}  // namespace hydrozoa::cluster
