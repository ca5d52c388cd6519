// Model-selection grids (select/grid.h): a base job and the values to try,
// expanded in order with each point checked as a job spec; every mistake
// one line naming the file, the field and (for a bad point) the point.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "select/grid.h"

namespace hydrozoa::select {
namespace {

const char* kJob = R"js({"name": "mlps", "model": {"name": "mlp", "options": {"hidden": 32, "depth": 2}},
  "data": {"dataset": "synthetic", "synthetic_train": 96, "synthetic_test": 24},
  "training": {"epochs": 1, "global_batch": 24, "optimizer": {"name": "sgd", "lr": 0.1}}})js";

Json grid(const std::string& axes) {
  return Json::parse(std::string(R"js({"job": )js") + kJob + R"js(, "grid": )js" + axes + "}");
}

std::string error(const Json& j) {
  auto g = parseGrid(j, "g.yaml", ".");
  if (!g.ok()) return g.status().message();
  auto t = expandGrid(*g);
  return t.ok() ? "" : t.status().message();
}

TEST(Grid, ExpandsTheProductLastFieldFastestEachPointAJobSpec) {
  auto g = parseGrid(grid(R"js({"training.optimizer.lr": [0.1, 0.01], "model.options.hidden": [16, 32, 64]})js"),
                     "g.yaml", ".");
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->name, "mlps");
  EXPECT_EQ(g->metric, "test_accuracy");
  auto tasks = expandGrid(*g);
  ASSERT_TRUE(tasks.ok()) << tasks.status().message();
  ASSERT_EQ(tasks->size(), 6u);
  // Fields in the order of their paths (model.… before training.…), the last fastest.
  EXPECT_EQ((*tasks)[0].label, "hidden=16 lr=0.1");
  EXPECT_EQ((*tasks)[1].label, "hidden=16 lr=0.01");
  EXPECT_EQ((*tasks)[5].label, "hidden=64 lr=0.01");
  EXPECT_DOUBLE_EQ((*tasks)[3].spec.optimizer.lr, 0.01);
  EXPECT_EQ((*tasks)[3].spec.name, "mlps-3");
  bool found = false;
  for (const auto& [k, v] : (*tasks)[3].spec.model_options) found |= k == "hidden" && v == "32";
  EXPECT_TRUE(found);
  EXPECT_EQ((*tasks)[3].point["model.options.hidden"], 32);
  // Fields that end alike are labelled by their whole path.
  auto same = parseGrid(grid(R"js({"model.name": ["mlp"], "training.optimizer.name": ["sgd", "adam"]})js"), "g",
                        ".");
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_EQ((*expandGrid(*same))[1].label, "model.name=mlp training.optimizer.name=adam");
  // Whole models: their names and options.
  auto models = parseGrid(
      grid(R"js({"model": [{"name": "cnn", "options": {"width": 1, "hidden": 128}}, {"name": "mlp"}]})js"), "g", ".");
  ASSERT_TRUE(models.ok()) << models.status().message();
  EXPECT_EQ((*expandGrid(*models))[0].label, "model=cnn(hidden=128 width=1)");
  EXPECT_EQ((*expandGrid(*models))[1].label, "model=mlp()");
}

TEST(Grid, ABaseFileBesideTheGrid) {
  const auto dir = std::filesystem::temp_directory_path() / ("hz-grid-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "base.yaml") << kJob;
  std::ofstream(dir / "grid.yaml") << "base: base.yaml\nmetric: loss\ngrid:\n  training.seed: [1, 2]\n";
  auto g = loadGrid((dir / "grid.yaml").string());
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->metric, "loss");
  auto tasks = expandGrid(*g);
  ASSERT_TRUE(tasks.ok()) << tasks.status().message();
  EXPECT_EQ((*tasks)[1].spec.seed, 2u);
  std::filesystem::remove_all(dir);
}

TEST(Grid, MistakesAreOneLineNamingTheField) {
  EXPECT_NE(error(grid("{}")).find("g.yaml: grid: expected the fields to vary"), std::string::npos);
  EXPECT_NE(error(grid(R"js({"training.seed": []})js")).find("training.seed has no values"), std::string::npos);
  EXPECT_NE(error(grid(R"js({"training.seed": 3})js")).find("expected a list of the values"), std::string::npos);
  EXPECT_NE(error(grid(R"js({"training.epochs.x": [1]})js")).find("training.epochs is not a section"),
            std::string::npos);
  EXPECT_NE(error(grid(R"js({"training..lr": [1]})js")).find("is not a dotted path"), std::string::npos);
  // A misspelt field is the job spec's unknown key, with the point.
  const std::string lrr = error(grid(R"js({"training.optimizer.lrr": [0.1]})js"));
  EXPECT_NE(lrr.find("point 0: lrr=0.1"), std::string::npos) << lrr;
  EXPECT_NE(lrr.find("lrr"), std::string::npos) << lrr;
  // A value the job spec refuses, named with its point.
  const std::string zero = error(grid(R"js({"training.epochs": [1, 0]})js"));
  EXPECT_NE(zero.find("point 1: epochs=0"), std::string::npos) << zero;
  Json j = grid(R"js({"training.seed": [1]})js");
  j["sweep"] = 1;
  EXPECT_NE(error(j).find("unknown key \"sweep\""), std::string::npos);
  j = grid(R"js({"training.seed": [1]})js");
  j["metric"] = "f1";
  EXPECT_NE(error(j).find("g.yaml: metric is"), std::string::npos) << error(j);
  j["metric"] = "loss";
  j["base"] = "x.yaml";
  EXPECT_NE(error(j).find("one of the two"), std::string::npos);
  Json big = Json::object();
  for (const char* k : {"training.seed", "training.epochs"}) {
    Json v = Json::array();
    for (int i = 1; i <= 40; ++i) v.push_back(i);
    big[k] = v;
  }
  EXPECT_NE(error(grid(big.dump())).find("more than 1024 points"), std::string::npos);
}

}  // namespace
}  // namespace hydrozoa::select
