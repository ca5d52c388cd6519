// Pipeline and hybrid training equal one process doing gradient accumulation
// over the same microbatches (issue 3 §5; NOTE [Equivalence with one process]
// in src/runtime/stage.h): the same loss at every step, the same final
// weights. Each run is the real binary with its worker processes.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "integration/harness.h"
#include "plan/cost/schedules.h"
#include "plan/cost/two_bw.h"
#include "plan/plan.h"
#include "runtime/checkpoint.h"
#include "runtime/reference.h"
#include "runtime/schedule/schedule.h"

namespace hydrozoa {
namespace {

using testing::runHydrozoa;
using testing::ScratchDir;

struct Plan {
  int replicas, stages, microbatches;
};

std::string jobYaml(const std::string& model, double lr, const std::string& data = "{dataset: fashion_mnist}",
                    const std::string& precision = "fp32") {
  return "name: eq\n"
         "model: " + model + "\n"
         "data: " + data + "\n"
         "training: {epochs: 3, global_batch: 24, seed: 7, eval: false, precision: " + precision + ",\n"
         "           optimizer: {name: sgd, lr: " + std::to_string(lr) + ", momentum: 0.9, weight_decay: 0.0001}}\n"
         "cluster: {workers: 4, bandwidth: 1Gbit/s}\n"
         "output: {checkpoint_every_epochs: 0, trace_steps: 2}\n";
}


struct Tolerance {
  std::string data = "{dataset: fashion_mnist}";
  int steps = 4;
  double loss = 1e-5;    // relative, per step
  double params = 1e-5;  // relative to the tensor's largest magnitude
  double absolute = 0;   // added to the parameters' bound
  double lr = 0.1;
  std::string launcher;  // "": the default (containers where they can be made)
  std::string schedule;  // "": the default (gpipe)
  int chunks = 0;        // --chunks (interleaved), when > 0
  bool recompute = false;  // --recompute
  std::vector<std::string> args;  // more of `hydrozoa train`'s flags
  int tensor_parallel = 1;        // what the run's plan.json must say
  // > 0: what every worker's "pipeline traffic" line must say it sent per step.
  std::int64_t pipeline_bytes_per_step = 0;
  // > 0: FlexRR must have moved at least this many microbatches (summary.json).
  std::int64_t min_reassigned = 0;
  std::string precision = "fp32";  // training.precision, of the run and of the reference
  std::string loss_scale;          // training.loss_scale (fp16), e.g. "{initial: 1024}"
  // Not empty: what worker i's "pipeline traffic" line must say it sent per step.
  std::vector<std::int64_t> worker_bytes_per_step;
};

// The parameters saved in checkpoint `ckpt` equal `ref`'s, layer by layer.
void expectSameWeights(const std::string& ckpt, const model::Model& ref, const Tolerance& t) {
  for (size_t i = 0; i < ref.layers.size(); ++i) {
    torch::serialize::InputArchive archive;
    archive.load_from(ckpt + "/" + runtime::layerFileName(static_cast<int>(i)));
    const auto& module = *ref.layers[i].module;
    for (const auto& param : module.named_parameters()) {
      torch::Tensor saved;
      ASSERT_TRUE(archive.try_read("param/" + param.key(), saved)) << param.key();
      const double scale = std::max(1e-3, param.value().abs().max().item<double>());
      EXPECT_LT((saved - param.value()).abs().max().item<double>(), t.params * scale + t.absolute)
          << "layer " << i << " " << param.key();
    }
  }
}

std::string checkpointOf(const ScratchDir& dir, const std::string& run, int step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08d", step);
  return (dir.path() / run / "checkpoints" / name).string();
}

// Each step's loss scale in `run`'s metrics.jsonl, in order.
std::vector<double> lossScales(const std::filesystem::path& run) {
  std::vector<double> scales;
  std::ifstream metrics(run / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const Json j = Json::parse(line);
    if (j.contains("loss_scale")) scales.push_back(j["loss_scale"].get<double>());
  }
  return scales;
}

// training.loss_scale.initial of dir/job.yaml.
double initialLossScale(const ScratchDir& dir) {
  auto spec = cluster::loadJobSpec(dir / "job.yaml");
  return spec.ok() ? spec->loss_scale_initial : 0;
}

// The one-process reference of dir/job.yaml: `replicas` × microbatches of
// `microbatchSize`, `steps` steps, with 2BW's stale weights or not.
// With `stashingStages` (the stages' first layers), PipeDream's updates.
Result<runtime::ReferenceRun> referenceOf(const ScratchDir& dir, int replicas, std::int64_t microbatchSize,
                                          std::int64_t steps, bool staleWeights,
                                          const std::vector<int>& stashingStages = {},
                                          const std::vector<int>& stageReplicas = {}, bool verticalSync = false) {
  HZ_ASSIGN_OR_RETURN(cluster::JobSpec spec, cluster::loadJobSpec(dir / "job.yaml"));
  runtime::ReferenceOptions ro;
  ro.job = spec;
  ro.replicas = replicas;
  ro.microbatch_size = microbatchSize;
  ro.steps = steps;
  ro.stale_weights = staleWeights;
  ro.weight_stashing_stages = stashingStages;
  ro.stage_replicas = stageReplicas;
  ro.vertical_sync = verticalSync;
  return runtime::trainReference(ro);
}

// The first layer of each stage of the run in dir/`run` (its plan.json).
std::vector<int> stageFirstLayers(const ScratchDir& dir, const std::string& run) {
  std::vector<int> first;
  auto plan = readJsonFile(std::filesystem::path(dir / run) / "plan.json");
  if (!plan.ok()) return first;
  for (const Json& s : (*plan)["stages"]) first.push_back(s["first_layer"].get<int>());
  return first;
}

// Runs `plan`, then the reference with the same (replicas, microbatch size),
// and compares losses step by step and the final parameters.
void expectEquivalent(const std::string& model, const Plan& p, const Tolerance& t = {}) {
  SCOPED_TRACE(::testing::Message() << model << " " << p.replicas << "x" << p.stages << " M=" << p.microbatches << " "
                                    << (t.schedule.empty() ? "gpipe" : t.schedule));
  ScratchDir dir;
  std::ofstream(dir / "job.yaml") << jobYaml(model, t.lr, t.data,
                                            t.precision + (t.loss_scale.empty() ? "" : ", loss_scale: " + t.loss_scale));
  std::vector<std::string> args = {"train", "job.yaml", "--data-parallel", std::to_string(p.replicas), "--stages",
                                   std::to_string(p.stages), "--microbatches", std::to_string(p.microbatches),
                                   "--max-steps", std::to_string(t.steps), "--no-progress", "--out", "run"};
  if (!t.launcher.empty()) args.insert(args.end(), {"--launcher", t.launcher});
  if (!t.schedule.empty()) args.insert(args.end(), {"--schedule", t.schedule});
  if (t.chunks > 0) args.insert(args.end(), {"--chunks", std::to_string(t.chunks)});
  if (t.recompute) args.push_back("--recompute");
  args.insert(args.end(), t.args.begin(), t.args.end());
  const auto r = runHydrozoa(dir.path().string(), args);
  ASSERT_EQ(r.code, 0) << r.err;
  auto planned = readJsonFile(std::filesystem::path(dir / "run") / "plan.json");
  ASSERT_TRUE(planned.ok());
  EXPECT_EQ((*planned)["strategy"].value("tensor_parallel", 1), t.tensor_parallel);
  const std::vector<double> losses = testing::stepLosses(dir / "run");
  ASSERT_EQ(losses.size(), static_cast<size_t>(t.steps));
  if (!t.schedule.empty()) {
    // Worker 0 (stage 0) ran the schedule's order of passes.
    const auto kind = plan::parseSchedule(t.schedule, "schedule");
    ASSERT_TRUE(kind.ok());
    std::vector<std::string> want;
    std::vector<plan::Pass> order = plan::passOrder(*kind, 0, p.stages, p.microbatches, std::max(1, t.chunks));
    if (plan::asynchronous(*kind)) {  // the first step: nothing carried in, the next begun
      order = plan::asyncOneFOneBOrder(0, p.stages, p.microbatches, 0, t.steps > 1 ? p.microbatches : 0);
      order.erase(std::remove_if(order.begin(), order.end(), [](const plan::Pass& x) { return x.step != 0; }),
                  order.end());
    }
    for (const plan::Pass& pass : order) {
      want.push_back(fmt::format("{}{}{}", pass.backward ? 'B' : 'F', pass.microbatch,
                                 t.chunks > 1 ? fmt::format(" c{}", pass.chunk) : ""));
    }
    EXPECT_EQ(testing::tracedPasses(dir / "run", 0, 0), want);
  }
  if (t.launcher == "local" && p.replicas > 1 && t.args.empty()) {
    std::ifstream log(dir.path() / "run" / "workers" / "worker-0.log");
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("allreduce goes through shared memory"), std::string::npos) << text;
  }

