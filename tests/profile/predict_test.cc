#include "profile/predict.h"

#include <gtest/gtest.h>

#include "core/allocator.h"
#include "model/zoo.h"

namespace hydrozoa::profile {
namespace {

TEST(Device, BuiltInsLoad) {
  for (const char* name : {"k80", "v100", "a100", "h100"}) {
    auto d = loadDevice(name);
    ASSERT_TRUE(d.ok()) << d.status().message();
    EXPECT_TRUE(d->isGpu());
    EXPECT_EQ(d->accelerator(), name);
    EXPECT_GT(d->peak_flops, 1e12);
  }
  EXPECT_EQ(loadDevice("k80")->memory, 12 * kGiB);
}

TEST(Device, UnknownNameListsBuiltIns) {
  auto d = loadDevice("tpu9");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("k80"), std::string::npos);
}

TEST(Device, YamlErrorsNameTheField) {
  auto d = deviceFromYaml("name: x\nkind: gpu\npeak_flops: 1e12\nmemory_bandwidth: 900GB\nmemory: 16GB\n", "x.yaml");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("x.yaml.memory_bandwidth"), std::string::npos) << d.status().message();
  d = deviceFromYaml("name: x\nkind: tpu\npeak_flops: 1e12\nmemory_bandwidth: 900GB/s\nmemory: 16GB\n", "x.yaml");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("kind"), std::string::npos);
  auto ok = deviceFromYaml(deviceToYaml(*loadDevice("v100")), "v.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_DOUBLE_EQ(ok->peak_flops, 15.7e12);
}

TEST(Device, KindFactorsAndFreshPagesReadBackAndAreChecked) {
  const std::string base = "name: x\nkind: cpu\npeak_flops: 1e11\nmemory_bandwidth: 10GB/s\nmemory: 16GB\n";
  auto d = deviceFromYaml(base + "fresh_memory_bandwidth: 2GB/s\nkinds:\n  conv: {forward: 2.5, backward: 1.25}\n"
                                 "  linear: {forward: 3}\n  input_conv: {forward: 4, forward_small: 16, backward_small: 8}\n",
                          "x.yaml");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_DOUBLE_EQ(d->fresh_memory_bandwidth, 2e9);
  EXPECT_DOUBLE_EQ(d->factors("conv").forward, 2.5);
  EXPECT_DOUBLE_EQ(d->factors("conv").backward, 1.25);
  EXPECT_DOUBLE_EQ(d->factors("linear").backward, 1.0);  // absent: the roofline as it is
  EXPECT_DOUBLE_EQ(d->factors("transformer").forward, 1.0);
  // forward + forward_small / m; described at microbatch 8.
  EXPECT_DOUBLE_EQ(d->factors("input_conv").forwardAt(4), 8.0);
  EXPECT_DOUBLE_EQ(d->factors("input_conv").forwardAt(16), 5.0);
  EXPECT_DOUBLE_EQ(d->factors("input_conv").backwardAt(2), 5.0);
  EXPECT_DOUBLE_EQ(d->factors("conv").forwardAt(1), 2.5);
  EXPECT_EQ(describeKindFactors(*d), "conv ×2.50 / ×1.25, input_conv ×6.00 / ×2.00, linear ×3.00 / ×1.00");
  auto again = deviceFromYaml(deviceToYaml(*d), "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_DOUBLE_EQ(again->factors("conv").backward, 1.25);
  EXPECT_DOUBLE_EQ(again->factors("input_conv").forward_small, 16);
  EXPECT_DOUBLE_EQ(again->factors("input_conv").backward_small, 8);
  EXPECT_DOUBLE_EQ(again->fresh_memory_bandwidth, 2e9);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"kinds:\n  convolution: {forward: 2}\n", "unknown layer kind \"convolution\" (known: conv, linear"},
      {"kinds:\n  conv: {forward: 0}\n", "x.yaml.kinds.conv.forward"},
      {"kinds:\n  conv: {backward: -1}\n", "x.yaml.kinds.conv.backward"},
      {"kinds:\n  conv: {forward: 1e9}\n", "x.yaml.kinds.conv.forward"},
      {"kinds:\n  conv: {fwd: 2}\n", "unknown key \"fwd\""},
      {"kinds:\n  conv: {forward_small: -1}\n", "x.yaml.kinds.conv.forward_small"},
      {"kinds:\n  conv: {backward_small: nan}\n", "x.yaml.kinds.conv.backward_small"},
      {"kinds: [conv]\n", "x.yaml.kinds"},
      {"fresh_memory_bandwidth: 0\n", "x.yaml.fresh_memory_bandwidth"},
  };
  for (const auto& [yaml, message] : bad) {
    auto e = deviceFromYaml(base + yaml, "x.yaml");
    ASSERT_FALSE(e.ok()) << yaml;
    EXPECT_NE(e.status().message().find(message), std::string::npos) << yaml << " -> " << e.status().message();
  }
}

