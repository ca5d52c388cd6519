#include "profile/network.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cerrno>


namespace hydrozoa::profile {
namespace {

TEST(FitLine, RecoversALine) {
  double slope = 0, intercept = 0, r2 = 0;
  fitLine({1, 2, 3, 4}, {3, 5, 7, 9}, &slope, &intercept, &r2);
  EXPECT_NEAR(slope, 2, 1e-12);
  EXPECT_NEAR(intercept, 1, 1e-12);
  EXPECT_NEAR(r2, 1, 1e-12);
}

// No process of the probe may outlive it: this test process has no
// children left, running or unreaped.
bool noChildrenLeft() {
  errno = 0;
  return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD;
}

TEST(ProbeNetwork, TwoLocalWorkersOverGloo) {
  NetworkProbeOptions o;
  o.executable = HYDROZOA_BINARY;
  // Sizes over two and a half decades: with 3 repeats on a loaded 2-core
  // machine, 64 KB..4 MB now and then fitted a falling allreduce line.
  o.sizes = {64 * kKB, kMB, 4 * kMB, 16 * kMB};
  o.repeats = 3;
  auto net = probeNetwork(o);
  ASSERT_TRUE(net.ok()) << net.status().message();
  EXPECT_GT(net->bandwidth, 10e6);  // loopback: far above 10 MB/s
  EXPECT_GT(net->latency, 0);
  EXPECT_LT(net->latency, 0.05);
  EXPECT_EQ(net->allreduce_workers, 2);
  EXPECT_GE(net->beta, 0);
  EXPECT_GT(net->alpha + 1 / net->bandwidth, 0);  // a round's time grows with its size
  // The same processes through shared memory: timed, and growing with size
  // at more than 20 MB/s and less than 1 TB/s of copying.
  ASSERT_TRUE(net->shared_memory);
  EXPECT_GT(net->shared_memory->seconds_per_byte, 1e-12);
  EXPECT_LT(net->shared_memory->seconds_per_byte, 5e-8);
  EXPECT_GE(net->shared_memory->seconds_per_allreduce, 0);
  // NOTE [What a message costs the cores]: timed on both sides; sending
  // 64 KB costs the sending thread something, and under 10 ms.
  ASSERT_TRUE(net->messages);
  ASSERT_EQ(net->messages->rows.size(), 4u);  // 8 bytes, and the sizes up to 4 MB
  EXPECT_EQ(net->messages->rows[0].bytes, 8);
  const MessageCpu m = net->messages->at(64 * kKB);
  EXPECT_GT(m.send, 0);
  EXPECT_LT(m.send, 0.01);
  EXPECT_GT(m.receive, 0);
  EXPECT_LT(m.receive, 0.01);
  // NOTE [A message's delivery on busy cores]: timed through the runtime's
  // channels; a message takes time, its mean under a second, the median at
  // most the 90th percentile.
  ASSERT_TRUE(net->delivery);
  EXPECT_EQ(net->delivery->bytes, 4096);
  EXPECT_GT(net->delivery->median, 0);
  EXPECT_LE(net->delivery->median, net->delivery->p90);
  EXPECT_GT(net->delivery->mean, 0);
  EXPECT_LT(net->delivery->mean, 1);
  // The helper threads work for each message (Gloo's, the channels').
  EXPECT_GT(net->delivery->helper_cpu, 0);
  EXPECT_LT(net->delivery->helper_cpu, 0.1);
  EXPECT_TRUE(noChildrenLeft());
}

TEST(ProbeNetwork, ThreeWorkers) {
  NetworkProbeOptions o;
  o.executable = HYDROZOA_BINARY;
  o.workers = 3;
  o.sizes = {256 * kKB, 2 * kMB};
  o.repeats = 2;
  auto net = probeNetwork(o);
  ASSERT_TRUE(net.ok()) << net.status().message();
  EXPECT_EQ(net->allreduce_workers, 3);
  EXPECT_TRUE(net->delivery);  // ranks 0 and 1 time it while rank 2 waits
  EXPECT_TRUE(noChildrenLeft());
}

TEST(ProbeNetwork, WorkerThatCannotStartIsAnErrorWithoutOrphans) {
  NetworkProbeOptions o;
  o.executable = "/nonexistent/hydrozoa";
  o.timeout = 10;
  auto net = probeNetwork(o);
  ASSERT_FALSE(net.ok());
  EXPECT_TRUE(noChildrenLeft());
}

TEST(ProbeNetwork, RejectsBadOptions) {
  NetworkProbeOptions o;
  o.workers = 1;
  EXPECT_FALSE(probeNetwork(o).ok());
  o.workers = 2;
  o.sizes = {kMB};
  EXPECT_FALSE(probeNetwork(o).ok());
}

}  // namespace
}  // namespace hydrozoa::profile