  if (t.pipeline_bytes_per_step > 0) {
    auto summary = readJsonFile(std::filesystem::path(dir / "run") / "summary.json");
    ASSERT_TRUE(summary.ok());
    EXPECT_EQ((*summary)["plan"]["scatter_gather"], true);
    EXPECT_EQ((*planned)["strategy"]["scatter_gather"], true);
    for (const Json& w : (*summary)["workers"]) {
      std::ifstream log(w["log"].get<std::string>());
      const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      EXPECT_NE(text.find(fmt::format("steps, {} per step", t.pipeline_bytes_per_step)), std::string::npos)
          << "worker " << w["id"] << ": " << text;
    }
  }

  for (size_t i = 0; i < t.worker_bytes_per_step.size(); ++i) {
    std::ifstream log(dir.path() / "run" / "workers" / fmt::format("worker-{}.log", i));
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find(fmt::format("steps, {} per step", t.worker_bytes_per_step[i])), std::string::npos)
        << "worker " << i << ": " << text;
  }

  if (t.min_reassigned > 0) {
    auto summary = readJsonFile(std::filesystem::path(dir / "run") / "summary.json");
    ASSERT_TRUE(summary.ok());
    EXPECT_GE((*summary)["flexrr"]["reassigned_microbatches"].get<std::int64_t>(), t.min_reassigned)
        << (*summary)["flexrr"].dump();
    EXPECT_EQ((*summary)["flexrr"]["microbatches"], t.steps * p.replicas * p.microbatches);
  }

  const bool pipedream = t.schedule == "pipedream" || t.schedule == "pipedream-vs";
  auto ref = referenceOf(dir, p.replicas, 24 / (p.replicas * p.microbatches), t.steps, t.schedule == "2bw",
                         pipedream ? stageFirstLayers(dir, "run") : std::vector<int>{}, {},
                         t.schedule == "pipedream-vs");
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  for (int s = 0; s < t.steps; ++s) {
    EXPECT_NEAR(losses[s], ref->losses[s], t.loss * std::fabs(ref->losses[s])) << "step " << s + 1;
  }
  if (!ref->loss_scales.empty()) {  // NOTE [Loss scaling]: the same steps skipped, the same scale after each
    EXPECT_EQ(lossScales(dir / "run"), ref->loss_scales);
    std::int64_t skipped = 0;
    double before = initialLossScale(dir);
    for (double after : ref->loss_scales) {
      skipped += after < before;
      before = after;
    }
    auto summary = readJsonFile(std::filesystem::path(dir / "run") / "summary.json");
    ASSERT_TRUE(summary.ok());
    EXPECT_EQ((*summary)["loss_scale"]["skipped_steps"], skipped);
    EXPECT_GT(skipped, 0) << "no step overflowed: the test checks no skip";
    EXPECT_LT(skipped, t.steps) << "every step overflowed: the test checks no update";
  }
  // Final weights: the run's last checkpoint, layer by layer.
  expectSameWeights(checkpointOf(dir, "run", t.steps), ref->model, t);
}

const std::string kMlp = "{name: mlp, options: {hidden: 32, depth: 2}}";  // 3 layers

TEST(Equivalence, OneWorker) { expectEquivalent(kMlp, {1, 1, 4}); }
TEST(Equivalence, PipelineOfThree) { expectEquivalent(kMlp, {1, 3, 4}); }
TEST(Equivalence, ThreeDataParallelReplicas) { expectEquivalent(kMlp, {3, 1, 2}); }
TEST(Equivalence, HybridTwoByTwo) { expectEquivalent(kMlp, {2, 2, 3}); }

