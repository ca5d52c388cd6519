// The stage executor, optimizers and checkpoints, in one process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "profile/memory_tracker.h"
#include "runtime/checkpoint.h"
#include "runtime/loss_scale.h"
#include "runtime/optimizer.h"
#include "runtime/precision.h"
#include "runtime/stage.h"
#include "runtime/worker/role.h"

namespace hydrozoa::runtime {
namespace {

namespace fs = std::filesystem;

model::Model build(const std::string& name, model::Options options, std::uint64_t seed, int first = 0, int last = -1) {
  auto m = model::buildModel({name, std::move(options)}, {seed, first, last});
  EXPECT_TRUE(m.ok()) << m.status().message();
  return std::move(*m);
}

const model::Options kTinyCnn = {{"width", "0.25"}, {"hidden", "16"}};

TEST(StageExecutor, LayerByLayerBackwardEqualsOneBackward) {
  TraceRecorder trace(false);
  model::Model whole = build("cnn", kTinyCnn, 3);
  StageExecutor stage(build("cnn", kTinyCnn, 3), /*lastStage=*/true, 0, trace);
  const torch::Tensor x = torch::randn({5, 1, 28, 28});
  const torch::Tensor y = torch::randint(0, 10, {5});
  double loss = 0;
  stage.forward(0, x, 0, 0, y, /*weight=*/0.5, &loss);
  std::vector<int> order;
  stage.backward(0, {}, [&](int l) { order.push_back(l); });
  EXPECT_EQ(order, (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(stage.cachedMicrobatches(), 0u);

  const torch::Tensor ref = model::taskLoss(whole.task, whole.forward(x), y);
  (ref * 0.5).backward();
  EXPECT_NEAR(loss, ref.item<double>(), 1e-6);
  const auto a = stage.model().parameters(), b = whole.parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::allclose(a[i].grad(), b[i].grad(), 1e-5, 1e-7)) << i;
}

TEST(StageExecutor, MiddleStagePassesGradientsBack) {
  TraceRecorder trace(false);
  StageExecutor stage(build("mlp", {{"hidden", "8"}, {"depth", "3"}}, 1, 1, 2), false, 0, trace);
  const torch::Tensor x = torch::randn({2, 8});
  const torch::Tensor out = stage.forward(7, x, 0, 0);
  EXPECT_FALSE(out.requires_grad());  // detached, ready to send
  const torch::Tensor g = stage.backward(7, torch::ones_like(out));
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(g.sizes(), x.sizes());
}

TEST(StageExecutor, DropoutMasksDependOnStepMicrobatchAndLayerOnly) {
  TraceRecorder trace(false);
  const model::Options opts = {{"hidden", "64"}, {"depth", "2"}, {"dropout", "0.5"}};
  StageExecutor a(build("mlp", opts, 1), true, 9, trace), b(build("mlp", opts, 1), true, 9, trace);
  const torch::Tensor x = torch::randn({4, 1, 28, 28});
  const torch::Tensor y = torch::randint(0, 10, {4});
  double la = 0, lb = 0, lc = 0;
  a.forward(0, x, 5, 2, y, 1, &la);
  torch::manual_seed(12345);  // unrelated RNG use in between changes nothing
  b.forward(0, x, 5, 2, y, 1, &lb);
  EXPECT_EQ(la, lb);
  b.forward(1, x, 5, 3, y, 1, &lc);  // another microbatch of the step: other masks
  EXPECT_NE(la, lc);
}

TEST(StageExecutor, EvaluationLeavesBatchNormStatisticsAlone) {
  TraceRecorder trace(false);
  StageExecutor stage(build("resnet18", {{"image_size", "16"}, {"width", "0.125"}, {"classes", "4"}}, 0), true, 0,
                      trace);
  auto buffers = [&] {
    std::vector<torch::Tensor> b;
    for (auto& l : stage.model().layers) {
      for (auto& t : l.module->buffers()) b.push_back(t.clone());
    }
    return b;
  };
  const auto before = buffers();
  (void)stage.evaluate(torch::randn({3, 3, 16, 16}));
  const auto after = buffers();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(before[i], after[i]));
}

// NOTE [Recomputation]: with and without it, a stage of a BatchNorm model
// with dropout computes the same losses, input gradients, parameter
// gradients and running statistics, microbatches stashed and backed in the
// 1F1B-like order F0 F1 B0 F2 B1 B2; and it holds fewer bytes of tensors at
// its peak (the counting allocator).
TEST(StageExecutor, RecomputationIsTheSameTrainingInLessMemory) {
  struct Outcome {
    std::vector<double> losses;
    std::vector<torch::Tensor> grads, buffers;
    std::int64_t peak = 0;
  };
  auto run = [&](const std::string& name, const model::Options& options, bool recompute) {
    TraceRecorder trace(false);
    StageExecutor stage(build(name, options, 5), true, 11, trace);
    stage.setRecompute(recompute);
    torch::manual_seed(1);
    std::vector<std::int64_t> shape = {4};
    for (std::int64_t d : stage.model().input.shape) shape.push_back(d);
    std::vector<torch::Tensor> inputs, labels;
    for (int mb = 0; mb < 3; ++mb) {
      inputs.push_back(torch::randn(shape));
      labels.push_back(torch::randint(0, stage.model().task.classes, {4}));
    }
    Outcome o;
    profile::MemoryTracker& tracker = profile::MemoryTracker::instance();
    tracker.resetPeak();
    const std::int64_t base = tracker.current();
    auto forward = [&](int mb) {
      double loss = 0;
      stage.forward(mb, inputs[mb], 2, mb, labels[mb], 1.0 / 3, &loss);
      o.losses.push_back(loss);
    };
    auto backward = [&](int mb) { (void)stage.backward(mb, {}); };
    forward(0);
    forward(1);
    backward(0);
    forward(2);
    backward(1);
    backward(2);
    o.peak = tracker.peak() - base;
    for (const auto& p : stage.model().parameters()) o.grads.push_back(p.grad().clone());
    for (auto& l : stage.model().layers) {
      for (auto& b : l.module->buffers()) o.buffers.push_back(b.clone());
    }
    return o;
  };
  const std::vector<std::pair<std::string, model::Options>> models = {
      {"resnet18", {{"image_size", "16"}, {"width", "0.25"}, {"classes", "4"}}},  // BatchNorm
      {"mlp", {{"hidden", "64"}, {"depth", "3"}, {"dropout", "0.3"}}},            // dropout
  };
  for (const auto& [name, options] : models) {
    SCOPED_TRACE(name);
    const Outcome plain = run(name, options, false), recomputed = run(name, options, true);
    EXPECT_EQ(plain.losses, recomputed.losses);
    ASSERT_EQ(plain.grads.size(), recomputed.grads.size());
    for (size_t i = 0; i < plain.grads.size(); ++i) {
      EXPECT_TRUE(torch::equal(plain.grads[i], recomputed.grads[i])) << "parameter " << i;
    }
    ASSERT_EQ(plain.buffers.size(), recomputed.buffers.size());
    for (size_t i = 0; i < plain.buffers.size(); ++i) {
      EXPECT_TRUE(torch::equal(plain.buffers[i], recomputed.buffers[i])) << "buffer " << i;
    }
    EXPECT_LT(recomputed.peak, plain.peak);
    std::printf("%s: peak tensor bytes of F0 F1 B0 F2 B1 B2: %lld without recomputation, %lld with\n", name.c_str(),
                static_cast<long long>(plain.peak), static_cast<long long>(recomputed.peak));
  }
}

TEST(LearningRate, Schedules) {
  cluster::OptimizerSpec o;
  o.lr = 0.1;
  cluster::LrScheduleSpec s;
  EXPECT_DOUBLE_EQ(scheduledLearningRate(o, s, 50, 5, 100), 0.1);
  s.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(scheduledLearningRate(o, s, 0, 0, 100), 0.025);
  EXPECT_DOUBLE_EQ(scheduledLearningRate(o, s, 3, 0, 100), 0.1);
  s = {};
  s.name = "step";
  s.gamma = 0.5;
  s.step_epochs = 2;
  EXPECT_DOUBLE_EQ(scheduledLearningRate(o, s, 19, 1, 100), 0.1);
  EXPECT_DOUBLE_EQ(scheduledLearningRate(o, s, 20, 2, 100), 0.05);
  EXPECT_DOUBLE_EQ(scheduledLearningRate(o, s, 45, 4, 100), 0.025);
  s = {};
  s.name = "cosine";
  s.min_lr = 0.01;
  EXPECT_DOUBLE_EQ(scheduledLearningRate(o, s, 0, 0, 100), 0.1);
  EXPECT_NEAR(scheduledLearningRate(o, s, 50, 5, 100), 0.055, 1e-12);
  EXPECT_NEAR(scheduledLearningRate(o, s, 100, 10, 100), 0.01, 1e-12);
}

class OptimizerState : public ::testing::TestWithParam<std::string> {};

TEST_P(OptimizerState, SurvivesARoundTripThroughCheckpoints) {
  cluster::OptimizerSpec spec;
  spec.name = GetParam();
  spec.lr = 0.01;
  const fs::path dir = fs::temp_directory_path() / ("hzckpt." + std::to_string(::getpid()) + GetParam());
  fs::create_directories(dir);
  auto step = [](model::Model& m, torch::optim::Optimizer& opt) {
    const auto loss = model::taskLoss(m.task, m.forward(torch::ones({2, 1, 28, 28})), torch::tensor({1, 2}));
    loss.backward();
    opt.step();
    opt.zero_grad();
  };
  model::Model a = build("cnn", kTinyCnn, 1);
  auto optA = makeOptimizer(spec, a.parameters());
  step(a, *optA);
  ASSERT_TRUE(saveStage(dir.string(), a, *optA).ok());
  // Another model and a fresh optimizer, loaded from the checkpoint, then one
  // more step on both: they must stay equal.
  model::Model b = build("cnn", kTinyCnn, 2);
  auto optB = makeOptimizer(spec, b.parameters());
  const Status loaded = loadStage(dir.string(), b, *optB);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  // And a third from the same state in memory (NOTE [State for joiners]).
  Result<std::string> bytes = saveStageBytes(a, *optA);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  model::Model c = build("cnn", kTinyCnn, 3);
  auto optC = makeOptimizer(spec, c.parameters());
  const Status taken = loadStageBytes(bytes->data(), bytes->size(), "replica 0", c, *optC);
  ASSERT_TRUE(taken.ok()) << taken.message();
  step(a, *optA);
  step(b, *optB);
  step(c, *optC);
  const auto pa = a.parameters(), pb = b.parameters(), pc = c.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::equal(pa[i], pb[i])) << i;
    EXPECT_TRUE(torch::equal(pa[i], pc[i])) << i;
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, OptimizerState, ::testing::Values("sgd", "adam"));

TEST(Checkpoint, ErrorsNameTheFile) {
  const fs::path dir = fs::temp_directory_path() / ("hzckpt2." + std::to_string(::getpid()));
  fs::create_directories(dir);
  model::Model a = build("cnn", kTinyCnn, 1);
  auto opt = makeOptimizer({}, a.parameters());
  ASSERT_TRUE(saveStage(dir.string(), a, *opt).ok());
  model::Model wider = build("cnn", {{"width", "0.5"}, {"hidden", "16"}}, 1);
  auto optW = makeOptimizer({}, wider.parameters());
  Status s = loadStage(dir.string(), wider, *optW);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("layer-0000.pt: parameter conv.weight has shape"), std::string::npos) << s.message();
  fs::remove(dir / layerFileName(2));
  s = loadStage(dir.string(), a, *opt);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("layer-0002.pt: missing"), std::string::npos) << s.message();
  std::ofstream(dir / layerFileName(2)) << "garbage";
  s = loadStage(dir.string(), a, *opt);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot read the checkpoint"), std::string::npos) << s.message();
  fs::remove_all(dir);
}

