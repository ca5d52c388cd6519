// Pipeline and hybrid training equal one process doing gradient accumulation
// over the same microbatches (issue 3 §5; NOTE [Equivalence with one process]
// in src/runtime/stage.h): the same loss at every step, the same final
// weights. Each run is the real binary with its worker processes.
#include <torch/torch.h>

#include "integration/harness.h"
#include "runtime/checkpoint.h"
#include "runtime/reference.h"

namespace hydrozoa {
namespace {

using testing::runHydrozoa;
using testing::ScratchDir;

struct Plan {
  int replicas, stages, microbatches;
};

std::string jobYaml(const std::string& model, double lr, const std::string& data = "{dataset: fashion_mnist}") {
  return "name: eq\n"
         "model: " + model + "\n"
         "data: " + data + "\n"
         "training: {epochs: 3, global_batch: 24, seed: 7, eval: false,\n"
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
};

// Runs `plan`, then the reference with the same (replicas, microbatch size),
// and compares losses step by step and the final parameters.
void expectEquivalent(const std::string& model, const Plan& p, const Tolerance& t = {}) {
  SCOPED_TRACE(::testing::Message() << model << " " << p.replicas << "x" << p.stages << " M=" << p.microbatches);
  ScratchDir dir;
  std::ofstream(dir / "job.yaml") << jobYaml(model, t.lr, t.data);
  const auto r = runHydrozoa(dir.path().string(),
                             {"train", "job.yaml", "--data-parallel", std::to_string(p.replicas), "--stages",
                              std::to_string(p.stages), "--microbatches", std::to_string(p.microbatches), "--max-steps",
                              std::to_string(t.steps), "--no-progress", "--out", "run"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<double> losses = testing::stepLosses(dir / "run");
  ASSERT_EQ(losses.size(), static_cast<size_t>(t.steps));

  auto spec = cluster::loadJobSpec(dir / "job.yaml");
  ASSERT_TRUE(spec.ok());
  runtime::ReferenceOptions ro;
  ro.job = *spec;
  ro.replicas = p.replicas;
  ro.microbatch_size = 24 / (p.replicas * p.microbatches);
  ro.steps = t.steps;
  auto ref = runtime::trainReference(ro);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  for (int s = 0; s < t.steps; ++s) {
    EXPECT_NEAR(losses[s], ref->losses[s], t.loss * std::fabs(ref->losses[s])) << "step " << s + 1;
  }
  // Final weights: the run's last checkpoint, layer by layer.
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08d", t.steps);
  const std::string ckpt = (dir.path() / "run/checkpoints" / name).string();
  for (size_t i = 0; i < ref->model.layers.size(); ++i) {
    torch::serialize::InputArchive archive;
    archive.load_from(ckpt + "/" + runtime::layerFileName(static_cast<int>(i)));
    const auto& module = *ref->model.layers[i].module;
    for (const auto& param : module.named_parameters()) {
      torch::Tensor saved;
      ASSERT_TRUE(archive.try_read("param/" + param.key(), saved)) << param.key();
      const double scale = std::max(1e-3, param.value().abs().max().item<double>());
      EXPECT_LT((saved - param.value()).abs().max().item<double>(), t.params * scale + t.absolute)
          << "layer " << i << " " << param.key();
    }
  }
}

const std::string kMlp = "{name: mlp, options: {hidden: 32, depth: 2}}";  // 3 layers

TEST(Equivalence, OneWorker) { expectEquivalent(kMlp, {1, 1, 4}); }
TEST(Equivalence, PipelineOfThree) { expectEquivalent(kMlp, {1, 3, 4}); }
TEST(Equivalence, ThreeDataParallelReplicas) { expectEquivalent(kMlp, {3, 1, 2}); }
TEST(Equivalence, HybridTwoByTwo) { expectEquivalent(kMlp, {2, 2, 3}); }

// Dropout draws the same masks however the layers are split.
TEST(Equivalence, HybridWithDropout) {
  expectEquivalent("{name: mlp, options: {hidden: 32, depth: 2, dropout: 0.3}}", {2, 2, 3});
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
TEST(Equivalence, BatchNormModelWithinALooserBound) {
  Tolerance t;
  t.loss = 1e-3;
  t.params = 1e-3;
  t.absolute = 2e-3;
  t.lr = 0.02;
  expectEquivalent("{name: resnet18, options: {channels: 1, image_size: 28, width: 0.125, classes: 10}}", {2, 2, 3}, t);
}

}  // namespace
}  // namespace hydrozoa