// NOTE [Mixed precision]: bf16 passes, fp32 weights, against one process
// in bf16. The boundaries cross in 16 bits: the 1x3 MLP's 24 x 32
// activations and their gradients, 2 bytes an element.
TEST(Equivalence, Bf16PipelineAndHybridMatchOneProcessInBf16) {
  Tolerance t;
  t.precision = "bf16";
  t.loss = 1e-2;
  t.params = 1e-2;
  t.worker_bytes_per_step = {24 * 32 * 2, 2 * 24 * 32 * 2, 24 * 32 * 2};
  expectEquivalent(kMlp, {1, 3, 4}, t);
  t.worker_bytes_per_step.clear();
  expectEquivalent(kMlp, {2, 2, 3}, t);
}

// NOTE [Loss scaling]: fp16 passes, the loss scale so large at first that
// the gradients overflow fp16: every worker skips those steps, the scale
// halves at each, and doubles after every 2 clean steps until it overflows
// again; one process in fp16 skips the same steps, and the training after
// them is the same.
TEST(Equivalence, Fp16SkipsTheStepsOneProcessSkips) {
  Tolerance t;
  t.precision = "fp16";
  t.loss_scale = "{initial: 4194304, growth_interval: 2}";
  t.steps = 8;
  t.loss = 1e-2;
  t.params = 1e-2;
  expectEquivalent(kMlp, {1, 3, 4}, t);
  expectEquivalent(kMlp, {2, 2, 3}, t);
}

// A stopped fp16 run resumes with the scale it had (each layer's
// checkpoint file holds it): 8 steps in one go, and 4 then 4 more after
// --resume, scale the same and skip the same steps.
TEST(Equivalence, Fp16ResumesWithTheLossScaleItHad) {
  ScratchDir dir;
  std::ofstream(dir / "job.yaml") << jobYaml(kMlp, 0.1, "{dataset: fashion_mnist}",
                                            "fp16, loss_scale: {initial: 4194304, growth_interval: 2}");
  auto train = [&](std::vector<std::string> args) {
    args.push_back("--no-progress");
    const auto r = runHydrozoa(dir.path().string(), args);
    EXPECT_EQ(r.code, 0) << r.err;
  };
  const std::vector<std::string> plan = {"--data-parallel", "1", "--stages", "2", "--microbatches", "2"};
  auto fresh = [&](const std::string& steps, const std::string& out) {
    std::vector<std::string> args = {"train", "job.yaml", "--max-steps", steps, "--out", out};
    args.insert(args.end(), plan.begin(), plan.end());
    train(args);
  };
  fresh("8", "whole");
  fresh("4", "split");
  train({"train", "--resume", "split", "--max-steps", "8"});
  const std::vector<double> whole = lossScales(dir / "whole"), split = lossScales(dir / "split");
  ASSERT_EQ(whole.size(), 8u);
  EXPECT_EQ(split, whole);
  EXPECT_NE(whole[3], 4194304) << "the test needs a scale changed by step 4";
  const std::vector<double> a = testing::stepLosses(dir / "whole"), b = testing::stepLosses(dir / "split");
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-6 * std::fabs(a[i])) << "step " << i + 1;
}

// Plain processes on one machine: the replicas sum through shared memory
// (NOTE [Shared-memory allreduce]), every element once, by one replica.
TEST(Equivalence, ReplicasSummingThroughSharedMemory) {
  Tolerance t;
  t.launcher = "local";
  expectEquivalent(kMlp, {3, 1, 2}, t);
  expectEquivalent(kMlp, {2, 2, 3}, t);
}

// Through a Redis channel of the job's own (docs/functions.md): every
// message and both scatter-reduces through the store, the same training.
TEST(Equivalence, HybridTwoByTwoThroughRedis) {
  Tolerance t;
  t.launcher = "local";
  t.args = {"--channel", "redis"};
  expectEquivalent(kMlp, {2, 2, 3}, t);
  t.args = {"--channel", "redis", "--channel-sync", "lambdaml"};
  t.schedule = "1f1b";
  expectEquivalent(kMlp, {3, 2, 4}, t);
}

// Dropout draws the same masks however the layers are split.
TEST(Equivalence, HybridWithDropout) {
  expectEquivalent("{name: mlp, options: {hidden: 32, depth: 2, dropout: 0.3}}", {2, 2, 3});
}

// A schedule's usual cases: 3 stages, replicas with dropout, and an epoch's
// end (73 samples: a last step of one microbatch); `t` as left by the last.
void expectScheduleEquivalent(Tolerance& t) {
  t.steps = 5;
  expectEquivalent(kMlp, {1, 3, 6}, t);
  expectEquivalent("{name: mlp, options: {hidden: 32, depth: 2, dropout: 0.3}}", {2, 2, 3}, t);
  t.data = "{dataset: synthetic, synthetic_train: 73, synthetic_test: 10}";
  t.steps = 7;
  expectEquivalent(kMlp, {1, 3, 4}, t);
}

// 1F1B with a flush (PipeDream-Flush) is the same training as GPipe, only
// in another order: warm-up, steady state and cool-down all run (M = 6 on 3
// stages), with replicas and dropout too, and in a short last step with
// fewer microbatches than stages.
TEST(Equivalence, OneFOneBSchedule) {
  Tolerance t;
  t.schedule = "1f1b";
  expectScheduleEquivalent(t);
}

// Interleaved 1F1B (PTD-P): each stage holds 2 or 3 chunks of the model
// (stage s chunks s, s + p, ...), activations cross the stages v times and
// wrap from the last stage to the first; the same training. With 73 samples
// the last step has one microbatch (not a multiple of the stages): it runs
// every forward first.
TEST(Equivalence, InterleavedSchedule) {
  Tolerance t;
  t.schedule = "interleaved";
  t.chunks = 2;
  const std::string deep = "{name: mlp, options: {hidden: 32, depth: 6}}";  // 7 layers
  expectEquivalent(deep, {1, 2, 4}, t);
  expectEquivalent("{name: mlp, options: {hidden: 32, depth: 6, dropout: 0.3}}", {2, 2, 2}, t);
  t.chunks = 3;
  expectEquivalent(deep, {1, 2, 4}, t);
  t.chunks = 2;
  t.data = "{dataset: synthetic, synthetic_train: 73, synthetic_test: 10}";
  expectEquivalent(deep, {1, 2, 4}, t);
}

// Recomputation (NOTE [Recomputation], runtime/stage.h): each stage keeps
// only its microbatches' inputs and runs their forward passes again in
// backward, with the same dropout masks; the same training, with GPipe, 1F1B
// and interleaving.
TEST(Equivalence, Recomputation) {
  Tolerance t;
  t.recompute = true;
  expectEquivalent("{name: mlp, options: {hidden: 32, depth: 2, dropout: 0.3}}", {2, 2, 3}, t);
  t.schedule = "1f1b";
  expectEquivalent(kMlp, {1, 3, 6}, t);
  t.schedule = "interleaved";
  t.chunks = 2;
  expectEquivalent("{name: mlp, options: {hidden: 32, depth: 6}}", {1, 2, 4}, t);
}

