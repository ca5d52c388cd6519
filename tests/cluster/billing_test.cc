#include "cluster/billing.h"

#include <gtest/gtest.h>

#include "cluster/job_spec.h"

namespace hydrozoa::cluster {
namespace {

TEST(Billing, RoundsToThePlatformsUnit) {
  EXPECT_DOUBLE_EQ(billedSeconds(0.2, BillingUnit::kSecond), 1);
  EXPECT_DOUBLE_EQ(billedSeconds(61.01, BillingUnit::kSecond), 62);
  EXPECT_DOUBLE_EQ(billedSeconds(1.0004, BillingUnit::kMillisecond), 1.001);
  EXPECT_DOUBLE_EQ(billedSeconds(10, BillingUnit::kHour), 3600);  // a VM's first hour is owed at once
  EXPECT_DOUBLE_EQ(billedSeconds(3601, BillingUnit::kHour), 7200);
  EXPECT_DOUBLE_EQ(billedSeconds(-1, BillingUnit::kSecond), 0);
}

TEST(Billing, EachWorkerIsBilledOnlyWhileItRuns) {
  Ledger ledger(BillingUnit::kSecond);
  EXPECT_DOUBLE_EQ(ledger.cost(100), 0);  // nothing started: nothing owed
  ledger.start(0, 10, 3.6);               // $3.60/h = $0.001/s
  ledger.start(1, 20, 7.2);
  EXPECT_NEAR(ledger.cost(30), 0.020 + 0.020, 1e-12);
  ledger.stop(0, 40);                     // released: its bill stops growing
  EXPECT_NEAR(ledger.cost(0, 1000), 0.030, 1e-12);
  EXPECT_NEAR(ledger.cost(1, 50), 0.060, 1e-12);
  EXPECT_FALSE(ledger.running(0));
  ledger.start(0, 100, 3.6);              // started again: billed again
  EXPECT_NEAR(ledger.cost(0, 110), 0.040, 1e-12);
  EXPECT_DOUBLE_EQ(ledger.workerSeconds(110), 30 + 10 + 90);
  const Json j = ledger.toJson(110);
  EXPECT_EQ(j["unit"], "per_second");
  EXPECT_EQ(j["workers"].size(), 3u);
}

// Slurm's sacct replaces the coordinator's clock run by run, where the
// numbers of runs agree; a run still going and a worker whose runs do not
// match keep the clock.
TEST(Billing, AccountedTimesReplaceTheClockRunByRun) {
  Ledger ledger(BillingUnit::kSecond);
  ledger.start(0, 10, 3.6);
  ledger.stop(0, 40);  // 30 s on the clock
  ledger.start(0, 50, 3.6);
  ledger.stop(0, 60);  // 10 s
  ledger.start(1, 10, 3.6);
  ledger.stop(1, 30);  // 20 s
  ledger.start(2, 10, 3.6);  // still running
  EXPECT_EQ(ledger.toJson(100)["source"], "the coordinator's clock");
  const int n = ledger.useAccounted({{0, {32, 11}}, {1, {21, 5}}, {2, {7}}, {9, {1}}}, "Slurm's accounting (sacct)");
  EXPECT_EQ(n, 2);  // worker 0's two runs; worker 1 has one run, not two; worker 2 still runs
  EXPECT_DOUBLE_EQ(ledger.workerSeconds(100), 32 + 11 + 20 + 90);
  const Json j = ledger.toJson(100);
  EXPECT_EQ(j["source"], "Slurm's accounting (sacct)");
  EXPECT_NEAR(ledger.cost(0, 100), 0.043, 1e-12);
  // Nothing corrected: the clock stays the source.
  Ledger other;
  other.start(0, 0, 1);
  other.stop(0, 5);
  EXPECT_EQ(other.useAccounted({}, "x"), 0);
  EXPECT_EQ(other.toJson(10)["source"], "the coordinator's clock");
}

TEST(Billing, UnknownUnitsAreErrors) {
  EXPECT_EQ(*parseBillingUnit("per_hour", "x"), BillingUnit::kHour);
  auto bad = parseBillingUnit("per_fortnight", "aci.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("per_second, per_millisecond or per_hour"), std::string::npos);
}

TEST(StartDelay, ParsesDrawsAndRoundTrips) {
  auto fixed = parseStartDelay("30s", "d");
  ASSERT_TRUE(fixed.ok());
  EXPECT_DOUBLE_EQ(drawStartDelay(*fixed, 1), 30);
  auto uniform = parseStartDelay("uniform 20s 1min", "d");
  ASSERT_TRUE(uniform.ok()) << uniform.status().message();
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    const double d = drawStartDelay(*uniform, seed);
    EXPECT_GE(d, 20);
    EXPECT_LE(d, 60);
    EXPECT_EQ(d, drawStartDelay(*uniform, seed));  // deterministic
  }
  auto normal = parseStartDelay("normal 1s 5s", "d");
  ASSERT_TRUE(normal.ok());
  for (std::uint64_t seed = 0; seed < 50; ++seed) EXPECT_GE(drawStartDelay(*normal, seed), 0);
  EXPECT_EQ(formatStartDelay(*uniform), "uniform 20s 60s");
  EXPECT_TRUE(parseStartDelay(formatStartDelay(*uniform), "d").ok());
  for (const char* bad : {"", "soon", "uniform 5s", "uniform 9s 3s", "gamma 1s 2s", "fixed 1s 2s"}) {
    auto r = parseStartDelay(bad, "cluster.start_delay");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("uniform 20s 60s"), std::string::npos);
  }
}

TEST(StartDelay, TheJobSpecReadsContainerSettings) {
  auto j = parseYaml("model: cnn\ncluster: {launcher: container, bandwidth: 50MB/s, start_delay: uniform 1s 2s, "
                     "memory_limit: 512MB, cpu_limit: 1.5}\n", "job.yaml");
  ASSERT_TRUE(j.ok());
  auto s = parseJobSpec(*j, "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->launcher, "container");
  EXPECT_DOUBLE_EQ(*s->bandwidth, 50e6);
  EXPECT_EQ(s->start_delay->distribution, "uniform");
  EXPECT_DOUBLE_EQ(*s->memory_limit, 512e6);
  EXPECT_DOUBLE_EQ(*s->cpu_limit, 1.5);
  auto again = parseJobSpec(jobSpecToJson(*s), "run/job.yaml");  // what a run directory holds
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->start_delay->b, 2);
  auto bad = parseYaml("model: cnn\ncluster: {launcher: kubernetes}\n", "job.yaml");
  auto r = parseJobSpec(*bad, "job.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("use auto, local, container, function or slurm"), std::string::npos);
}

}  // namespace
}  // namespace hydrozoa::cluster

namespace hydrozoa::cluster {
namespace {

// Functions: per millisecond, and a fee per invocation on top.
TEST(Ledger, FunctionsPayAFeePerInvocation) {
  Ledger l(BillingUnit::kMillisecond, 0.0000002);
  l.start(0, 0, 3.6);  // $0.001 a second
  l.stop(0, 1.0004);
  l.start(0, 2, 3.6);  // a second invocation of the same worker
  l.stop(0, 3);
  EXPECT_NEAR(l.cost(10), 0.001 * 1.001 + 0.001 + 2 * 0.0000002, 1e-12);
  const Json j = l.toJson(10);
  EXPECT_EQ(j["requests"], 2);
  EXPECT_EQ(j["request_fee"], 0.0000002);
  EXPECT_FALSE(Ledger(BillingUnit::kSecond).toJson(0).contains("requests"));
}

}  // namespace
}  // namespace hydrozoa::cluster
