// Planning inside `hydrozoa train` (Hydrozoa §4.2): the coordinator plans
// when the job does not bring a plan.json.
//
// It needs a profile of the model on the workers' hardware: a cached one
// (~/.cache/hydrozoa/profiles, keyed by model, options, threads and
// microbatch sizes; $HYDROZOA_CACHE_DIR overrides) or one measured by
// running `hydrozoa profile` in a worker process (with the network probe
// when the job gives no bandwidth). Then it searches as `hydrozoa plan`
// does, honouring the job's pins, and writes profile.json and plan.json into
// the run directory.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "cluster/job_spec.h"
#include "cluster/progress.h"
#include "cluster/run_dir.h"
#include "core/status.h"
#include "model/arch.h"
#include "plan/plan.h"

namespace hydrozoa::cluster {

struct ModelInfo {
  std::string name;
  std::vector<std::string> layer_names;
  model::InputSpec input;
  model::TaskSpec task;
};

// Builds the job's model once (zoo or TorchScript) to learn its layers,
// input and task; errors are the model's own (unknown model, bad option,
// unreadable TorchScript).
Result<ModelInfo> inspectModel(const JobSpec& spec);

// Checks that a plan fits the model and the job (layers, workers, batch).
Status checkPlan(const plan::Plan& p, const ModelInfo& model, const JobSpec& spec, const std::string& origin);
// With flexrr on: a plan of data-parallel replicas of one stage (NOTE [Where
// FlexRR reassigns]).
Status checkFlexrr(const plan::Plan& p, const JobSpec& spec, const std::string& origin);
// The plan suits the job's tiers (NOTE [Tiers are data-parallel replicas]).
Status checkTiers(const plan::Plan& p, const JobSpec& spec, const std::string& origin);
// OK when the job's model splits spec.tensor_parallel ways (a zoo model
// whose transformer blocks t divides: model/arch.h checkTensorParallel);
// otherwise one line naming the constraint and the valid values.
Status checkTensorParallel(const JobSpec& spec);

// Whether replicas sum their gradients through shared memory rather than
// Gloo (NOTE [Shared-memory allreduce], runtime/comm/shared_memory.cc):
// allowed unless HYDROZOA_SHM_ALLREDUCE is "0" (for comparisons), and used
// when the workers are plain processes on this machine (the local launcher,
// or "auto" where containers cannot be made), not containers, which stand
// for separate machines behind shaped links. The planner costs the
// allreduce the way the workers will do it.
bool sharedMemoryAllreduceAllowed();
bool replicasShareMemory(const JobSpec& spec);

// The job's plan: from spec.plan_file, or planned here (see above).
// `dataBytes`: the datasets in memory, held by the first and last stages'
// workers; `executable` is the hydrozoa binary that profiles;
// `refreshProfile`: measure even when a cached profile matches; a set
// `interrupt` ends the profiling worker and returns an error.
Result<plan::Plan> planJob(const JobSpec& spec, const ModelInfo& model, Bytes dataBytes, const RunDir& run,
                           const std::string& executable, bool refreshProfile, Progress& progress,
                           const std::atomic<int>* interrupt = nullptr);

// A plan for `replicas` replicas (scaling.replan): the run's profile.json
// searched again with the same workers and samples per replica as
// `jobPlan`; stages, split and microbatches may differ (pins still hold).
Result<plan::Plan> replanForReplicas(const JobSpec& spec, const plan::Plan& jobPlan, int replicas, Bytes dataBytes,
                                     const RunDir& run);

}  // namespace hydrozoa::cluster