// PipeDream-2BW (runtime/schedule/two_bw.h): no flush between steps, and
// every step's gradient taken at the weights before the previous update;
// the same training as one process doing exactly that update, W(t+1) =
// W(t) − ν·∇f(W(t−1)), step by step: on 3 stages, with replicas agreeing
// when to drain and dropout, and across an epoch's end (73 samples: a
// short last step of 1 microbatch, then the pipeline drains, evaluates and
// starts the next epoch afresh).
TEST(Equivalence, TwoBWSchedule) {
  Tolerance t;
  t.schedule = "2bw";
  expectScheduleEquivalent(t);
  t.recompute = true;
  expectEquivalent(kMlp, {1, 3, 4}, t);
}

// PipeDream (runtime/schedule/pipedream.h): an update per microbatch, each
// stage's passes of a microbatch on the weights of p − s − 1 updates before
// (weight stashing); the same training as one process doing exactly that,
// step by step: on 3 stages, with replicas and dropout, across an epoch's
// end, and with 3 replicas of which two have no microbatch in the epoch's
// last step (they join the allreduces with nothing).
TEST(Equivalence, PipeDreamSchedule) {
  Tolerance t;
  t.schedule = "pipedream";
  expectScheduleEquivalent(t);
  expectEquivalent(kMlp, {3, 1, 2}, t);
}

// PipeDream with vertical sync (NOTE [Vertical sync]): every stage runs a
// microbatch on the version stage 0 ran it on, p − 1 updates stale; the same
// training as one process doing exactly that, as pipedream's cases.
TEST(Equivalence, PipeDreamVerticalSync) {
  Tolerance t;
  t.schedule = "pipedream-vs";
  expectScheduleEquivalent(t);
}

