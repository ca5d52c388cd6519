// The baseline of the overhead benchmark: a plain libtorch training loop,
// nothing of hydrozoa's runtime around it. The same model (built by the
// zoo), the same Fashion-MNIST data held in memory, the same batch, SGD with
// momentum, one compute thread. Prints {"samples_per_s": ...} measured over
// the steps after the first `warmup`. With --device cuda the model and each
// batch are on the GPU (scripts/gpu-check's first benchmark).
//
// --data synthetic: the zoo's synthetic samples of the model's input shape
// instead (a machine without the dataset, as a lent GPU machine is).
//
//   build/bench/plain_loop [--model cnn] [--batch 128] [--steps 300] [--warmup 20] [--device cpu|cuda]
//                          [--data fashion_mnist|synthetic] [--train-size 8192]
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <chrono>
#include <cstring>

#include "core/allocator.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "model/model.h"

using namespace hydrozoa;

int main(int argc, char** argv) {
  std::string name = "cnn";
  std::int64_t batch = 128, steps = 300, warmup = 20;
  std::string device = "cpu", dataKind = "fashion_mnist";
  std::int64_t trainSize = 8192;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--model")) name = argv[++i];
    if (!std::strcmp(argv[i], "--batch")) batch = std::atoll(argv[++i]);
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoll(argv[++i]);
    if (!std::strcmp(argv[i], "--warmup")) warmup = std::atoll(argv[++i]);
    if (!std::strcmp(argv[i], "--device")) device = argv[++i];
    if (!std::strcmp(argv[i], "--data")) dataKind = argv[++i];
    if (!std::strcmp(argv[i], "--train-size")) trainSize = std::atoll(argv[++i]);
  }
  if (device != "cpu" && !(device == "cuda" && torch::cuda::is_available())) {
    fmt::print(stderr, "plain_loop: --device {}: use cpu, or cuda on a machine with a GPU\n", device);
    return 2;
  }
  const torch::Device on(device == "cuda" ? torch::kCUDA : torch::kCPU);
  configureAllocatorForTraining();  // as hydrozoa's workers do: compare the loops, not malloc settings
  torch::set_num_threads(1);
  auto m = model::buildModel({name, {}}, {0, 0, -1});
  if (!m.ok()) {
    fmt::print(stderr, "plain_loop: {}\n", m.status().message());
    return 1;
  }
  data::DataSpec ds;
  ds.kind = dataKind;
  ds.synthetic_train = trainSize;
  ds.synthetic_input = m->input;
  ds.synthetic_task = m->task;
  auto train = data::openDataset(ds, data::Split::kTrain);
  if (!train.ok()) {
    fmt::print(stderr, "plain_loop: {}\n", train.status().message());
    return 1;
  }
  m->train(true);
  m->to(on);
  torch::optim::SGD sgd(m->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  const data::EpochSampler sampler({(*train)->size(), batch, 1, batch, 0, true, false});
  const auto perm = sampler.permutation(0);
  auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t s = 0; s < warmup + steps; ++s) {
    if (s == warmup) {
      if (on.is_cuda()) torch::cuda::synchronize();
      t0 = std::chrono::steady_clock::now();
    }
    const data::Batch b = (*train)->get(sampler.indicesIn(perm, s % sampler.stepsPerEpoch(), 0, 0));
    const torch::Tensor loss =
        model::taskLoss(m->task, m->forward(b.inputs.to(on)), b.labels.to(on));
    loss.backward();
    sgd.step();
    sgd.zero_grad();
  }
  if (on.is_cuda()) torch::cuda::synchronize();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("{{\"samples_per_s\": {:.1f}, \"steps\": {}, \"seconds\": {:.3f}}}\n", steps * batch / seconds, steps,
             seconds);
  return 0;
}
