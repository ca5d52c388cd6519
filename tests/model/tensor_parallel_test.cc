#include "model/tensor_parallel.h"

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <thread>

namespace hydrozoa::model {
namespace {

// A GPT small enough to run t copies at once: 4 heads, ffn 128, vocabulary 64.
Options gpt(int layers, double dropout = 0) {
  return {{"layers", std::to_string(layers)}, {"hidden", "32"}, {"heads", "4"},  {"ffn", "128"},
          {"vocab", "64"},                    {"seq_len", "8"}, {"dropout", fmt::format("{}", dropout)}};
}

// Building seeds torch's one global generator per layer, so ranks on
// threads of one process build one at a time (each rank is a process of its
// own in a job).
std::mutex buildMutex;

Result<Model> buildRank(const Options& options, BuildOptions build) {
  std::lock_guard<std::mutex> lock(buildMutex);
  return buildModel({"gpt", options}, build);
}

// Runs body(rank, group) on t threads, a Gloo group over them.
template <class Body>
void onRanks(int t, Body body) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::thread> threads;
  for (int r = 0; r < t; ++r) {
    threads.emplace_back([&, r] {
      auto options = c10d::ProcessGroupGloo::Options::create();
      options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, r, t, options);
      body(r, std::make_shared<TensorGroup>(r, t, pg));
    });
  }
  for (auto& th : threads) th.join();
}

// NOTE [Tolerance of the split]: float32 results of a split layer differ
// from the unsplit layer's only by the order of additions (t partial
// products summed; gradients summed over the group), so they agree to a few
// ulps of the largest magnitude involved: |a − b| ≤ 1e-5 · max(1, max|b|).
void expectClose(const torch::Tensor& a, const torch::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double scale = std::max(1.0, b.abs().max().item<double>());
  const double diff = (a - b).abs().max().item<double>();
  EXPECT_LE(diff, 1e-5 * scale) << what << ": max |difference| " << diff << " at scale " << scale;
}

struct Run {
  torch::Tensor output, loss, inputGrad;
  std::map<std::string, torch::Tensor> grads;      // by "layer/param"
  std::map<std::string, std::optional<ShardDim>> dims;
};

// Forward and backward of layers [first, last] of the GPT with `options`
// on input x, against a fixed projection of the output (blocks) or the
// model's loss (the whole model).
Run runModel(const Options& options, int first, int last, const torch::Tensor& x, const torch::Tensor& labels,
             std::shared_ptr<TensorGroup> group) {
  auto m = buildRank(options, {3, first, last, group});
  EXPECT_TRUE(m.ok()) << m.status().message();
  Run run;
  torch::Tensor in = x.is_floating_point() ? x.clone().requires_grad_(true) : x;
  run.output = m->forward(in);
  if (labels.defined()) {
    run.loss = modelLoss(*m, run.output, labels);
  } else {
    const torch::Tensor w = torch::linspace(-1, 1, run.output.numel()).reshape(run.output.sizes());
    run.loss = (run.output * w).sum();
  }
  run.loss.backward();
  if (in.requires_grad()) run.inputGrad = in.grad();
  for (const auto& layer : m->layers) {
    for (const auto& p : layer.module->named_parameters()) {
      run.grads[layer.name + "/" + p.key()] = p.value().grad();
      run.dims[layer.name + "/" + p.key()] = layer.module->shardDim(p.key());
    }
  }
  return run;
}