// The state sent to joiners, cut short or from another model: one error
// naming the source, the layer and the tensor.
TEST(Checkpoint, StateInMemoryErrorsNameTheSender) {
  model::Model a = build("cnn", kTinyCnn, 1);
  auto opt = makeOptimizer({}, a.parameters());
  Result<std::string> bytes = saveStageBytes(a, *opt);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  model::Model wider = build("cnn", {{"width", "0.5"}, {"hidden", "16"}}, 1);
  auto optW = makeOptimizer({}, wider.parameters());
  Status s = loadStageBytes(bytes->data(), bytes->size(), "the state from replica 0", wider, *optW);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("layer 0 of the state from replica 0: parameter conv.weight has shape"),
            std::string::npos)
      << s.message();
  s = loadStageBytes(bytes->data(), bytes->size() / 2, "the state from replica 0", a, *opt);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("the state from replica 0: cannot read the state"), std::string::npos) << s.message();
}

// NOTE [Loss scaling]: halves at an overflow (the step skipped), doubles
// after growth_interval clean steps in a row, counts from 0 after either.
TEST(LossScale, HalvesAtAnOverflowAndDoublesAfterTheGrowthInterval) {
  LossScale s(1024, 3);
  s.update(true);
  EXPECT_EQ(s.value(), 512);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.value(), 512);
  s.update(true);  // the clean steps start again
  EXPECT_EQ(s.value(), 256);
  s.update(false);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.value(), 512);
  EXPECT_EQ(s.cleanSteps(), 0);
  s.update(false);
  EXPECT_EQ(s.cleanSteps(), 1);
  EXPECT_EQ(s.skipped(), 2);
}

