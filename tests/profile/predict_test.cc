#include "profile/predict.h"

#include <gtest/gtest.h>

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
