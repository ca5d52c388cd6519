#include "model/model.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace hydrozoa::model {
namespace {

// Small variants of every zoo model, so building and running them is quick.
Options tiny(const std::string& name) {
  if (name == "alexnet") return {{"image_size", "64"}, {"width", "0.125"}, {"hidden", "64"}, {"classes", "10"}};
  if (name.rfind("vgg", 0) == 0) return {{"image_size", "32"}, {"width", "0.0625"}, {"hidden", "32"}, {"classes", "10"}};
  if (name.rfind("resnet", 0) == 0) return {{"image_size", "32"}, {"width", "0.0625"}, {"classes", "10"}};
  if (name == "bert" || name == "bert24" || name == "gpt") {
    return {{"layers", "2"}, {"hidden", "32"}, {"heads", "2"}, {"vocab", "100"}, {"seq_len", "16"}, {"dropout", "0"}};
  }
  return {};
}

class EveryZooModel : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryZooModel, ModulesMatchTheArchitectureLayerByLayer) {
  const ModelSpec spec{GetParam(), tiny(GetParam())};
  auto m = buildModel(spec, {1, 0, -1});
  ASSERT_TRUE(m.ok()) << m.status().message();
  const auto analysis = analyze(*m->arch);
  ASSERT_EQ(m->layers.size(), analysis.size());
  torch::Tensor x = syntheticInput(m->input, 3);
  for (size_t i = 0; i < m->layers.size(); ++i) {
    std::int64_t params = 0, largest = 0;
    for (const auto& p : m->layers[i].module->parameters()) {
      params += p.numel();
      largest = std::max(largest, p.numel());
    }
    EXPECT_EQ(params, analysis[i].parameters) << GetParam() << " layer " << analysis[i].name;
    EXPECT_EQ(largest, analysis[i].largest_parameter) << GetParam() << " layer " << analysis[i].name;
    EXPECT_EQ(m->layers[i].kind, analysis[i].kind);
    EXPECT_NE(std::find(layerKinds().begin(), layerKinds().end(), analysis[i].kind), layerKinds().end());
    x = m->layers[i].module->forward(x);
    std::vector<std::int64_t> expected = {3};
    expected.insert(expected.end(), analysis[i].output_shape.begin(), analysis[i].output_shape.end());
    EXPECT_EQ(x.sizes().vec(), expected) << GetParam() << " layer " << analysis[i].name;
  }
  const torch::Tensor loss = taskLoss(m->task, x, syntheticLabels(m->input, m->task, 3));
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
  loss.backward();
  for (const auto& p : m->parameters()) EXPECT_TRUE(p.grad().defined());
}

std::vector<std::string> zooNames() {
  std::vector<std::string> names;
  for (const auto& e : zoo()) names.push_back(e.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Zoo, EveryZooModel, ::testing::ValuesIn(zooNames()),
                         [](const auto& info) { return info.param; });

TEST(BuildModel, FullSizeParameterCountsAsPublished) {
  EXPECT_EQ(buildModel({"resnet50", {}})->parameterCount(), 25'557'032);
  EXPECT_EQ(buildModel({"bert12", {}})->parameterCount(), 109'482'240 + 768 * 2 + 2);
}

TEST(BuildModel, AStageHasTheSameWeightsAsThoseLayersOfTheWholeModel) {
  const ModelSpec spec{"resnet18", tiny("resnet18")};
  auto whole = buildModel(spec, {7, 0, -1});
  auto stage = buildModel(spec, {7, 3, 6});
  ASSERT_TRUE(whole.ok() && stage.ok());
  ASSERT_EQ(stage->layers.size(), 4u);
  EXPECT_EQ(stage->first, 3);
  EXPECT_EQ(stage->total_layers, whole->total_layers);
  for (int i = 0; i < 4; ++i) {
    const auto a = whole->layers[3 + i].module->parameters(), b = stage->layers[i].module->parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(torch::equal(a[k], b[k])) << "layer " << 3 + i;
  }
  auto other = buildModel(spec, {8, 3, 6});
  EXPECT_FALSE(torch::equal(other->layers[0].module->parameters()[0], stage->layers[0].module->parameters()[0]));
}

TEST(BuildModel, LayerRangeOutsideTheChainIsAnError) {
  auto r = buildModel({"cnn", {}}, {0, 2, 9});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("outside the model's 0-3"), std::string::npos);
}

TEST(BuildModel, LanguageModelLossIsPerToken) {
  auto m = buildModel({"gpt", tiny("gpt")});
  ASSERT_TRUE(m.ok());
  const auto out = m->forward(syntheticInput(m->input, 2));
  EXPECT_EQ(out.sizes().vec(), (std::vector<std::int64_t>{2, 16, 100}));
  const auto loss = taskLoss(m->task, out, syntheticLabels(m->input, m->task, 2));
  // Untrained logits are near uniform: the loss is close to log(vocab).
  EXPECT_NEAR(loss.item<double>(), std::log(100.0), 1.0);
}

TEST(BuildModel, CausalAttentionIgnoresTheFuture) {
  auto m = buildModel({"gpt", tiny("gpt")});
  ASSERT_TRUE(m.ok());
  m->train(false);
  torch::NoGradGuard guard;
  auto a = syntheticInput(m->input, 1);
  auto b = a.clone();
  b.index_put_({0, 15}, (b.index({0, 15}) + 1) % 100);  // change only the last token
  const auto ya = m->forward(a), yb = m->forward(b);
  EXPECT_TRUE(torch::allclose(ya.narrow(1, 0, 15), yb.narrow(1, 0, 15)));
  EXPECT_FALSE(torch::allclose(ya.narrow(1, 15, 1), yb.narrow(1, 15, 1)));
}

}  // namespace
}  // namespace hydrozoa::model