// The fp32 gradients of fp16 passes, unscaled in place; an inf or a NaN in
// any of them is found, and a parameter without a gradient is left alone.
TEST(LossScale, UnscalingFindsAnInfOrANaN) {
  torch::Tensor a = torch::zeros({3}, torch::requires_grad()), b = torch::zeros({2}, torch::requires_grad()),
                c = torch::zeros({1}, torch::requires_grad());
  a.mutable_grad() = torch::tensor({4.0F, 8.0F, -2.0F});
  b.mutable_grad() = torch::tensor({1.0F, 6.0F});
  EXPECT_FALSE(unscaleGradients({a, b, c}, 0.5));
  EXPECT_TRUE(torch::equal(a.grad(), torch::tensor({2.0F, 4.0F, -1.0F})));
  EXPECT_TRUE(torch::equal(b.grad(), torch::tensor({0.5F, 3.0F})));
  EXPECT_FALSE(c.grad().defined());
  b.mutable_grad()[1] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(unscaleGradients({a, b, c}, 1));
  b.mutable_grad()[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(unscaleGradients({a, b}, 1));
  EXPECT_FALSE(unscaleGradients({c}, 1));
}

// A run resumes with the scale it had: in each layer's file, and in the
// state sent to joiners; a checkpoint without one (an fp32 run's) leaves
// the job's initial scale; a forged one is refused by name.
TEST(LossScale, TravelsWithTheCheckpoint) {
  const fs::path dir = fs::temp_directory_path() / ("hzckpt3." + std::to_string(::getpid()));
  fs::create_directories(dir);
  model::Model a = build("cnn", kTinyCnn, 1);
  auto opt = makeOptimizer({}, a.parameters());
  LossScale saved(65536, 2000);
  saved.update(true);
  saved.update(false);
  ASSERT_TRUE(saveStage(dir.string(), a, *opt, nullptr, &saved).ok());
  LossScale loaded(65536, 2000);
  ASSERT_TRUE(loadStage(dir.string(), a, *opt, nullptr, &loaded).ok());
  EXPECT_EQ(loaded.value(), 32768);
  EXPECT_EQ(loaded.cleanSteps(), 1);
  EXPECT_EQ(loaded.skipped(), 1);
  Result<std::string> bytes = saveStageBytes(a, *opt, &saved);
  ASSERT_TRUE(bytes.ok());
  LossScale joined(65536, 2000);
  ASSERT_TRUE(loadStageBytes(bytes->data(), bytes->size(), "replica 0", a, *opt, &joined).ok());
  EXPECT_EQ(joined.value(), 32768);
  ASSERT_TRUE(saveStage(dir.string(), a, *opt).ok());
  LossScale fresh(65536, 2000);
  ASSERT_TRUE(loadStage(dir.string(), a, *opt, nullptr, &fresh).ok());
  EXPECT_EQ(fresh.value(), 65536);
  {
    torch::serialize::OutputArchive forged;
    forged.write("loss_scale", torch::tensor({-1.0, 0.0, 0.0}, torch::kDouble));
    forged.save_to((dir / layerFileName(0)).string());
  }
  const Status s = loadStage(dir.string(), a, *opt, nullptr, &fresh);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("layer-0000.pt: its loss_scale is not"), std::string::npos) << s.message();
  fs::remove_all(dir);
}

