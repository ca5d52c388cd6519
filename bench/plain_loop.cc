// The baseline of the overhead benchmark: a plain libtorch training loop,
// nothing of hydrozoa's runtime around it. The same model (built by the
// zoo), the same Fashion-MNIST data held in memory, the same batch, SGD with
// momentum, one compute thread. Prints {"samples_per_s": ...} measured over
// the steps after the first `warmup`.
//
//   build/bench/plain_loop [--model cnn] [--batch 128] [--steps 300] [--warmup 20]
#include <fmt/format.h>
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
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--model")) name = argv[++i];
    if (!std::strcmp(argv[i], "--batch")) batch = std::atoll(argv[++i]);
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoll(argv[++i]);
    if (!std::strcmp(argv[i], "--warmup")) warmup = std::atoll(argv[++i]);
  }
  configureAllocatorForTraining();  // as hydrozoa's workers do: compare the loops, not malloc settings
  torch::set_num_threads(1);
  auto m = model::buildModel({name, {}}, {0, 0, -1});
  data::DataSpec ds;
  ds.kind = "fashion_mnist";
  auto train = data::openDataset(ds, data::Split::kTrain);
  if (!m.ok() || !train.ok()) {
    fmt::print(stderr, "plain_loop: {}\n", !m.ok() ? m.status().message() : train.status().message());
    return 1;
  }
  m->train(true);
  torch::optim::SGD sgd(m->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  const data::EpochSampler sampler({(*train)->size(), batch, 1, batch, 0, true, false});
  const auto perm = sampler.permutation(0);
  auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t s = 0; s < warmup + steps; ++s) {
    if (s == warmup) t0 = std::chrono::steady_clock::now();
    const data::Batch b = (*train)->get(sampler.indicesIn(perm, s % sampler.stepsPerEpoch(), 0, 0));
    const torch::Tensor loss = model::taskLoss(m->task, m->forward(b.inputs), b.labels);
    loss.backward();
    sgd.step();
    sgd.zero_grad();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("{{\"samples_per_s\": {:.1f}, \"steps\": {}, \"seconds\": {:.3f}}}\n", steps * batch / seconds, steps,
             seconds);
  return 0;
}
