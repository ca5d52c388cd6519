// `hydrozoa train`'s entry: the job spec checked, the run directory made or
// reopened, the data opened, the plan made or the run's read back with its
// latest checkpoint, then the job (cluster/coordinator_job.h) run.
#include <fmt/format.h>
#include <torch/cuda.h>

#include <ctime>
#include <filesystem>
#include <optional>

#include "cluster/coordinator.h"
#include "cluster/coordinator_job.h"
#include "cluster/job_plan.h"
#include "cluster/progress.h"
#include "cluster/run_dir.h"
#include "data/dataset.h"
#include "model/zoo.h"
#include "runtime/job_data.h"

namespace hydrozoa::cluster {
namespace {

std::string defaultRunDir(const JobSpec& spec) {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&now));
  return fmt::format("runs/{}-{}", spec.name, stamp);
}

}  // namespace

using coordinator::Job;

Result<TrainResult> runTraining(const TrainOptions& o) {
  JobSpec spec = o.spec;
  HZ_RETURN_IF_ERROR(validateJobSpec(spec, "the job"));
  if (spec.scaling.every_steps > 0) {
    return invalidArgument(fmt::format(
        "scaling.every_steps is {}: hydrozoa train changes the replicas at epoch boundaries only (docs/scaling.md); "
        "remove every_steps",
        spec.scaling.every_steps));
  }
  if (spec.device == "cuda" && !torch::cuda::is_available()) {
    return invalidArgument("training.device is cuda but this machine has no usable CUDA device (no GPU, or no driver "
                           "for it); use device: cpu or auto (docs/gpu.md)");
  }
  const bool resuming = !o.resume_dir.empty();
  if (!resuming) {
    // The run directory's job.yaml must work from anywhere (--resume from
    // another directory): files the spec names are kept as absolute paths.
    makePathsAbsolute(&spec, model::isTorchScriptPath(spec.model));
  }
  std::optional<RunDir> run;
  if (resuming) {
    HZ_ASSIGN_OR_RETURN(run, RunDir::open(o.resume_dir));
  } else {
    HZ_ASSIGN_OR_RETURN(run, RunDir::create(spec.out_dir.empty() ? defaultRunDir(spec) : spec.out_dir));
  }
  // A new run that fails before it trains leaves nothing behind, so the same
  // --out works once the problem is fixed.
  struct DiscardUnlessStarted {
    const RunDir* run;
    bool armed;
    ~DiscardUnlessStarted() {
      if (armed) run->discard();
    }
  } discardUnlessStarted{&*run, !resuming};
  if (!spec.checkpoint_dir.empty()) HZ_RETURN_IF_ERROR(run->useCheckpointsDir(spec.checkpoint_dir));
  HZ_ASSIGN_OR_RETURN(ModelInfo model, inspectModel(spec));
  if (spec.tensor_parallel.value_or(1) > 1) HZ_RETURN_IF_ERROR(checkTensorParallel(spec));

  // The data must be there before any worker starts.
  const data::DataSpec ds = runtime::jobDataSpec(spec, model.input, model.task);
  HZ_ASSIGN_OR_RETURN(auto train, data::openDataset(ds, data::Split::kTrain));
  std::int64_t testSize = 0;
  Bytes dataBytes = train->memoryBytes();
  if (spec.eval) {
    HZ_ASSIGN_OR_RETURN(auto test, data::openDataset(ds, data::Split::kTest));
    testSize = test->size();
    if (spec.dataset != "text") dataBytes += test->memoryBytes();  // text: both splits share the file
  }
  if (train->task().classes != model.task.classes && spec.dataset != "synthetic") {
    return invalidArgument(fmt::format("the model has {} outputs but {} has {} classes; set the model's classes option",
                                       model.task.classes, train->describe(), train->task().classes));
  }

  Progress planning(o.progress);
  if (spec.precision == "fp16" && spec.device != "cuda" && !torch::cuda::is_available() && spec.launcher != "slurm") {
    // Measured: the Fashion-MNIST CNN 6.6x slower than fp32 on this project's CPUs (docs/gpu.md).
    planning.note("training.precision fp16 on CPUs runs without fast fp16 kernels (several times slower than fp32); "
                  "bf16 is the CPU's 16-bit type");
  }
  std::int64_t startStep = 0;
  std::string checkpoint;
  plan::Plan p;
  if (resuming) {
    if (o.replan) {
      // NOTE [Re-planned resume] (cli/cmd_train.cc): checkpoints hold whole
      // layers (NOTE [Checkpoints of split layers]), so any split loads them.
      auto planned = planJob(spec, model, dataBytes, *run, o.executable.empty() ? "/proc/self/exe" : o.executable,
                             o.refresh_profile, planning, o.interrupt);
      if (!planned.ok()) return planned.status();
      p = std::move(*planned);
    } else {
      HZ_ASSIGN_OR_RETURN(p, plan::loadPlan(run->file("plan.json")));
    }
    HZ_RETURN_IF_ERROR(checkPlan(p, model, spec, run->file("plan.json")));
    run->removePartialCheckpoints();
    HZ_ASSIGN_OR_RETURN(auto latest, run->latestCheckpoint());
    if (latest) {
      startStep = latest->step;
      checkpoint = latest->dir;
      // Metrics after the checkpoint belong to the interrupted attempt.
      HZ_RETURN_IF_ERROR(run->keepMetricsThrough(startStep, latest->manifest.value("epoch", std::int64_t{0})));
      planning.note(fmt::format("Resuming {} from its checkpoint at step {}", run->root(), startStep));
    } else {
      HZ_RETURN_IF_ERROR(run->writeText("metrics.jsonl", ""));
      planning.note(fmt::format("{} has no complete checkpoint: training it from the start", run->root()));
    }
  } else {
    HZ_RETURN_IF_ERROR(run->writeText("job.yaml", toYaml(jobSpecToJson(spec))));
    HZ_RETURN_IF_ERROR(run->writeText("metrics.jsonl", ""));
    auto planned =
        planJob(spec, model, dataBytes, *run, o.executable.empty() ? "/proc/self/exe" : o.executable,
                o.refresh_profile, planning, o.interrupt);
    if (!planned.ok()) return planned.status();
    p = std::move(*planned);
  }
  if (resuming) HZ_RETURN_IF_ERROR(run->writeText("job.yaml", toYaml(jobSpecToJson(spec))));
  Json resumedFrom = Json::object();  // the latest checkpoint's checked manifest
  if (resuming && !checkpoint.empty()) {
    HZ_ASSIGN_OR_RETURN(auto latest, run->latestCheckpoint());
    if (latest) resumedFrom = latest->manifest;
  }
  discardUnlessStarted.armed = false;
  Job job(o, *run, spec, p, model, train->size(), testSize, dataBytes, startStep, checkpoint, resumedFrom);
  return job.run();
}

}  // namespace hydrozoa::cluster