// NOTE [Regrouping at a step boundary]: the coordinator's "regroup", checked
// as any message from a peer.
TEST(Regroup, TheMessageIsCheckedAgainstTheRoleThatStays) {
  Role role;
  role.replica = 1;
  role.replicas = 4;
  role.global_batch = 12;  // 4 replicas of 3 microbatches of 1
  const Json ok = {{"type", "regroup"}, {"at_step", 12},       {"generation", 1},
                   {"replicas", 2},     {"microbatches", 6}, {"joiners", 0}};
  Result<Regroup> g = parseRegroup(ok, role);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->at_step, 12);
  EXPECT_EQ(g->replicas, 2);
  EXPECT_EQ(g->microbatches, 6);
  EXPECT_EQ(g->joiners, 0);
  const std::pair<Json, std::string> bad[] = {
      {{{"at_step", 0}}, "at_step"},
      {{{"replicas", 0}}, "replicas"},
      {{{"replicas", 1}}, "leave out this worker's replica 1"},
      {{{"microbatches", -3}}, "microbatches"},
      {{{"generation", "next"}}, "generation"},
      {{{"joiners", -1}}, "joiners"},
      {{{"joiners", 2}}, "leave no running worker"},
      {{{"microbatches", 5}}, "5 microbatches of 1 on each of 2 replicas are not the global batch of 12"},
      {{{"idle_replicas", 2}}, "2 idle replicas of 2 leave none to compute"},
      {{{"idle_replicas", 1}}, "6 microbatches of 1 on each of 1 replicas are not the global batch"},
      {{{"idle_replicas", -1}}, "idle_replicas"},
  };
  for (const auto& [change, says] : bad) {
    Json m = ok;
    m.update(change);
    g = parseRegroup(m, role);
    ASSERT_FALSE(g.ok()) << m.dump();
    EXPECT_NE(g.status().message().find(says), std::string::npos) << g.status().message();
  }
  // AgileML's third stage: replica 0 holds the state, replica 1 takes all 12.
  Json idle = ok;
  idle.update({{"idle_replicas", 1}, {"microbatches", 12}});
  g = parseRegroup(idle, role);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->idle_replicas, 1);
  EXPECT_EQ(g->microbatches, 12);
  Role piped = role;
  piped.stages = 2;
  g = parseRegroup(ok, piped);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("one-stage"), std::string::npos) << g.status().message();
}

