#include "plan/cost/tensor_parallel.h"

#include <gtest/gtest.h>

#include "plan/cost/memory.h"
#include "plan/gpt_profile.h"
#include "plan/search.h"

namespace hydrozoa::plan {
namespace {

using testing::transformerProfile;

// b·s·h float32 at microbatch size b: 128 tokens × hidden 256 × 4 bytes.
constexpr Bytes kActivation = 128 * 256 * 4;

TEST(TensorModel, KnowsWhichLayersOfAZooTransformerSplit) {
  const TensorModel gpt = tensorModelOf(transformerProfile("gpt", 2));
  ASSERT_TRUE(gpt.splittable()) << gpt.why_none;
  ASSERT_EQ(gpt.layers.size(), 4u);  // embeddings, block1, block2, lm_head
  EXPECT_EQ(gpt.layers[0].split, TensorSplit::kEmbedding);
  EXPECT_EQ(gpt.layers[1].split, TensorSplit::kTransformer);
  EXPECT_EQ(gpt.layers[3].split, TensorSplit::kLmHead);
  EXPECT_EQ(gpt.layers[1].sequence, 128);
  EXPECT_EQ(gpt.sizes, (std::vector<std::pair<std::string, std::int64_t>>{
                           {"heads", 4}, {"hidden", 256}, {"ffn", 1024}, {"vocab", 1024}}));
  // A block's replicated parameters: the two row-parallel biases and both
  // layer norms, 6h of 4h² + 9h + 2hf + f.
  EXPECT_DOUBLE_EQ(gpt.layers[1].replicated_parameters, 6.0 * 256 / 789760);
  // BERT's classifier is replicated.
  const TensorModel bert = tensorModelOf(transformerProfile("bert", 2));
  ASSERT_TRUE(bert.splittable());
  EXPECT_EQ(bert.layers.back().split, TensorSplit::kReplicated);
  EXPECT_EQ(bert.layers.back().replicated_parameters, 1);
}

TEST(TensorModel, AModelWithoutTransformerBlocksDoesNotSplit) {
  profile::Profile p = transformerProfile("gpt", 2);
  for (auto& l : p.layers) l.kind = "linear";
  const TensorModel none = tensorModelOf(p);
  EXPECT_FALSE(none.splittable());
  EXPECT_EQ(validTensorParallel(none, 8, 8), std::vector<int>{1});
  const Status s = checkTensorParallel(none, 2, 8);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "--tensor-parallel 2: gpt has no layer that tensor parallelism splits (transformer, embedding or lm_head): "
            "use 1");
}

TEST(TensorModel, ValidDegreesDivideTheWorkersAndEverySize) {
  const TensorModel gpt = tensorModelOf(transformerProfile("gpt", 2));
  EXPECT_EQ(validTensorParallel(gpt, 8, 8), (std::vector<int>{1, 2, 4}));  // heads = 4
  EXPECT_EQ(validTensorParallel(gpt, 6, 6), (std::vector<int>{1, 2}));
  EXPECT_EQ(validTensorParallel(gpt, 8, 2), (std::vector<int>{1, 2}));  // the fast link's workers
  EXPECT_EQ(checkTensorParallel(gpt, 3, 8).message(), "--tensor-parallel 3 does not divide heads=4: use 1, 2 or 4");
  EXPECT_EQ(checkTensorParallel(gpt, 8, 8).message(), "--tensor-parallel 8 does not divide heads=4: use 1, 2 or 4");
  EXPECT_NE(checkTensorParallel(gpt, 4, 6).message().find("--tensor-parallel 4 does not divide --workers 6"),
            std::string::npos);
  EXPECT_TRUE(checkTensorParallel(gpt, 4, 8).ok());
  EXPECT_TRUE(checkTensorParallel(gpt, 1, 7).ok());
}

// Seed 003 §4.3.2: 2 allreduces of b·s·h in the forward pass and 2 in the
// backward pass per transformer layer, 8·b·s·h·(t−1)/t per device per
// microbatch over a ring.
TEST(TensorAllreduces, PerLayerVolumesAreTheThesis) {
  const profile::Profile p = transformerProfile("gpt", 2);
  const TensorModel gpt = tensorModelOf(p);
  const profile::Measurement& m = *p.at(2);
  const TensorAllreduces a = tensorAllreduces(gpt, m);
  const Bytes bsh = 2 * kActivation;
  EXPECT_EQ(a.forward[1], (std::vector<Bytes>{bsh, bsh}));
  EXPECT_EQ(a.backward[1], (std::vector<Bytes>{bsh, bsh}));
  EXPECT_EQ(a.forward[0], std::vector<Bytes>{bsh});  // the embedding's partial sums
  EXPECT_TRUE(a.backward[0].empty());
  EXPECT_EQ(a.forward[3], (std::vector<Bytes>{2 * 128 * 4, 2 * 128 * 4, 2 * 128 * 4}));  // cross-entropy, b·s each
  EXPECT_EQ(a.backward[3], std::vector<Bytes>{bsh});  // f at the LM head's input
  // What each device sends per microbatch through a block at t = 4, with a
  // link of 1 byte per second and nothing else: the ring's 2(t−1)/t · n per allreduce.
  const TensorLink link{4, 1.0, 0, 0};
  Seconds sent = 0;
  for (Bytes n : a.forward[1]) sent += tensorAllreduceTime(n, link);
  for (Bytes n : a.backward[1]) sent += tensorAllreduceTime(n, link);
  EXPECT_DOUBLE_EQ(sent, 8.0 * static_cast<double>(bsh) * 3 / 4);
}

TEST(TensorAllreduces, RingTimesByHand) {
  // 2(t−1) rounds of n/(t·D) + α·n/t + β: t = 4, n = 262,144 B, 1 GB/s, β = 10 µs.
  const TensorLink link{4, 1e9, 0, 1e-5};
  EXPECT_NEAR(tensorAllreduceTime(262144, link), 6 * (65536 / 1e9 + 1e-5), 1e-15);
  // The all-gather of the receiving group: t − 1 rounds.
  EXPECT_NEAR(tensorAllGatherTime(262144, link), 3 * (65536 / 1e9 + 1e-5), 1e-15);
  EXPECT_EQ(tensorAllreduceTime(262144, {1, 1e9, 0, 1e-5}), 0);
}

TEST(TensorParallelCosts, AddsTheAllreducesToThePassesAndScattersTheCuts) {
  const profile::Profile p = transformerProfile("gpt", 2);
  const TensorModel gpt = tensorModelOf(p);
  const profile::Measurement& m = *p.at(1);
  const ChainCosts base = chainCosts(p, m, 1e9, 1e-4);
  const TensorLink link{2, 1e10, 0, 2e-5};
  ChainCosts split = base;
  const std::vector<Seconds> added = addTensorParallelCosts(split, gpt, m, link, {1e9, 1e-4, true});
  const Seconds ar = 2 * (kActivation / 2 / 1e10 + 2e-5);  // t = 2: 2 rounds
  EXPECT_NEAR(split.forward[1] - base.forward[1], 2 * ar, 1e-12);
  EXPECT_NEAR(split.backward[1] - base.backward[1], 2 * ar, 1e-12);
  EXPECT_NEAR(split.forward[0] - base.forward[0], ar, 1e-12);
  EXPECT_NEAR(split.backward[0], base.backward[0], 1e-12);
  EXPECT_NEAR(added[1], 4 * ar, 1e-12);
  // Scatter/gather: half of b·s·h over the stages' link, then an all-gather
  // on the group's: latency + n/(t·D) + (t−1)(n/(t·D_t) + β).
  EXPECT_NEAR(split.cut[1], 1e-4 + kActivation / 2 / 1e9 + (kActivation / 2 / 1e10 + 2e-5), 1e-12);
  // Without it every rank sends the whole, as at t = 1.
  ChainCosts whole = base;
  addTensorParallelCosts(whole, gpt, m, link, {1e9, 1e-4, false});
  EXPECT_EQ(whole.cut, base.cut);
  // t = 1: nothing changes.
  ChainCosts same = base;
  addTensorParallelCosts(same, gpt, m, {1, 1e10, 0, 2e-5}, {1e9, 1e-4, true});
  EXPECT_EQ(same.forward, base.forward);
  EXPECT_EQ(same.cut, base.cut);
}

TEST(TensorParallelProfile, SplitsComputeStateAndActivations) {
  const profile::Profile p = transformerProfile("bert", 2);
  const TensorModel bert = tensorModelOf(p);
  const profile::Profile half = tensorParallelProfile(p, bert, 2);
  const size_t block = 1, classifier = 3;
  for (size_t k = 0; k < p.measurements.size(); ++k) {
    EXPECT_DOUBLE_EQ(half.measurements[k].layers[block].forward_ms, p.measurements[k].layers[block].forward_ms / 2);
    EXPECT_DOUBLE_EQ(half.measurements[k].layers[block].backward_ms, p.measurements[k].layers[block].backward_ms / 2);
    EXPECT_EQ(half.measurements[k].layers[classifier].forward_ms, p.measurements[k].layers[classifier].forward_ms);
    EXPECT_EQ(half.measurements[k].layers[block].output_bytes, p.measurements[k].layers[block].output_bytes);
  }
  // A block's 789,760 parameters: 6h = 1,536 on every rank, the rest halved.
  EXPECT_EQ(p.layers[block].parameter_bytes, 4 * 789760);
  EXPECT_NEAR(half.layers[block].parameter_bytes, 4 * (1536 + (789760 - 1536) / 2), 1);
  EXPECT_NEAR(half.layers[block].optimizer_state_bytes, 4 * (1536 + (789760 - 1536) / 2), 1);
  EXPECT_EQ(half.layers[classifier].parameter_bytes, p.layers[classifier].parameter_bytes);
  // Stashed activations per sample: 9sh + 2sf + 3as² elements, 5sh of them
  // on every rank (s = 128, h = 256, f = 1024, a = 4).
  const double whole = 9.0 * 128 * 256 + 2.0 * 128 * 1024 + 3.0 * 4 * 128 * 128;
  const double kept = 5.0 * 128 * 256 + (whole - 5.0 * 128 * 256) / 2;
  EXPECT_NEAR(static_cast<double>(half.at(1)->layers[block].stashed_bytes), 4 * kept, 1);
  // The memory a worker holds for the block (cost/memory.h's fixed term):
  // weights, gradients and momentum, each a rank's share.
  const MemoryCosts mem = memoryCosts(half, *half.at(1));
  EXPECT_NEAR(mem.fixed[block], 3 * 4 * (1536 + (789760 - 1536) / 2), 3);
}

}  // namespace
}  // namespace hydrozoa::plan
