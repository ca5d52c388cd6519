#include "profile/pipedream.h"

#include <gtest/gtest.h>

#include "core/files.h"

namespace hydrozoa::profile {
namespace {

const std::string kFixture = std::string(HYDROZOA_TEST_DATA_DIR) + "/pipedream_small.txt";

Result<Profile> importText(const std::string& text) { return importPipeDreamGraph(text, "graph.txt", 1); }

TEST(PipeDreamImport, ChainIsTopologicalWithoutInputs) {
  auto p = loadProfile(kFixture, 32);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->numLayers(), 6u);
  EXPECT_EQ(p->layers[0].name.rfind("node2 ", 0), 0u);
  EXPECT_EQ(p->layers[5].name.rfind("node7 ", 0), 0u);
  EXPECT_EQ(p->source, "pipedream");
  ASSERT_EQ(p->measurements.size(), 1u);
  EXPECT_EQ(p->measurements[0].microbatch_size, 32);
  // The Input node is the data batch.
  EXPECT_EQ(p->measurements[0].input_bytes, 3000);
  EXPECT_EQ(p->layers[1].parameter_bytes, 0);
  EXPECT_EQ(p->layers[5].parameter_bytes, 320040);
}

TEST(PipeDreamImport, TimesAndBoundaryBytesIncludeSkipEdges) {
  auto p = loadProfile(kFixture, 1);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const auto& c = p->measurements[0].layers;
  const std::vector<double> fwd = {1.0, 0.1, 2.0, 0.0, 0.0, 0.5};
  const std::vector<double> bwd = {2.0, 0.1, 4.0, 0.0, 0.0, 1.0};
  // After node4, its 8000 bytes go to node5 and node6; after node5 both node4's
  // and node5's outputs are still needed by node6. node6's list is summed.
  const std::vector<Bytes> boundary = {16000, 16000, 8000, 8004, 8000, 40};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_DOUBLE_EQ(c[i].forward_ms, fwd[i]) << i;
    EXPECT_DOUBLE_EQ(c[i].backward_ms, bwd[i]) << i;
    EXPECT_EQ(c[i].output_bytes, boundary[i]) << i;
    EXPECT_GE(c[i].stashed_bytes, c[i].output_bytes) << i;
  }
}

TEST(PipeDreamImport, DetectedByContent) {
  EXPECT_TRUE(looksLikePipeDreamGraph(*readTextFile(kFixture)));
  EXPECT_FALSE(looksLikePipeDreamGraph("{\"schema\": 1}"));
}

TEST(PipeDreamImport, MalformedLinesNameTheLine) {
  const std::string good = "node1 -- A -- forward_compute_time=1, backward_compute_time=1, activation_size=1, parameter_size=1\n";
  struct Bad {
    std::string text, expect;
  };
  for (const Bad& b : std::vector<Bad>{
           {good + "node2 -- B -- forward_compute_time=x, backward_compute_time=1, activation_size=1, parameter_size=1\n",
            "graph.txt:2: forward_compute_time=x"},
           {good + "node2 -- B -- forward_compute_time=1, activation_size=1, parameter_size=1\n",
            "graph.txt:2: missing backward_compute_time"},
           {good + "node2 -- B\n", "graph.txt:2: bad node line"},
           {good + "\tnode1 -- node9\n", "graph.txt:2: edge names node \"node9\""},
           {good + "\tnode1\n", "graph.txt:2: bad edge line"},
           {good + good, "graph.txt:2: node \"node1\" is defined twice"},
           {good + "node2 -- B -- forward_compute_time=1, backward_compute_time=1, activation_size=[1; 2, parameter_size=1\n",
            "no closing ]"},
           {good + "node2 -- B -- forward_compute_time=-1, backward_compute_time=1, activation_size=1, parameter_size=1\n",
            "forward_compute_time=-1 is out of range; expected milliseconds from 0"},
           {good + "node2 -- B -- forward_compute_time=1, backward_compute_time=1, activation_size=1, parameter_size=1\n"
                   "\tnode1 -- node2\n\tnode2 -- node1\n",
            "cycle"},
       }) {
    auto r = importText(b.text);
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_EQ(r.status().code(), ErrorCode::kParseError);
    EXPECT_NE(r.status().message().find(b.expect), std::string::npos) << r.status().message();
  }
}

TEST(PipeDreamImport, TruncatedFileFailsCleanly) {
  const std::string text = *readTextFile(kFixture);
  // Cut in the middle of the second line.
  auto r = importText(text.substr(0, text.find('\n') + 40));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("graph.txt:2"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace hydrozoa::profile