// A fake environment for localRank() and localWorkers(): these variables
// and no other.
std::map<std::string, std::string> gEnv;
const char* fakeEnv(const char* name) {
  const auto it = gEnv.find(name);
  return it == gEnv.end() ? nullptr : it->second.c_str();
}

// NOTE [A worker's GPU]: Slurm's node-local id first, then LOCAL_RANK, else
// the rank (one machine); garbage in either is refused by name.
TEST(LocalRank, SlurmsThenLocalRankThenTheRank) {
  Role role;
  role.rank = 5;
  gEnv.clear();
  EXPECT_EQ(localRank(role, fakeEnv).value(), 5);
  gEnv["LOCAL_RANK"] = "2";
  EXPECT_EQ(localRank(role, fakeEnv).value(), 2);
  gEnv["SLURM_LOCALID"] = "0";
  EXPECT_EQ(localRank(role, fakeEnv).value(), 0);
  gEnv["SLURM_LOCALID"] = "";
  EXPECT_EQ(localRank(role, fakeEnv).value(), 2);
  for (const char* bad : {"-1", "x", "3x", "99999999999"}) {
    gEnv["LOCAL_RANK"] = bad;
    auto r = localRank(role, fakeEnv);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("LOCAL_RANK"), std::string::npos) << r.status().message();
  }
}

// NOTE [Workers sharing a GPU]: LOCAL_WORLD_SIZE, else 1 in a Slurm step,
// else the whole job on one machine.
TEST(LocalRank, WorkersOnTheMachine) {
  Role role;
  role.world = 6;
  gEnv.clear();
  EXPECT_EQ(localWorkers(role, fakeEnv).value(), 6);
  gEnv["SLURM_LOCALID"] = "3";
  EXPECT_EQ(localWorkers(role, fakeEnv).value(), 1);
  gEnv["LOCAL_WORLD_SIZE"] = "4";
  EXPECT_EQ(localWorkers(role, fakeEnv).value(), 4);
  gEnv["LOCAL_WORLD_SIZE"] = "0";
  const auto r = localWorkers(role, fakeEnv);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("LOCAL_WORLD_SIZE=0"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace hydrozoa::runtime