// The split run on t ranks, its gradients unsharded, against the unsplit run.
void expectSplitEqualsWhole(int t, const Options& options, int first, int last, const torch::Tensor& x,
                            const torch::Tensor& labels = {}) {
  const Run whole = runModel(options, first, last, x, labels, nullptr);
  std::vector<Run> ranks(static_cast<size_t>(t));
  onRanks(t, [&](int r, std::shared_ptr<TensorGroup> g) { ranks[static_cast<size_t>(r)] = runModel(options, first, last, x, labels, g); });
  for (int r = 0; r < t; ++r) {
    const Run& split = ranks[static_cast<size_t>(r)];
    const std::string who = fmt::format("t={} rank {}", t, r);
    if (!labels.defined()) expectClose(split.output, whole.output, who + " output");
    expectClose(split.loss, whole.loss, who + " loss");
    if (whole.inputGrad.defined()) expectClose(split.inputGrad, whole.inputGrad, who + " input gradient");
  }
  for (const auto& [name, grad] : whole.grads) {
    const auto dim = ranks[0].dims.at(name);
    if (!dim) {
      for (int r = 0; r < t; ++r) expectClose(ranks[static_cast<size_t>(r)].grads.at(name), grad, name + " (replicated)");
      continue;
    }
    std::vector<torch::Tensor> slices;
    for (const Run& split : ranks) slices.push_back(split.grads.at(name));
    expectClose(unshard(slices, *dim), grad, fmt::format("t={} {} (split)", t, name));
  }
}

TEST(TensorParallel, ABlocksOutputAndEveryGradientEqualTheUnsplitBlocks) {
  torch::manual_seed(11);
  const torch::Tensor x = torch::randn({3, 8, 32});
  for (int t : {2, 4}) expectSplitEqualsWhole(t, gpt(1), 1, 1, x);
}

TEST(TensorParallel, AWholeGptsLossAndEveryGradientEqualTheUnsplitModels) {
  torch::manual_seed(12);
  const torch::Tensor ids = torch::randint(0, 64, {3, 8}, torch::kLong);
  const torch::Tensor labels = torch::randint(0, 64, {3, 8}, torch::kLong);
  for (int t : {2, 4}) expectSplitEqualsWhole(t, gpt(2), 0, -1, ids, labels);
}

TEST(TensorParallel, ABertEncodersSplitEqualsTheUnsplit) {
  torch::manual_seed(13);
  const Options bert = {{"layers", "1"}, {"hidden", "32"}, {"heads", "4"}, {"vocab", "64"}, {"seq_len", "8"},
                        {"dropout", "0"}};
  const torch::Tensor x = torch::randn({2, 8, 32});
  auto whole = buildModel({"bert", bert}, {3, 1, 1});
  ASSERT_TRUE(whole.ok());
  const torch::Tensor expected = whole->forward(x);
  std::vector<torch::Tensor> outs(2);
  onRanks(2, [&](int r, std::shared_ptr<TensorGroup> g) {
    std::unique_lock<std::mutex> lock(buildMutex);
    auto m = buildModel({"bert", bert}, {3, 1, 1, g});
    lock.unlock();
    outs[static_cast<size_t>(r)] = m->forward(x);
  });
  for (const auto& out : outs) expectClose(out, expected, "post-norm encoder output");
}

TEST(TensorParallel, PredictionsAreTheWholeVocabularysArgmax) {
  torch::manual_seed(14);
  torch::Tensor logits = torch::randn({5, 64});
  logits.index_put_({0, 40}, 9.0);  // a maximum on the second half
  logits.index_put_({1, 3}, 9.0);   // on the first
  logits.index_put_({2, 10}, 9.0);  // equal maxima on both halves: the first, as argmax
  logits.index_put_({2, 50}, 9.0);
  std::vector<torch::Tensor> got(2);
  onRanks(2, [&](int r, std::shared_ptr<TensorGroup> g) {
    got[static_cast<size_t>(r)] = vocabParallelArgmax(logits.narrow(1, r * 32, 32).contiguous(), *g);
  });
  for (const auto& ids : got) EXPECT_TRUE(torch::equal(ids, logits.argmax(1)));
}