// Stages replicated unevenly (1F1B-RR; NOTE [Round-robin over a stage's
// replicas]): the MLP's 3 layers on 3 stages with `replicas` copies each,
// from a plan.json, the step's 4 microbatches of 6 dealt round-robin; the
// same training as one process over those microbatches (PipeDream: each
// stage's updates over its own replicas' microbatches, at the weights each
// replica had at the forward pass).
void expectRoundRobinEquivalent(const std::string& schedule, const std::vector<int>& replicas,
                                const std::string& data = "{dataset: fashion_mnist}", int steps = 5) {
  SCOPED_TRACE(::testing::Message() << schedule << " replicas " << fmt::format("{}", fmt::join(replicas, ",")));
  ScratchDir dir;
  int workers = 0;
  for (int r : replicas) workers += r;
  std::string yaml = jobYaml(kMlp, 0.1, data) + "plan: {file: plan.json}\n";
  yaml.replace(yaml.find("workers: 4"), 10, "workers: " + std::to_string(workers));
  std::ofstream(dir / "job.yaml") << yaml;
  const int K = 4;
  ASSERT_EQ(testing::writeRoundRobinPlan(dir.path().string(), replicas, K, schedule), "");
  const auto r = runHydrozoa(dir.path().string(), {"train", "job.yaml", "--max-steps", std::to_string(steps),
                                                  "--no-progress", "--out", "run"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<double> losses = testing::stepLosses(dir / "run");
  ASSERT_EQ(losses.size(), static_cast<size_t>(steps));
  if (schedule == "1f1b") {  // every worker ran the passes dealt to it, in its order (traced by step index)
    auto order = runtime::makeSchedule(schedule);
    ASSERT_TRUE(order.ok());
    const int p = static_cast<int>(replicas.size());
    for (int s = 0; s < p; ++s) {
      for (int j = 0; j < replicas[static_cast<size_t>(s)]; ++j) {
        const runtime::PipelineShape shape = runtime::PipelineShape{s, p, 1, 0, replicas, j}.forStep(K);
        std::vector<std::string> want;
        for (const runtime::Action& a : (*order)->computeOrder(shape)) {
          want.push_back(fmt::format("{}{}", a.kind == runtime::ActionKind::kBackward ? 'B' : 'F',
                                     shape.stepMicrobatch(a.microbatch)));
        }
        EXPECT_EQ(testing::tracedPasses(dir / "run", plan::workerRank(replicas, s, j), 0), want)
            << "stage " << s << " replica " << j;
      }
    }
  }
  auto ref = referenceOf(dir, 1, 6, steps, schedule == "2bw",
                         schedule == "pipedream" ? stageFirstLayers(dir, "run") : std::vector<int>{},
                         schedule == "pipedream" ? replicas : std::vector<int>{});
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  for (int s = 0; s < steps; ++s) {
    EXPECT_NEAR(losses[s], ref->losses[s], 1e-5 * std::fabs(ref->losses[s])) << "step " << s + 1;
  }
  expectSameWeights(checkpointOf(dir, "run", steps), ref->model, Tolerance{});
}

TEST(Equivalence, StagesReplicatedUnevenly) {
  for (const std::string schedule : {"gpipe", "1f1b", "2bw", "pipedream"}) {
    expectRoundRobinEquivalent(schedule, {2, 1, 1});
    // Each copy of the first stage holds two of its own, one more than the
    // single stage after it would give (NOTE [Round-robin over a stage's
    // replicas]).
    expectRoundRobinEquivalent(schedule, {2, 1});
  }
}

// The same across an epoch's end whose short step has one microbatch (73
// samples), replicas of a middle and a last stage with none in it.
TEST(Equivalence, StagesReplicatedUnevenlyAcrossAnEpochsEnd) {
  for (const std::string schedule : {"1f1b", "pipedream"}) {
    expectRoundRobinEquivalent(schedule, {1, 2, 2}, "{dataset: synthetic, synthetic_train: 73, synthetic_test: 10}", 6);
  }
}

// Stopped and resumed: the checkpoint carries the previous weights (those
// the next step runs on) besides the latest, so the resumed run goes on as
// if never stopped.
TEST(Equivalence, TwoBWStoppedAndResumedEndsTheSame) {
  ScratchDir dir;
  std::ofstream(dir / "job.yaml") << jobYaml(kMlp, 0.1);
  const std::vector<std::string> plan = {"--data-parallel", "2", "--stages", "2", "--microbatches", "3", "--schedule",
                                         "2bw", "--no-progress"};
  std::vector<std::string> first = {"train", "job.yaml", "--max-steps", "3", "--out", "run"};
  first.insert(first.end(), plan.begin(), plan.end());
  auto r = runHydrozoa(dir.path().string(), first);
  ASSERT_EQ(r.code, 0) << r.err;
  torch::serialize::InputArchive saved;
  saved.load_from(checkpointOf(dir, "run", 3) + "/" + runtime::layerFileName(0));
  const std::vector<std::string> keys = saved.keys();
  EXPECT_TRUE(std::any_of(keys.begin(), keys.end(), [](const std::string& k) { return k.rfind("previous/", 0) == 0; }))
      << "the checkpoint holds the previous weights";
  r = runHydrozoa(dir.path().string(), {"train", "--resume", "run", "--max-steps", "6", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto ref = referenceOf(dir, 2, 4, 6, true);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  const std::vector<double> losses = testing::stepLosses(dir / "run");
  ASSERT_EQ(losses.size(), 6U);
  for (int s = 0; s < 6; ++s) EXPECT_NEAR(losses[s], ref->losses[s], 1e-5 * ref->losses[s]) << "step " << s + 1;
  expectSameWeights(checkpointOf(dir, "run", 6), ref->model, Tolerance{});
}

// Without the stale weights the run is not the reference's: the test can fail.
TEST(Equivalence, TwoBWIsNotTheFlushedTraining) {
  ScratchDir dir;
  std::ofstream(dir / "job.yaml") << jobYaml(kMlp, 0.1);
  const auto r = runHydrozoa(dir.path().string(), {"train", "job.yaml", "--data-parallel", "1", "--stages", "2",
                                                   "--microbatches", "4", "--max-steps", "4", "--no-progress", "--out",
                                                   "run", "--schedule", "2bw"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto flushed = referenceOf(dir, 1, 6, 4, false);
  ASSERT_TRUE(flushed.ok());
  const std::vector<double> losses = testing::stepLosses(dir / "run");
  ASSERT_EQ(losses.size(), 4U);
  EXPECT_NEAR(losses[0], flushed->losses[0], 1e-5 * flushed->losses[0]) << "step 1 runs on W(0) either way";
  for (int step : {1, 2, 3}) {  // the flushed training runs step 2 on W(1), 2bw on W(0)
    EXPECT_GT(std::fabs(losses[step] - flushed->losses[step]), 1e-4 * flushed->losses[step]) << "step " << step + 1;
  }
}

// 73 samples: the epoch's last step has 1 sample, so two of the three
// replicas have no microbatch in it (they still join the allreduce), and the
// run goes on into the next epoch.
TEST(Equivalence, AShortLastStepWithIdleReplicas) {
  Tolerance t;
  t.data = "{dataset: synthetic, synthetic_train: 73, synthetic_test: 10}";
  t.steps = 6;
  expectEquivalent(kMlp, {3, 1, 2}, t);
}

// Tensor parallelism (issue 15 §4): a byte-level GPT on a text Debian
// ships, its blocks, embedding and LM head split over t = 2 workers, with
// dropout (its masks drawn whole on every slice: model/tensor_parallel.h).
// The split sums partial products in another order than one process (NOTE
// [Tolerance of the split], tests/model/tensor_parallel_test.cc), and five
// SGD steps carry that rounding on: 1e-4 of each tensor's scale.
Tolerance tensorParallel() {
  Tolerance t;
  t.data = "{dataset: text, path: /usr/share/common-licenses/GPL-3}";
  t.steps = 5;
  t.loss = 1e-5;
  t.params = 1e-4;
  t.lr = 0.05;
  t.launcher = "local";
  t.args = {"--tensor-parallel", "2"};
  t.tensor_parallel = 2;
  return t;
}

const std::string kGpt =
    "{name: gpt, options: {layers: 2, hidden: 32, heads: 4, vocab: 256, seq_len: 32, dropout: 0.1}}";

TEST(Equivalence, TensorParallelPipelineTwoByTwo) { expectEquivalent(kGpt, {1, 2, 4}, tensorParallel()); }
TEST(Equivalence, TensorParallelWithDataParallel) { expectEquivalent(kGpt, {2, 1, 2}, tensorParallel()); }

// ... under 1F1B, interleaved 1F1B (2 chunks a stage: one layer each) and
// recomputation, the same training too (issue 15 §2).
TEST(Equivalence, TensorParallelUnderEachFlushingScheduleAndRecomputation) {
  Tolerance t = tensorParallel();
  t.schedule = "1f1b";
  expectEquivalent(kGpt, {1, 2, 4}, t);
  t.schedule = "interleaved";
  t.chunks = 2;
  expectEquivalent(kGpt, {1, 2, 4}, t);
  t.schedule.clear();
  t.chunks = 0;
  t.recompute = true;
  expectEquivalent(kGpt, {1, 2, 4}, t);
}

// With scatter/gather (PTD-P §4.4.1; NOTE [Scatter/gather of stage
// boundaries], runtime/exec/step_executor.cc) each slice sends half of
// each boundary and the receivers all-gather it: every worker sends half
// the bytes (24 samples × 32 positions × 32 floats each way per step, over
// 2) and the training is the same, under GPipe and under 1F1B.
TEST(Equivalence, TensorParallelScatterGatherSendsHalfAndTrainsTheSame) {
  Tolerance t = tensorParallel();
  t.args.push_back("--scatter-gather");
  t.pipeline_bytes_per_step = 24 * 32 * 32 * 4 / 2;
  expectEquivalent(kGpt, {1, 2, 4}, t);
  t.schedule = "1f1b";
  expectEquivalent(kGpt, {1, 2, 4}, t);
}

// A checkpoint holds whole layers (NOTE [Checkpoints of split layers],
// runtime/checkpoint.cc): taken at t = 2, it resumes at t = 4 and, the
// layers' slices joined, at t = 1 on another pipeline × data-parallel grid,
// and both end as one process does. Without dropout: its masks follow the
// microbatches (NOTE [Equivalence with one process]), which the data-
// parallel resume cuts differently from the reference.
TEST(Equivalence, ACheckpointAtTensorParallelTwoResumesAtOneAndAtFour) {
  const Tolerance t = tensorParallel();
  ScratchDir dir;
  std::string model = kGpt;
  model.replace(model.find("dropout: 0.1"), 12, "dropout: 0");
  std::ofstream(dir / "job.yaml") << jobYaml(model, t.lr, t.data);
  auto r = runHydrozoa(dir.path().string(), {"train", "job.yaml", "--tensor-parallel", "2", "--stages", "2",
                                             "--data-parallel", "1", "--microbatches", "4", "--max-steps", "3",
                                             "--launcher", "local", "--no-progress", "--out", "run"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::filesystem::copy(dir / "run", dir / "run1", std::filesystem::copy_options::recursive);
  r = runHydrozoa(dir.path().string(), {"train", "--resume", "run", "--tensor-parallel", "4", "--stages", "1",
                                        "--data-parallel", "1", "--max-steps", "5", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = runHydrozoa(dir.path().string(), {"train", "--resume", "run1", "--tensor-parallel", "1", "--stages", "2",
                                        "--data-parallel", "2", "--max-steps", "5", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto ref = referenceOf(dir, 1, 6, 5, false);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  for (const char* run : {"run", "run1"}) {
    SCOPED_TRACE(run);
    const std::vector<double> losses = testing::stepLosses(dir / run);
    ASSERT_EQ(losses.size(), 5U);
    for (int s = 0; s < 5; ++s) {
      EXPECT_NEAR(losses[s], ref->losses[s], t.loss * std::fabs(ref->losses[s])) << "step " << s + 1;
    }
    expectSameWeights(checkpointOf(dir, run, 5), ref->model, t);
  }
  auto plan = readJsonFile(std::filesystem::path(dir / "run") / "plan.json");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ((*plan)["strategy"]["tensor_parallel"], 4);
}

// BatchNorm: training uses each microbatch's own statistics, so a pipeline
// alone reproduces one worker bit for bit. Against the reference, though, a
// residual block's input is a leaf in a stage and an interior node in one
// graph: autograd adds its two branches' gradients in another order (and
// data parallelism sums replicas in another order), 4e-8 apart after one
// step. BatchNorm centres activations on zero, so such a difference soon
// flips a ReLU at its kink, a discrete jump (1e-4 in the loss at step 4).
// Hence looser bounds (losses within 1e-3, parameters within 2e-3 absolute,
// for weights of order 0.1), at a learning rate where this ResNet is stable.
// The running statistics are not compared: they are averaged over replicas
// at checkpoints, not accumulated in one order, by design.
// FlexRR (docs/stragglers.md): a replica slowed 8x (sleeping after each
// pass, so it answers its helpers at once) hands microbatches to the others,
// who read them and add their gradients; the training is the same (NOTE
// [Reassigned microbatches] in runtime/exec/reassigning_step.h). A wider MLP
// than kMlp, so that a pass outlasts a message through the store.
// Four steps: who computes what, and so the sum order, changes from run to
// run, and at step 5 one sample's input to hidden unit 900 of layer 1 is
// within float rounding of ReLU's kink: in about a third of the runs it
// flips, and that sample's gradient of layers 0 and 1 jumps (16% of the
// layer's largest, 1e-4 in the weights after 8 steps); the losses and every
// other gradient stay within 1e-8.
TEST(Equivalence, FlexrrUnderAStragglerTrainsTheSame) {
  Tolerance t;
  t.steps = 4;
  t.args = {"--flexrr", "--stragglers", "worker=1,slowdown=8x,mode=sleep"};
  t.min_reassigned = 4;
  expectEquivalent("{name: mlp, options: {hidden: 1024, depth: 2}}", {4, 1, 6}, t);
}

// Paused from outside (SIGSTOP for 7/8 of every 20 ms: the local
// launcher's way), the straggler answers late; whatever moves, the training
// is the same (four steps, as above).
TEST(Equivalence, FlexrrUnderAPausedStragglerTrainsTheSame) {
  Tolerance t;
  t.steps = 4;
  t.launcher = "local";
  t.args = {"--flexrr", "--stragglers", "worker=2,slowdown=8x"};
  expectEquivalent("{name: mlp, options: {hidden: 1024, depth: 2}}", {4, 1, 6}, t);
}

TEST(Equivalence, BatchNormModelWithinALooserBound) {
  Tolerance t;
  t.loss = 1e-3;
  t.params = 1e-3;
  t.absolute = 2e-3;
  t.lr = 0.02;
  expectEquivalent("{name: resnet18, options: {channels: 1, image_size: 28, width: 0.125, classes: 10}}", {2, 2, 3}, t);
}


// --- Scaling (issue 4 §3; NOTE [Changing the replicas] in cluster/scaling_driver.cc) --

// 120 samples, 12 per replica (3 microbatches of 4) in a 2-stage pipeline:
// 10 steps an epoch at 1 replica, 5 at 2.
std::string scaledJob(const std::string& scaling) {
  return "name: scaled\n"
         "model: {name: mlp, options: {hidden: 32, depth: 2}}\n"
         "data: {dataset: synthetic, synthetic_train: 120, synthetic_test: 20}\n"
         "training: {epochs: 3, global_batch: 24, seed: 7,\n"
         "           optimizer: {name: sgd, lr: 0.1, momentum: 0.9, weight_decay: 0.0001}}\n"
         "cluster: {workers: 4, bandwidth: 1Gbit/s}\n"
         "plan: {data_parallel: 2, stages: 2, microbatches: 3}\n"
         "scaling: " + scaling + "\n"
         "output: {trace_steps: 2}\n";
}

// The samples each epoch used, over every worker of every generation (from
// $HYDROZOA_RECORD_SAMPLES: "global_step epoch replica id...").
std::map<std::int64_t, std::multiset<std::int64_t>> samplesByEpoch(const std::filesystem::path& run) {
  std::map<std::int64_t, std::multiset<std::int64_t>> out;
  for (const testing::SampleRecord& r : testing::recordedSamples(run)) out[r.epoch].insert(r.ids.begin(), r.ids.end());
  return out;
}

void expectEverySampleOncePerEpoch(const std::filesystem::path& run, int epochs, std::int64_t n) {
  const auto seen = samplesByEpoch(run);
  ASSERT_EQ(seen.size(), static_cast<size_t>(epochs));
  for (const auto& [epoch, ids] : seen) {
    EXPECT_EQ(ids.size(), static_cast<size_t>(n)) << "epoch " << epoch + 1;
    EXPECT_EQ(std::set<std::int64_t>(ids.begin(), ids.end()).size(), static_cast<size_t>(n)) << "epoch " << epoch + 1;
  }
}

// The reference for adabatch 1 -> 2 after the first epoch (lr x 0.75) of
// `trainSize` samples.
runtime::ReferenceRun scaledReference(const ScratchDir& dir, std::int64_t steps, std::int64_t trainSize) {
  auto spec = cluster::loadJobSpec(dir / "job.yaml");
  EXPECT_TRUE(spec.ok());
  runtime::ReferenceOptions ro;
  ro.job = *spec;
  ro.microbatch_size = 4;
  ro.steps = steps;
  ro.epochs.emplace(trainSize, 12, false);
  ro.epochs->append(0, 1, 1.0, "");
  ro.epochs->append(1, 2, 0.75, "");
  auto ref = runtime::trainReference(ro);
  EXPECT_TRUE(ref.ok()) << ref.status().message();
  return std::move(*ref);
}

// Every step's loss and the final weights of dir/run equal the reference's.
void expectLikeTheScaledReference(const ScratchDir& dir, int steps, std::int64_t trainSize = 120,
                                  const Tolerance& t = {}) {
  const auto ref = scaledReference(dir, steps, trainSize);
  const std::vector<double> losses = testing::stepLosses(dir / "run");
  ASSERT_EQ(losses.size(), static_cast<size_t>(steps));
  for (int s = 0; s < steps; ++s) {
    EXPECT_NEAR(losses[s], ref.losses[s], t.loss * std::fabs(ref.losses[s])) << "step " << s + 1;
  }
  expectSameWeights(checkpointOf(dir, "run", steps), ref.model, t);
}

// AdaBatch from 1 to 2 replicas: the second generation's workers are started
// ahead of the boundary, every sample is used once per epoch across the
// change, the first generation's workers are billed no longer, and every
// step's loss and the final weights equal one process doing gradient
// accumulation over the same microbatches with the same schedule.
TEST(Scaling, AdaBatchChangesTheReplicasAtAnEpochBoundaryLikeOneProcessWould) {
  ScratchDir dir;
  std::ofstream(dir / "job.yaml") << scaledJob("{policy: adabatch, min_replicas: 1, max_replicas: 2}");
  ::setenv("HYDROZOA_RECORD_SAMPLES", "1", 1);
  const auto r = runHydrozoa(dir.path().string(), {"train", "job.yaml", "--no-progress", "--out", "run"});
  ::unsetenv("HYDROZOA_RECORD_SAMPLES");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("Epoch 2: 1 → 2 replicas"), std::string::npos) << r.err;

  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["status"], "completed");
  EXPECT_EQ((*summary)["steps"]["done"], 20);  // 10 + 5 + 5
  EXPECT_EQ((*summary)["epochs_completed"], 3);
  EXPECT_EQ((*summary)["generations"], 2);
  const Json& events = (*summary)["scaling"]["events"];
  ASSERT_EQ(events.size(), 1u);
  const Json& e = events[0];
  EXPECT_EQ(e["epoch"], 2);
  EXPECT_EQ(e["step"], 10);
  EXPECT_EQ(e["replicas_before"], 1);
  EXPECT_EQ(e["replicas"], 2);
  EXPECT_EQ(e["workers"], 4);
  EXPECT_EQ(e["global_batch"], 24);
  EXPECT_DOUBLE_EQ(e["lr_factor"].get<double>(), 0.75);
  EXPECT_TRUE(e["prestarted"].get<bool>()) << e.dump();
  EXPECT_TRUE(e.contains("ready_before_boundary_s")) << e.dump();
  EXPECT_GT(e["seconds_to_training"].get<double>(), 0);
  // The released workers (ids 0 and 1) were billed until the boundary only:
  // until their processes exited after it (allowed a second), rounded up to
  // whole seconds (per_second billing). Unrounded, the bound failed in CI once:
  // released at 0.949 s, billed 2 s (it exited past 1.0 s).
  const double releasedAt = e["released_at"];
  int released = 0;
  for (const Json& w : (*summary)["billing"]["workers"]) {
    if (w["id"] == 0 || w["id"] == 1) {
      ++released;
      EXPECT_LE(w["seconds"].get<double>(), std::ceil(releasedAt + 1)) << w.dump();
    }
  }
  EXPECT_EQ(released, 2);
  int scaledLines = 0;
  for (const Json& l : testing::metrics(dir / "run")) scaledLines += l.value("event", "") == "scaled";
  EXPECT_EQ(scaledLines, 1);

  expectEverySampleOncePerEpoch(dir / "run", 3, 120);
  expectLikeTheScaledReference(dir, 20);
}

// Issue 4's command as written (stopped 3 steps into the third epoch, after
// both changes): Fashion-MNIST, the example's 2-stage pipeline at 1, 2 and
// then 4 replicas (2, 4 and 8 workers), each next generation pre-started.
TEST(Scaling, TheIssueCommandAsWritten) {
  ScratchDir dir;
  const std::string example = std::string(HYDROZOA_SOURCE_DIR) + "/examples/fashion_mnist_cnn.yaml";
  const auto r = runHydrozoa(dir.path().string(),
                             {"train", example, "--scaling", "adabatch", "--min-replicas", "1", "--max-replicas", "4",
                              "--every-epochs", "1", "--max-steps", "1410", "--no-progress", "--out", "run"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["status"], "stopped");
  EXPECT_EQ((*summary)["steps"]["done"], 1410);  // 938 at 64 samples, 469 at 128, then 3 at 256
  const Json& events = (*summary)["scaling"]["events"];
  ASSERT_EQ(events.size(), 2u) << events.dump();
  EXPECT_EQ(events[0]["step"], 938);
  EXPECT_EQ(events[0]["workers"], 4);
  EXPECT_EQ(events[1]["step"], 1407);
  EXPECT_EQ(events[1]["replicas"], 4);
  EXPECT_EQ(events[1]["workers"], 8);
  for (const Json& e : events) EXPECT_TRUE(e["prestarted"].get<bool>()) << e.dump();
  int evaluations = 0;
  for (const Json& l : testing::metrics(dir / "run")) evaluations += l.contains("test_accuracy");
  EXPECT_GE(evaluations, 2);
}

// Stopped after the change and resumed: the checkpoint's record of the
// replicas carries the schedule over, and the run ends as if never stopped.
TEST(Scaling, AScaledRunStoppedAndResumedEndsTheSame) {
  ScratchDir dir;
  std::ofstream(dir / "job.yaml") << scaledJob("{policy: adabatch, min_replicas: 1, max_replicas: 2}");
  auto r = runHydrozoa(dir.path().string(), {"train", "job.yaml", "--no-progress", "--out", "run", "--max-steps", "15"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = runHydrozoa(dir.path().string(), {"train", "--resume", "run", "--no-progress"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["steps"]["done"], 20);
  EXPECT_EQ((*summary)["plan"]["data_parallel"], 2);
  expectLikeTheScaledReference(dir, 20);
}

// scaling.replan: each change of replicas plans the pipeline again. With 1
// replica on a 2-worker budget the planner runs the MLP on one worker (no
// transfers at 10 MB/s); with 2 it keeps the job's 2-stage plan. The next
// generation loads the boundary's per-layer state into its other split, and
// the run still equals one process.
TEST(Scaling, ReplanningChangesTheStagesAtABoundaryAndKeepsTheResult) {
  ScratchDir dir;
  std::ofstream(dir / "job.yaml")
      << "name: replan\n"
         "model: {name: mlp, options: {hidden: 512, depth: 2}}\n"
         "data: {dataset: synthetic, synthetic_train: 120, synthetic_test: 20}\n"
         "training: {epochs: 3, global_batch: 24, seed: 7,\n"
         "           optimizer: {name: sgd, lr: 0.1, momentum: 0.9, weight_decay: 0.0001}}\n"
         "cluster: {workers: 4, bandwidth: 10MB/s}\n"
         "plan: {data_parallel: 2}\n"
         "scaling: {policy: adabatch, min_replicas: 1, max_replicas: 2, replan: true}\n";
  const auto r = runHydrozoa(dir.path().string(), {"train", "job.yaml", "--no-progress", "--out", "run"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string data = "Training mlp on synthetic data (120 random samples; data.dataset names a real one)";
  EXPECT_NE(r.err.find(data + " with 1×1 on 1 "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(data + " with 2×2 on 4 "), std::string::npos) << r.err;
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  const Json& segments = (*summary)["scaling"]["segments"];
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_TRUE(segments[0].contains("plan"));    // re-planned for 1 replica
  EXPECT_FALSE(segments[1].contains("plan"));   // 2 replicas: the job's own plan
  const Json& e = (*summary)["scaling"]["events"][0];
  EXPECT_EQ(e["stages_before"], 1);
  EXPECT_EQ(e["stages"], 2);
  expectLikeTheScaledReference(dir, 20);
}

// A rule reads each epoch's metrics, so the workers hold at every epoch end
// for its decision (NOTE [Holding at an epoch's end]): the same replicas go
// on in the same generation; a change starts the next one then (not ahead).
// Scaling down releases workers.
TEST(Scaling, ARuleIsDecidedAtEachEpochEndAndCanScaleDown) {
  ScratchDir dir;
  std::ofstream(dir / "job.yaml")
      << scaledJob("{policy: rule, min_replicas: 1, max_replicas: 2, rule: \"epoch >= 3 ? 1 : 2\"}");
  ::setenv("HYDROZOA_RECORD_SAMPLES", "1", 1);
  const auto r = runHydrozoa(dir.path().string(), {"train", "job.yaml", "--no-progress", "--out", "run"});
  ::unsetenv("HYDROZOA_RECORD_SAMPLES");
  ASSERT_EQ(r.code, 0) << r.err;
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["steps"]["done"], 20);  // 5 + 5 + 10
  EXPECT_EQ((*summary)["generations"], 2);  // epochs 1-2 with 2 replicas, epoch 3 with 1
  const Json& events = (*summary)["scaling"]["events"];
  ASSERT_EQ(events.size(), 1u) << events.dump();
  EXPECT_EQ(events[0]["epoch"], 3);
  EXPECT_EQ(events[0]["replicas_before"], 2);
  EXPECT_EQ(events[0]["replicas"], 1);
  EXPECT_EQ(events[0]["workers_released"], 4);
  EXPECT_FALSE(events[0]["prestarted"].get<bool>());
  expectEverySampleOncePerEpoch(dir / "run", 3, 120);
  EXPECT_TRUE(testing::noWorkersLeft(dir / "run"));
}

// Scaling a tensor-parallel grid (issue 15 §2): AdaBatch takes a t = 2
// GPT from 1 to 2 replicas (2 to 4 workers) after its first epoch. Each
// tensor group gathers its split layers into the boundary's checkpoint and
// the next generation's groups cut them again; every step's loss and the
// final weights equal one process's with the same replicas per epoch, to
// the split's rounding (tensorParallel()).
TEST(Scaling, ATensorParallelGridChangesItsReplicasLikeOneProcessWould) {
  const Tolerance t = tensorParallel();
  ScratchDir dir;
  std::ofstream(dir / "job.yaml")
      << "name: scaled-tp\n"
         "model: " + kGpt + "\n"
         "data: {dataset: text, path: /usr/share/common-licenses/Artistic}\n"
         "training: {epochs: 2, global_batch: 12, seed: 7, eval: false,\n"
         "           optimizer: {name: sgd, lr: 0.05, momentum: 0.9, weight_decay: 0.0001}}\n"
         "cluster: {workers: 4, launcher: local}\n"
         "plan: {data_parallel: 1, stages: 1, tensor_parallel: 2, microbatches: 3}\n"
         "scaling: {policy: adabatch, min_replicas: 1, max_replicas: 2}\n"
         "output: {trace_steps: 2}\n";
  const auto r = runHydrozoa(dir.path().string(), {"train", "job.yaml", "--no-progress", "--out", "run"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["status"], "completed");
  EXPECT_EQ((*summary)["generations"], 2);
  EXPECT_EQ((*summary)["plan"]["tensor_parallel"], 2);
  EXPECT_EQ((*summary)["plan"]["data_parallel"], 2);
  const Json& events = (*summary)["scaling"]["events"];
  ASSERT_EQ(events.size(), 1u) << events.dump();
  EXPECT_EQ(events[0]["replicas_before"], 1);
  EXPECT_EQ(events[0]["replicas"], 2);
  EXPECT_EQ(events[0]["workers_released"], 2);
  EXPECT_EQ(events[0]["workers"], 4);
  // 167 training windows of the text: 14 steps of 12 samples, then 7 of 24.
  const int steps = 21;
  EXPECT_EQ((*summary)["steps"]["done"], steps);
  EXPECT_DOUBLE_EQ(events[0]["lr_factor"].get<double>(), 0.75);
  expectLikeTheScaledReference(dir, steps, 167, t);
}

}  // namespace
}  // namespace hydrozoa
