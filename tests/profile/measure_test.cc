#include "profile/measure.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/cpus.h"
#include "model/zoo.h"
#include "profile/calibrate.h"
#include "profile/memory_tracker.h"

namespace hydrozoa::profile {
namespace {

TEST(MemoryTracker, CountsLiveTensors) {
  MemoryTracker& t = MemoryTracker::instance();
  const std::int64_t before = t.current();
  t.resetPeak();
  {
    torch::Tensor a = torch::empty({1 << 20}, torch::kFloat);  // 4 MiB
    EXPECT_GE(t.current() - before, 4 << 20);
    { torch::Tensor b = torch::empty({1 << 18}, torch::kFloat); }
    EXPECT_GE(t.peak() - before, (4 << 20) + (1 << 20));
  }
  EXPECT_EQ(t.current(), before);
}

TEST(MeasureProfile, FashionCnnFiguresAreConsistent) {
  MeasureOptions o;
  o.microbatch_sizes = {4, 1};
  o.repeats = 3;
  auto p = measureProfile({"cnn", {}}, o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->source, "measured");
  EXPECT_EQ(p->threads, 1);
  EXPECT_GT(p->runtime_bytes, 0);
  EXPECT_EQ(p->microbatchSizes(), (std::vector<std::int64_t>{1, 4}));
  const auto analysis = model::analyze(*model::buildArch({"cnn", {}}));
  ASSERT_EQ(p->numLayers(), analysis.size());
  for (size_t i = 0; i < analysis.size(); ++i) {
    EXPECT_EQ(p->layers[i].parameter_bytes, 4 * analysis[i].parameters);
    EXPECT_EQ(p->layers[i].optimizer_state_bytes, p->layers[i].parameter_bytes);
    // NOTE [Timing the update]: every layer with weights has an update to time.
    if (analysis[i].parameters > 0) {
      EXPECT_GT(p->layers[i].optimizer_ms, 0) << p->layers[i].name;
      EXPECT_GT(p->layers[i].snapshot_ms, 0) << p->layers[i].name;
    } else {
      EXPECT_EQ(p->layers[i].optimizer_ms, 0) << p->layers[i].name;
      EXPECT_EQ(p->layers[i].snapshot_ms, 0) << p->layers[i].name;
    }
    for (const Measurement& m : p->measurements) {
      const LayerCost& c = m.layers[i];
      EXPECT_GT(c.forward_ms, 0);
      EXPECT_GT(c.backward_ms, 0);
      // NOTE [Passes after another chunk's]: each pass timed cold as well.
      EXPECT_GT(c.cold_forward_ms, 0);
      EXPECT_GT(c.cold_backward_ms, 0);
      EXPECT_EQ(c.output_bytes, m.microbatch_size * analysis[i].output_bytes);
      EXPECT_GE(c.stashed_bytes, c.output_bytes);
    }
  }
  // conv1 keeps its ReLU output and the pooling indices: at least 3x its pooled output.
  EXPECT_GE(p->at(4)->layers[0].stashed_bytes, 3 * p->at(4)->layers[0].output_bytes);
  EXPECT_EQ(p->at(4)->input_bytes, 4 * 28 * 28 * 4);
  // NOTE [A worker process's own memory]: the heap a size's passes leave is
  // counted beyond the smallest size's (in runtime_bytes).
  EXPECT_EQ(p->at(1)->heap_bytes, 0);
  EXPECT_GE(p->at(4)->heap_bytes, 0);
  // NOTE [Compute beside busy cores]: timed with every usable core busy.
  if (usableCpus().size() >= 2) {
    ASSERT_TRUE(p->corun.has_value());
    EXPECT_EQ(p->corun->cores, static_cast<int>(usableCpus().size()));
    EXPECT_NE(p->at(p->corun->microbatch_size), nullptr);  // a profiled size
    EXPECT_GE(p->corun->slowdown, 1);
    EXPECT_LT(p->corun->slowdown, 100);
  }
  o.corun = false;
  o.microbatch_sizes = {1};
  auto without = measureProfile({"cnn", {}}, o);
  ASSERT_TRUE(without.ok()) << without.status().message();
  EXPECT_FALSE(without->corun.has_value());
}

TEST(MeasureProfile, TokenModelsAndLanguageModelLoss) {
  MeasureOptions o;
  o.microbatch_sizes = {2};
  o.repeats = 1;
  auto p = measureProfile(
      {"gpt", {{"layers", "1"}, {"hidden", "32"}, {"heads", "2"}, {"vocab", "64"}, {"seq_len", "8"}}}, o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->numLayers(), 3u);
  EXPECT_EQ(p->at(2)->input_bytes, 2 * 8 * 8);  // int64 token ids
}

TEST(MeasureProfile, BadInputs) {
  MeasureOptions o;
  EXPECT_EQ(measureProfile({"resnet35", {}}, o).status().code(), ErrorCode::kNotFound);
  o.microbatch_sizes = {};
  EXPECT_FALSE(measureProfile({"cnn", {}}, o).ok());
  o.microbatch_sizes = {1};
  o.optimizer = "lion";
  EXPECT_FALSE(measureProfile({"cnn", {}}, o).ok());
}

// The update is timed with the profile's optimizer and leaves the weights as
// they were (a learning rate of 0): Adam's state is twice SGD's, and so is
// most of its work.
TEST(MeasureProfile, TheUpdateIsTimedWithTheProfilesOptimizer) {
  MeasureOptions o;
  o.microbatch_sizes = {1};
  o.repeats = 5;
  o.min_seconds = 0;
  o.optimizer = "adam";
  const model::ModelSpec mlp{"mlp", {{"hidden", "512"}, {"depth", "2"}}};
  auto adam = measureProfile(mlp, o);
  o.optimizer = "sgd";
  auto sgd = measureProfile(mlp, o);
  ASSERT_TRUE(adam.ok() && sgd.ok());
  EXPECT_EQ(adam->optimizer, "adam");
  EXPECT_EQ(adam->layers[1].optimizer_state_bytes, 2 * adam->layers[1].parameter_bytes);
  EXPECT_EQ(sgd->layers[1].optimizer_state_bytes, 0);
  EXPECT_GT(adam->layers[1].optimizer_ms, sgd->layers[1].optimizer_ms);
}

TEST(CalibrateCpu, PlausibleFigures) {
  auto d = calibrateCpu({1});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->kind, "cpu");
  EXPECT_GT(d->peak_flops, 1e8);
  EXPECT_GT(d->memory_bandwidth, 1e8);
  EXPECT_GT(d->compute_efficiency, 0);
  EXPECT_LE(d->compute_efficiency, 1);
  EXPECT_GT(d->fresh_memory_bandwidth, 1e8);
  EXPECT_GT(d->layer_overhead, 0);
  EXPECT_LT(d->layer_overhead, 1e-3);
  // Every kind of the zoo ran in a calibration kernel; measured here each
  // takes 0.6–14× its roofline at microbatch 8 (NOTE [Calibration kernels]).
  for (const auto& kind : factorKinds()) {
    ASSERT_EQ(d->kinds.count(kind), 1u) << kind;
    for (const std::int64_t m : {8, 64}) {
      EXPECT_GT(d->kinds.at(kind).forwardAt(m), 0.1) << kind << " at " << m;
      EXPECT_LT(d->kinds.at(kind).forwardAt(m), 100) << kind << " at " << m;
      EXPECT_GT(d->kinds.at(kind).backwardAt(m), 0.1) << kind << " at " << m;
      EXPECT_LT(d->kinds.at(kind).backwardAt(m), 100) << kind << " at " << m;
    }
  }
  // A calibrated device is a device file like any other.
  auto again = deviceFromYaml(deviceToYaml(*d), "cpu.yaml");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->kinds.size(), d->kinds.size());
}

}  // namespace
}  // namespace hydrozoa::profile
