#include "model/torchscript.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace hydrozoa::model {
namespace {

// The venv's torch (scripts/setup; the one the build links) scripts the module.
constexpr const char* kPython = HYDROZOA_PYTHON;

class TorchScriptImport : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("ts." + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "model.pt").string();
    const std::string script = (dir_ / "make.py").string();
    std::ofstream(script) << "import torch, torch.nn as nn, sys\n"
                             "torch.manual_seed(0)\n"
                             "m = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4*8*8, 5))\n"
                             "torch.jit.script(m).save(sys.argv[1])\n"
                             "with torch.no_grad():\n"
                             "    y = m(torch.ones(2, 1, 8, 8))\n"
                             "print('%.9e %d' % (y.sum().item(), sum(p.numel() for p in m.parameters())))\n";
    const std::string cmd = std::string(kPython) + " " + script + " " + path_ + " 2>&1";
    FILE* f = ::popen(cmd.c_str(), "r");
    ASSERT_NE(f, nullptr);
    char buf[4096] = {0};
    const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    const int rc = ::pclose(f);
    output_ = std::string(buf, n);
    ASSERT_EQ(rc, 0) << kPython << " (scripts/setup makes it) failed: " << output_;
    // The figures are the last line (torch may warn before it).
    const std::string last = output_.substr(output_.find_last_of('\n', output_.size() - 2) + 1);
    ASSERT_EQ(std::sscanf(last.c_str(), "%lf %ld", &expectedSum_, &expectedParams_), 2) << output_;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::string path_, output_;
  double expectedSum_ = 0;
  long expectedParams_ = 0;
};

TEST_F(TorchScriptImport, ChildrenBecomeLayersAndComputeTheSame) {
  auto m = buildModel({path_, {{"input_shape", "1x8x8"}}});
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->layers.size(), 4u);
  EXPECT_EQ(m->layers[0].name, "0");
  EXPECT_EQ(m->layers[3].kind, "script");
  EXPECT_EQ(m->task.classes, 5);  // inferred from the output
  EXPECT_EQ(m->parameterCount(), expectedParams_);
  torch::NoGradGuard guard;
  const double sum = m->forward(torch::ones({2, 1, 8, 8})).sum().item<double>();
  EXPECT_NEAR(sum, expectedSum_, 1e-5 * std::max(1.0, std::fabs(expectedSum_)));
}

TEST_F(TorchScriptImport, TrainingUpdatesTheScriptedWeights) {
  auto m = buildModel({path_, {{"input_shape", "1x8x8"}}});
  ASSERT_TRUE(m.ok());
  torch::optim::SGD sgd(m->parameters(), 0.1);
  const auto x = torch::randn({4, 1, 8, 8});
  const auto before = m->forward(x).detach();
  taskLoss(m->task, m->forward(x), torch::tensor({0, 1, 2, 3})).backward();
  sgd.step();
  EXPECT_FALSE(torch::allclose(before, m->forward(x).detach()));
}

TEST_F(TorchScriptImport, AStageBuildsOnlyItsLayers) {
  auto m = buildModel({path_, {{"input_shape", "1x8x8"}}}, {0, 2, 3});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->layers.size(), 2u);
  EXPECT_EQ(m->first, 2);
}

TEST_F(TorchScriptImport, ClearErrors) {
  auto r = buildModel({path_, {}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("input_shape"), std::string::npos) << r.status().message();

  r = buildModel({path_, {{"input_shape", "3x8x8"}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("fails on an input of shape"), std::string::npos) << r.status().message();

  r = buildModel({path_, {{"input_shape", "1x8x8"}, {"classes", "7"}}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("outputs 5"), std::string::npos) << r.status().message();

  r = buildModel({(dir_ / "missing.pt").string(), {{"input_shape", "1x8x8"}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);

  const std::string junk = (dir_ / "junk.pt").string();
  std::ofstream(junk) << "this is not a zip archive";
  r = buildModel({junk, {{"input_shape", "1x8x8"}}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kParseError);
  EXPECT_NE(r.status().message().find("not a TorchScript module"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace hydrozoa::model
