#include "model/zoo.h"

#include <gtest/gtest.h>

namespace hydrozoa::model {
namespace {

TEST(Zoo, UnknownModelListsTheZoo) {
  auto r = buildArch({"resnet35", {}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.status().message().find("\"resnet35\""), std::string::npos);
  EXPECT_NE(r.status().message().find("resnet34"), std::string::npos);
}

TEST(Zoo, AliasesResolve) {
  EXPECT_EQ(buildArch({"bert12", {}})->name, "bert");
  EXPECT_EQ(buildArch({"gpt2", {}})->name, "gpt");
  EXPECT_EQ(buildArch({"fashion_cnn", {}})->name, "cnn");
}

TEST(Zoo, UnknownOptionNamesKnownOnes) {
  auto r = buildArch({"resnet18", {{"imagesize", "32"}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown option \"imagesize\""), std::string::npos);
  EXPECT_NE(r.status().message().find("image_size"), std::string::npos);
}

TEST(Zoo, ZeroNegativeAndNonNumericSizesAreErrors) {
  for (const auto& [k, v] : Options{{"image_size", "0"}, {"classes", "-3"}, {"width", "abc"}, {"classes", "1"}}) {
    auto r = buildArch({"resnet18", {{k, v}}});
    EXPECT_FALSE(r.ok()) << k << "=" << v;
    EXPECT_NE(r.status().message().find(k), std::string::npos) << r.status().message();
  }
}

TEST(Zoo, ShapesThatDoNotChainAreAUserError) {
  auto r = buildArch({"alexnet", {{"image_size", "32"}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("image_size"), std::string::npos);
}

TEST(Zoo, HeadsMustDivideHidden) {
  auto r = buildArch({"bert", {{"hidden", "100"}, {"heads", "3"}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("heads"), std::string::npos);
}

TEST(Zoo, ResolvedOptionsAreRecorded) {
  auto a = buildArch({"cnn", {{"width", "0.5"}}});
  ASSERT_TRUE(a.ok());
  bool found = false;
  for (const auto& [k, v] : a->options) found |= (k == "width" && v == "0.5");
  EXPECT_TRUE(found);
}

TEST(Zoo, EveryEntryBuildsWithDefaults) {
  for (const auto& e : zoo()) {
    auto a = buildArch({e.name, {}});
    EXPECT_TRUE(a.ok()) << e.name << ": " << a.status().message();
    EXPECT_FALSE(e.option_names.empty()) << e.name;
  }
}

TEST(ParseOption, KeyValue) {
  EXPECT_EQ(parseOption("image_size=32")->second, "32");
  EXPECT_FALSE(parseOption("image_size").ok());
  EXPECT_FALSE(parseOption("=3").ok());
}

}  // namespace
}  // namespace hydrozoa::model
