#include "model/arch.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/zoo.h"

namespace hydrozoa::model {
namespace {

Arch arch(const std::string& name, Options options = {}) {
  auto a = buildArch({name, std::move(options)});
  EXPECT_TRUE(a.ok()) << a.status().message();
  return *a;
}

double forwardFlops(const Arch& a) {
  double total = 0;
  for (const auto& l : analyze(a)) total += l.forward_flops;
  return total;
}

// Parameter counts of torchvision's models (torchvision.models docs) and of
// the HuggingFace reference implementations; the zoo must equal them exactly.
TEST(ArchParameters, EqualTorchvisionExactly) {
  EXPECT_EQ(totalParameters(arch("alexnet")), 61'100'840);
  EXPECT_EQ(totalParameters(arch("vgg11")), 132'863'336);
  EXPECT_EQ(totalParameters(arch("vgg13")), 133'047'848);
  EXPECT_EQ(totalParameters(arch("vgg16")), 138'357'544);
  EXPECT_EQ(totalParameters(arch("vgg19")), 143'667'240);
  EXPECT_EQ(totalParameters(arch("vgg16", {{"batch_norm", "true"}})), 138'365'992);
  EXPECT_EQ(totalParameters(arch("resnet18")), 11'689'512);
  EXPECT_EQ(totalParameters(arch("resnet34")), 21'797'672);
  EXPECT_EQ(totalParameters(arch("resnet50")), 25'557'032);
  EXPECT_EQ(totalParameters(arch("resnet101")), 44'549'160);
  EXPECT_EQ(totalParameters(arch("resnet152")), 60'192'808);
}

TEST(ArchParameters, BertBaseMatchesHuggingFace) {
  // BertModel (embeddings + 12 layers + pooler) is 109,482,240; our head adds a
  // 768x2 classifier. The published figure is "110M".
  const auto total = totalParameters(arch("bert12"));
  EXPECT_EQ(total, 109'482'240 + 768 * 2 + 2);
  EXPECT_NEAR(total / 110e6, 1.0, 0.02);
}

TEST(ArchParameters, Gpt2SmallMatchesPublishedWithoutTheUntiedHead) {
  // GPT-2 small is 124,439,808 parameters with the LM head tied to the token
  // embedding. Pipeline stages cannot share a tensor, so our head is untied:
  // everything except the head's hidden x vocab matrix must equal GPT-2.
  const Arch a = arch("gpt2");
  const auto layers = analyze(a);
  const auto head = layers.back().parameters - 2 * 768;  // minus the final LayerNorm
  EXPECT_EQ(head, 768LL * 50257);
  EXPECT_EQ(totalParameters(a) - head, 124'439'808);
}

// Hydrozoa Table 2 counts the image models with CIFAR-10's 10 classes (except
// VGG19, listed at 1000) and BERT-12 without the pooler. Within 2%.
TEST(ArchParameters, MatchHydrozoaTable2Within2Percent) {
  const Options ten = {{"classes", "10"}};
  EXPECT_NEAR(totalParameters(arch("alexnet", ten)) / 57e6, 1.0, 0.02);
  EXPECT_NEAR(totalParameters(arch("resnet34", ten)) / 21.5e6, 1.0, 0.02);
  EXPECT_NEAR(totalParameters(arch("resnet152", ten)) / 58.5e6, 1.0, 0.02);
  EXPECT_NEAR(totalParameters(arch("vgg19")) / 143.7e6, 1.0, 0.02);
  EXPECT_NEAR(totalParameters(arch("bert12")) / 108.9e6, 1.0, 0.02);
}

// Forward multiply-adds (torchvision's "GFLOPS" column counts MACs) within 5%.
TEST(ArchFlops, MatchTorchvisionMacs) {
  const std::vector<std::pair<std::string, double>> macs = {
      {"alexnet", 0.71e9}, {"vgg11", 7.61e9},  {"vgg16", 15.47e9},   {"vgg19", 19.63e9},
      {"resnet18", 1.81e9}, {"resnet34", 3.66e9}, {"resnet50", 4.09e9}, {"resnet152", 11.51e9}};
  for (const auto& [name, expected] : macs) {
    EXPECT_NEAR(forwardFlops(arch(name)) / 2 / expected, 1.0, 0.05) << name;
  }
}

TEST(ArchShapes, ChainFromInputToClasses) {
  const auto layers = analyze(arch("resnet34"));
  EXPECT_EQ(layers.size(), 1u + 16u + 1u);  // stem, 3+4+6+3 blocks, fc
  EXPECT_EQ(layers.front().input_shape, (Shape{3, 224, 224}));
  EXPECT_EQ(layers.front().output_shape, (Shape{64, 56, 56}));
  EXPECT_EQ(layers[layers.size() - 2].output_shape, (Shape{512, 7, 7}));
  EXPECT_EQ(layers.back().output_shape, (Shape{1000}));
  for (size_t i = 1; i < layers.size(); ++i) EXPECT_EQ(layers[i].input_shape, layers[i - 1].output_shape);
}

TEST(ArchShapes, OutputBytesAreFloat32Outputs) {
  for (const auto& l : analyze(arch("cnn"))) {
    EXPECT_EQ(l.output_bytes, 4 * numel(l.output_shape)) << l.name;
    EXPECT_GE(l.stashed_bytes, l.output_bytes) << l.name;
  }
}

TEST(ArchShapes, FashionCnnLayers) {
  const auto layers = analyze(arch("cnn"));
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[0].output_shape, (Shape{32, 14, 14}));
  EXPECT_EQ(layers[1].output_shape, (Shape{64, 7, 7}));
  EXPECT_EQ(layers[3].output_shape, (Shape{10}));
}

TEST(ArchShapes, TransformersKeepSequenceShape) {
  const Arch a = arch("gpt", {{"layers", "2"}, {"hidden", "64"}, {"heads", "4"}, {"vocab", "256"}, {"seq_len", "32"}});
  const auto layers = analyze(a);
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[0].input_shape, (Shape{32}));
  EXPECT_EQ(layers[1].output_shape, (Shape{32, 64}));
  EXPECT_EQ(layers.back().output_shape, (Shape{32, 256}));
  EXPECT_EQ(a.task.kind, TaskKind::kLanguageModel);
}

TEST(ArchShapes, TinyVariantsAreTiny) {
  EXPECT_LT(totalParameters(arch("resnet18", {{"image_size", "32"}, {"width", "0.25"}, {"classes", "10"}})), 1'000'000);
  EXPECT_LT(totalParameters(arch("vgg11", {{"image_size", "32"}, {"width", "0.125"}, {"hidden", "64"}})), 1'000'000);
}

}  // namespace
}  // namespace hydrozoa::model