TEST(TensorParallel, SlicesAreTheUnsplitWeightsAndJoinBackExactly) {
  auto whole = buildModel({"gpt", gpt(1)}, {3, 0, -1});
  ASSERT_TRUE(whole.ok());
  for (int t : {2, 4}) {
    std::vector<std::map<std::string, torch::Tensor>> params(static_cast<size_t>(t));
    std::map<std::string, std::optional<ShardDim>> dims;
    onRanks(t, [&](int r, std::shared_ptr<TensorGroup> g) {
      auto m = buildRank(gpt(1), {3, 0, -1, g});
      for (const auto& layer : m->layers) {
        for (const auto& p : layer.module->named_parameters()) {
          params[static_cast<size_t>(r)][layer.name + "/" + p.key()] = p.value().detach().clone();
          if (r == 0) dims[layer.name + "/" + p.key()] = layer.module->shardDim(p.key());
        }
      }
    });
    for (const auto& layer : whole->layers) {
      for (const auto& p : layer.module->named_parameters()) {
        const std::string name = layer.name + "/" + p.key();
        const auto dim = dims.at(name);
        std::vector<torch::Tensor> slices;
        for (int r = 0; r < t; ++r) {
          const torch::Tensor& mine = params[static_cast<size_t>(r)].at(name);
          slices.push_back(mine);
          const torch::Tensor expected = dim ? shardOf(p.value(), *dim, r, t) : p.value();
          EXPECT_TRUE(torch::equal(mine, expected)) << name << " rank " << r << " of " << t;
        }
        EXPECT_TRUE(torch::equal(dim ? unshard(slices, *dim) : slices[0], p.value())) << name;
      }
    }
  }
  // Q, K and V each cut: rank 1 of 2 holds rows 2-3 of each block of 4.
  const torch::Tensor w = torch::arange(12).reshape({12, 1});
  EXPECT_TRUE(torch::equal(shardOf(w, {0, 3}, 1, 2).flatten(), torch::tensor({2, 3, 6, 7, 10, 11}, torch::kLong)));
}

TEST(TensorParallel, SlicedDropoutDrawsTheUnsplitMask) {
  const torch::Tensor x = torch::randn({2, 4, 6, 6});
  torch::manual_seed(5);
  const torch::Tensor plain = torch::dropout(x, 0.3, true);
  torch::manual_seed(5);
  const torch::Tensor whole = slicedDropout(x, 0.3, true, 1);
  EXPECT_TRUE(torch::equal(whole, plain));
  for (int t : {2, 4}) {
    for (int r = 0; r < t; ++r) {
      torch::manual_seed(5);
      const torch::Tensor mine = slicedDropout(x.narrow(1, r * 4 / t, 4 / t), 0.3, true, 1, r, t);
      EXPECT_TRUE(torch::equal(mine, whole.narrow(1, r * 4 / t, 4 / t))) << "rank " << r << " of " << t;
    }
  }
  EXPECT_TRUE(torch::equal(slicedDropout(x, 0.3, false), x));
}

TEST(TensorParallel, AnInvalidSplitIsOneLineWithTheValidValues) {
  auto arch = buildArch({"gpt", {{"layers", "2"}, {"hidden", "48"}, {"heads", "6"}, {"vocab", "60"}}});
  ASSERT_TRUE(arch.ok());
  EXPECT_TRUE(checkTensorParallel(*arch, 2).ok());
  EXPECT_TRUE(checkTensorParallel(*arch, 6).ok());
  auto s = checkTensorParallel(*arch, 4);
  EXPECT_EQ(s.message(), "tensor parallelism 4 does not divide heads=6 of gpt: use 1, 2, 3 or 6");
  s = checkTensorParallel(*arch, 5);
  EXPECT_EQ(s.message(), "tensor parallelism 5 does not divide heads=6 of gpt: use 1, 2, 3 or 6");
  auto odd = buildArch({"gpt", {{"layers", "1"}, {"hidden", "48"}, {"heads", "6"}, {"vocab", "63"}}});
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(checkTensorParallel(*odd, 2).message(), "tensor parallelism 2 does not divide vocab=63 of gpt: use 1 or 3");
  auto cnn = buildArch({"cnn", {}});
  ASSERT_TRUE(cnn.ok());
  EXPECT_EQ(checkTensorParallel(*cnn, 2).message(),
            "tensor parallelism 2 needs transformer blocks to split, and cnn has none: use tensor parallelism 1");
  auto group = std::make_shared<TensorGroup>(0, 1);
  EXPECT_TRUE(buildModel({"cnn", {}}, {0, 0, -1, group}).ok());  // t = 1: nothing to split
}

}  // namespace
}  // namespace hydrozoa::model