TEST(Predict, KindFactorsScaleTheirKindsRooflineOnly) {
  auto arch = model::buildArch({"vgg16", {}});
  DeviceSpec plain = *loadDevice("v100");
  DeviceSpec scaled = plain;
  scaled.kinds["conv"] = {2.0, 3.0};
  auto a = predictProfile(*arch, plain, {8}, "sgd"), b = predictProfile(*arch, scaled, {8}, "sgd");
  ASSERT_TRUE(a.ok() && b.ok());
  const double fixed = 1e3 * plain.layer_overhead;
  const auto layers = model::analyze(*arch);
  for (size_t i = 0; i < a->numLayers(); ++i) {
    const LayerCost &x = a->at(8)->layers[i], &y = b->at(8)->layers[i];
    if (factorKind(layers[i]) == "conv") {
      EXPECT_NEAR(y.forward_ms - fixed, 2 * (x.forward_ms - fixed), 1e-9) << a->layers[i].name;
      EXPECT_NEAR(y.backward_ms - 2 * fixed, 3 * (x.backward_ms - 2 * fixed), 1e-9) << a->layers[i].name;
    } else {
      EXPECT_DOUBLE_EQ(y.forward_ms, x.forward_ms) << a->layers[i].name;
      EXPECT_DOUBLE_EQ(y.backward_ms, x.backward_ms) << a->layers[i].name;
    }
  }
}

TEST(Predict, TheFirstConvolutionIsAnInputConvAndSmallMicrobatchesPayMore) {
  auto arch = model::buildArch({"vgg16", {}});
  const auto layers = model::analyze(*arch);
  EXPECT_EQ(factorKind(layers[0]), "input_conv");  // over 3 channels
  EXPECT_EQ(factorKind(layers[1]), "conv");
  EXPECT_EQ(factorKind(layers[13]), "linear");
  DeviceSpec plain = *loadDevice("v100");
  DeviceSpec scaled = plain;
  scaled.kinds["input_conv"] = {1.0, 1.0, 8.0, 0.0};  // factor 1 + 8 / m forward
  auto a = predictProfile(*arch, plain, {2, 8}, "sgd"), b = predictProfile(*arch, scaled, {2, 8}, "sgd");
  ASSERT_TRUE(a.ok() && b.ok());
  const double fixed = 1e3 * plain.layer_overhead;
  for (const std::int64_t m : {2, 8}) {
    const LayerCost &x = a->at(m)->layers[0], &y = b->at(m)->layers[0];
    EXPECT_NEAR(y.forward_ms - fixed, (1.0 + 8.0 / m) * (x.forward_ms - fixed), 1e-9) << m;
    EXPECT_DOUBLE_EQ(y.backward_ms, x.backward_ms) << m;
    EXPECT_DOUBLE_EQ(b->at(m)->layers[1].forward_ms, a->at(m)->layers[1].forward_ms) << m;
  }
}

TEST(Predict, BackwardMovesAParameterFiveTimes) {
  // VGG-16's first dense layer at one sample is bound by its 411 MB of weights.
  auto arch = model::buildArch({"vgg16", {}});
  const DeviceSpec v100 = *loadDevice("v100");
  auto p = predictProfile(*arch, v100, {1}, "sgd");
  ASSERT_TRUE(p.ok());
  const auto layers = model::analyze(*arch);
  const size_t fc1 = 13;
  ASSERT_EQ(layers[fc1].name, "fc1");
  const double bandwidth = v100.memory_bandwidth * v100.memory_efficiency;
  const double traffic = 2.0 * static_cast<double>(layers[fc1].memory_traffic_bytes) + 5.0 * 4 * layers[fc1].parameters;
  EXPECT_NEAR(p->at(1)->layers[fc1].backward_ms, 1e3 * (traffic / bandwidth + 2 * v100.layer_overhead), 1e-9);
}

