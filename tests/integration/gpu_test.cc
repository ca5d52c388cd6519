// Training on a GPU (docs/gpu.md): the real binary and its workers with
// training.device: cuda, against one process on the CPU doing the same
// training. Labelled `gpu` (ctest -L gpu; scripts/gpu-check runs them on a
// GPU machine); where no GPU is usable each test is skipped, saying why,
// and ctest lists it as not run. Synthetic data: a lent GPU machine has no
// Fashion-MNIST (scripts/gpu-check-prepare.sh, the budget).
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "cluster/job_spec.h"
#include "integration/harness.h"
#include "runtime/checkpoint.h"
#include "runtime/reference.h"

namespace hydrozoa {
namespace {

using testing::runHydrozoa;
using testing::ScratchDir;

#define REQUIRE_GPUS(n)                                                                                          \
  if (!torch::cuda::is_available() || static_cast<int>(torch::cuda::device_count()) < (n)) {                     \
    GTEST_SKIP() << "skipped: needs " << (n) << " CUDA GPU(s), this machine has "                                \
                 << (torch::cuda::is_available() ? torch::cuda::device_count() : 0)                              \
                 << " usable (scripts/gpu-check runs these on a GPU machine; docs/gpu.md)";                      \
  }

const std::string kMlp = "{name: mlp, options: {hidden: 64, depth: 2}}";  // 3 layers

struct GpuRun {
  int replicas = 1, stages = 1, microbatches = 4, steps = 4;
  std::string precision = "fp32";
  double tolerance = 1e-4;  // relative: losses per step, parameters to their tensor's largest magnitude
  std::string expectLog;    // a line every worker's log must have
};

std::string jobYaml(const GpuRun& r) {
  return fmt::format(
      "name: gpu\nmodel: {}\ndata: {{dataset: synthetic, synthetic_train: 512}}\n"
      "training: {{epochs: 1, global_batch: 32, seed: 3, eval: false, device: cuda, precision: {},\n"
      "           optimizer: {{name: sgd, lr: 0.05, momentum: 0.9}}}}\n"
      "cluster: {{workers: {}, launcher: local}}\n"
      "output: {{checkpoint_every_epochs: 0}}\n",
      kMlp, r.precision, r.replicas * r.stages);
}

// The run on the GPU equals one process on the CPU (runtime/reference.h)
// within r.tolerance, step by step and in its final weights.
void expectSameAsOneProcess(const GpuRun& r) {
  ScratchDir dir;
  std::ofstream(dir / "job.yaml") << jobYaml(r);
  const auto out = runHydrozoa(dir.path().string(),
                               {"train", "job.yaml", "--data-parallel", std::to_string(r.replicas), "--stages",
                                std::to_string(r.stages), "--microbatches", std::to_string(r.microbatches),
                                "--max-steps", std::to_string(r.steps), "--no-progress", "--out", "run"});
  ASSERT_EQ(out.code, 0) << out.err;
  const std::vector<double> losses = testing::stepLosses(dir / "run");
  ASSERT_EQ(losses.size(), static_cast<size_t>(r.steps));

  auto spec = cluster::loadJobSpec(dir / "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  spec->device = "cpu";
  runtime::ReferenceOptions ro;
  ro.job = *spec;
  ro.replicas = r.replicas;
  ro.microbatch_size = 32 / (r.replicas * r.microbatches);
  ro.steps = r.steps;
  auto ref = runtime::trainReference(ro);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  for (int s = 0; s < r.steps; ++s) {
    EXPECT_NEAR(losses[s], ref->losses[s], r.tolerance * std::fabs(ref->losses[s])) << "step " << s + 1;
  }
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08d", r.steps);
  const std::string ckpt = (dir.path() / "run" / "checkpoints" / name).string();
  for (size_t i = 0; i < ref->model.layers.size(); ++i) {
    torch::serialize::InputArchive archive;
    archive.load_from(ckpt + "/" + runtime::layerFileName(static_cast<int>(i)));
    for (const auto& param : ref->model.layers[i].module->named_parameters()) {
      torch::Tensor saved;
      ASSERT_TRUE(archive.try_read("param/" + param.key(), saved)) << param.key();
      const double scale = std::max(1e-3, param.value().abs().max().item<double>());
      EXPECT_LT((saved.cpu() - param.value()).abs().max().item<double>(), r.tolerance * scale)
          << "layer " << i << " " << param.key();
    }
  }
  if (!r.expectLog.empty()) {
    for (int w = 0; w < r.replicas * r.stages; ++w) {
      std::ifstream log(dir.path() / "run" / "workers" / fmt::format("worker-{}.log", w));
      const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      EXPECT_NE(text.find(r.expectLog), std::string::npos) << "worker " << w << ": " << text;
    }
  }
}

TEST(Gpu, OneWorkerOnTheGpuTrainsAsOneProcessOnTheCpu) {
  REQUIRE_GPUS(1);
  GpuRun r;
  expectSameAsOneProcess(r);
}

// NOTE [Workers sharing a GPU]: more workers than GPUs (a lent machine has
// one): they share it, their data plane through Gloo and host memory.
TEST(Gpu, APipelineAndReplicasSharingOneGpuTrainAsOneProcess) {
  REQUIRE_GPUS(1);
  GpuRun r;
  r.stages = 2;
  r.replicas = 2;
  if (torch::cuda::device_count() < 4) r.expectLog = "the data plane through Gloo, staged through host memory";
  expectSameAsOneProcess(r);
}

// Each worker on a GPU of its own: NCCL between them.
TEST(Gpu, APipelineOverNcclTrainsAsOneProcess) {
  REQUIRE_GPUS(2);
  GpuRun r;
  r.stages = 2;
  r.expectLog = "the data plane through NCCL";
  expectSameAsOneProcess(r);
}

// NOTE [Mixed precision]: bf16 on the GPU against one process in bf16 on
// the CPU (kernels that round differently: a looser bound); fp16 the same,
// its loss scale agreed over the pipeline (NOTE [Loss scaling]).
TEST(Gpu, SixteenBitPrecisionsOnTheGpuWithinTwoPercentOfOneProcess) {
  REQUIRE_GPUS(1);
  for (const char* precision : {"bf16", "fp16"}) {
    SCOPED_TRACE(precision);
    GpuRun r;
    r.stages = 2;
    r.precision = precision;
    r.tolerance = 2e-2;
    expectSameAsOneProcess(r);
  }
}

}  // namespace
}  // namespace hydrozoa