TEST(Predict, FreshPagesArePaidByTensorsFromTheMmapThresholdUp) {
  auto arch = model::buildArch({"vgg16", {}});
  DeviceSpec plain = *loadDevice("v100");
  DeviceSpec cpu = plain;
  cpu.fresh_memory_bandwidth = 1e9;
  auto a = predictProfile(*arch, plain, {8}, "sgd"), b = predictProfile(*arch, cpu, {8}, "sgd");
  ASSERT_TRUE(a.ok() && b.ok());
  const auto layers = model::analyze(*arch);
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerCost &x = a->at(8)->layers[i], &y = b->at(8)->layers[i];
    const Bytes output = x.output_bytes, weight = 4 * layers[i].largest_parameter;
    const Bytes inputGradient = i == 0 ? 0 : a->at(8)->layers[i - 1].output_bytes;
    const auto fresh = [](Bytes bytes) { return bytes >= kMmapThreshold ? 1e3 * static_cast<double>(bytes) / 1e9 : 0; };
    EXPECT_NEAR(y.forward_ms - x.forward_ms, fresh(output), 1e-9) << layers[i].name;
    EXPECT_NEAR(y.backward_ms - x.backward_ms, fresh(weight) + fresh(inputGradient), 1e-9) << layers[i].name;
  }
  // Both sides of the threshold occur: conv1's output (8 × 12.8 MB) and fc1's weight (411 MB) are above it,
  // conv13's output (3.2 MB) and weight (9.4 MB) below.
  EXPECT_GT(b->at(8)->layers[0].forward_ms, a->at(8)->layers[0].forward_ms);
  EXPECT_GT(b->at(8)->layers[13].backward_ms, a->at(8)->layers[13].backward_ms);
  EXPECT_DOUBLE_EQ(b->at(8)->layers[12].forward_ms, a->at(8)->layers[12].forward_ms);
}

TEST(Predict, ComputeBoundLayersFollowFlops) {
  auto arch = model::buildArch({"vgg16", {}});
  auto device = loadDevice("v100");
  auto p = predictProfile(*arch, *device, {1, 8}, "sgd_momentum");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->source, "predicted");
  EXPECT_EQ(p->device_kind, "gpu");
  EXPECT_EQ(*p->device_memory, 16 * kGiB);
  const auto layers = model::analyze(*arch);
  // conv2 of VGG-16 is compute bound: 8 samples take its FLOPs at the achieved rate.
  const double expectedMs = 1e3 * layers[1].forward_flops * 8 / (15.7e12 * device->compute_efficiency);
  EXPECT_NEAR(p->at(8)->layers[1].forward_ms, expectedMs + 1e3 * device->layer_overhead, 1e-6);
  for (size_t i = 0; i < p->numLayers(); ++i) {
    EXPECT_EQ(p->layers[i].parameter_bytes, 4 * layers[i].parameters);
    EXPECT_EQ(p->layers[i].optimizer_state_bytes, p->layers[i].parameter_bytes);
    EXPECT_EQ(p->at(8)->layers[i].output_bytes, 8 * layers[i].output_bytes);
    EXPECT_GT(p->at(8)->layers[i].backward_ms, p->at(8)->layers[i].forward_ms);
  }
}

TEST(Predict, AdamKeepsTwiceTheState) {
  auto p = predictProfile(*model::buildArch({"mlp", {}}), *loadDevice("k80"), {4}, "adam");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->layers[0].optimizer_state_bytes, 2 * p->layers[0].parameter_bytes);
  // The update moves memory: Adam's elementwise passes over weights, gradients and moments.
  const auto k80 = *loadDevice("k80");
  const double bandwidth = k80.memory_bandwidth * k80.memory_efficiency;
  EXPECT_NEAR(p->layers[0].optimizer_ms,
              1e3 * (14.0 * static_cast<double>(p->layers[0].parameter_bytes) / bandwidth + k80.layer_overhead), 1e-9);
  auto sgd = predictProfile(*model::buildArch({"mlp", {}}), k80, {4}, "sgd");
  ASSERT_TRUE(sgd.ok());
  EXPECT_LT(sgd->layers[0].optimizer_ms, p->layers[0].optimizer_ms);
  EXPECT_FALSE(predictProfile(*model::buildArch({"mlp", {}}), *loadDevice("k80"), {4}, "rmsprop9").ok());
}

TEST(Predict, TokenInputsAreInt64) {
  auto p = predictProfile(*model::buildArch({"bert12", {}}), *loadDevice("k80"), {2}, "sgd");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->at(2)->input_bytes, 2 * 384 * 8);
}

}  // namespace
}  // namespace hydrozoa::profile
