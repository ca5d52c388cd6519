// Reliable and transient tiers in live runs (docs/spot.md, "Live tiers";
// NOTE [Evicting at a step boundary] in cluster/tier_driver.cc), caused for
// real: a replayed spot market rises above the bid and the transient
// worker leaves at a step boundary (with a notice) or is killed (without
// one), then comes back when the price falls; every step is done once and
// the losses are those of a run that never lost it.
#include <fmt/format.h>

#include <cmath>
#include <fstream>

#include "integration/harness.h"

namespace hydrozoa {
namespace {

using testing::Outcome;
using testing::runHydrozoa;
using testing::ScratchDir;

// 700 steps of 24 samples (about 6 ms each here), one reliable and one
// transient replica of 3 microbatches of 4 (6 for the reliable one alone).
// A learning rate low enough that the float rounding of another sum order
// stays within 1e-5 of the loss over the run (at 0.05 with momentum 0.9 it
// grows past 1e-4 after some 700 steps of memorising random labels).
std::string tierJob(const std::string& tiers) {
  return "name: tiers\n"
         "model: {name: mlp, options: {hidden: 256, depth: 2}}\n"
         "data: {dataset: synthetic, synthetic_train: 8400, synthetic_test: 48}\n"
         "training: {epochs: 2, global_batch: 24, seed: 5, eval: false,\n"
         "           optimizer: {name: sgd, lr: 0.02, momentum: 0.5}}\n"
         "cluster: {workers: 2, bandwidth: 1Gbit/s, launcher: local" + tiers + "}\n"
         "plan: {data_parallel: 2, stages: 1, microbatches: 3}\n";
}

// The price is 0.05 $/h, above the bid (0.199, on demand) from trace
// minute `from` to `to`, 0.05 after.
void writeTrace(const std::filesystem::path& path, int from, int to) {
  auto at = [](int minute) { return fmt::format("2016-03-14T{:02d}:{:02d}:00Z", minute / 60, minute % 60); };
  std::ofstream(path) << fmt::format(
      R"({{"SpotPriceHistory": [
  {{"AvailabilityZone": "us-east-1a", "InstanceType": "c4.xlarge", "SpotPrice": "0.05", "Timestamp": "{}"}},
  {{"AvailabilityZone": "us-east-1a", "InstanceType": "c4.xlarge", "SpotPrice": "1.5", "Timestamp": "{}"}},
  {{"AvailabilityZone": "us-east-1a", "InstanceType": "c4.xlarge", "SpotPrice": "0.05", "Timestamp": "{}"}}],
 "OnDemandPrices": {{"c4.xlarge": 0.199}}}})",
      at(0), at(from), at(to));
}

std::vector<Json> eventsOf(const std::string& run, const std::string& name) {
  std::vector<Json> out;
  for (const Json& l : testing::metrics(run)) {
    if (l.value("event", "") == name) out.push_back(l);
  }
  return out;
}

// Every step's loss as the run without tiers had it (the same microbatches
// in another sum order: within float rounding).
void expectTheSameLosses(const ScratchDir& dir) {
  const auto a = testing::stepLosses(dir / "whole"), b = testing::stepLosses(dir / "run");
  ASSERT_EQ(a.size(), 700u);
  ASSERT_EQ(b.size(), 700u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * std::fabs(a[i])) << "step " << i + 1;
}

// One trace minute every 25 ms of wall time: the price is above the bid
// from 0.25 s into the training to 0.75 s.
constexpr const char* kTiers = ", tiers: {reliable: 1, transient: 1, spot_trace: trace.json, speed: 2400";

TEST(Tiers, AnEvictedWorkerLeavesAtAStepBoundaryAndComesBackWithNothingLost) {
  ScratchDir dir;
  writeTrace(dir / "trace.json", 10, 30);
  std::ofstream(dir / "whole.yaml") << tierJob("");
  std::ofstream(dir / "job.yaml") << tierJob(std::string(kTiers) + ", notice: 3s}");
  Outcome r = runHydrozoa(dir.path().string(), {"train", "whole.yaml", "--no-progress", "--out", "whole"});
  ASSERT_EQ(r.code, 0) << r.err;
  r = runHydrozoa(dir.path().string(), {"train", "job.yaml", "--out", "run", "--max-recoveries", "0"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("above the bid"), std::string::npos) << r.err;
  ASSERT_EQ(eventsOf(dir / "run", "eviction_notice").size(), 1u);
  const auto left = eventsOf(dir / "run", "transient_tier_left");
  const auto back = eventsOf(dir / "run", "transient_tier_back");
  ASSERT_EQ(left.size(), 1u);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(left[0]["replicas"], 1);
  EXPECT_EQ(back[0]["replicas"], 2);
  EXPECT_LT(left[0]["step"].get<int>(), back[0]["step"].get<int>());
  EXPECT_TRUE(eventsOf(dir / "run", "worker_lost").empty());  // left in time: nobody killed
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["status"], "completed");
  const Json& tiers = (*summary)["tiers"];
  EXPECT_EQ(tiers["eviction_notices"], 1);
  EXPECT_EQ(tiers["workers_taken"], 0);
  EXPECT_EQ(tiers["returns"], 1);
  EXPECT_GT(tiers["trace_hours"].get<double>(), 1);
  // The reliable worker at most on demand all the time (it is not billed
  // while the generations change), the transient one at 0.05 or 1.5 $/h.
  const double hours = tiers["trace_hours"].get<double>();
  EXPECT_GT(tiers["usd"]["reliable"].get<double>(), 0);
  EXPECT_LE(tiers["usd"]["reliable"].get<double>(), hours * 0.199 + 1e-9);
  EXPECT_GT(tiers["usd"]["transient"].get<double>(), 0);
  EXPECT_NEAR(tiers["all_on_demand_usd"].get<double>(), 2 * hours * 0.199, 1e-9);
  expectTheSameLosses(dir);
  EXPECT_TRUE(testing::noWorkersLeft(dir / "run"));
}

TEST(Tiers, AWorkerEvictedWithoutNoticeIsRecoveredFromTheReliableReplica) {
  ScratchDir dir;
  writeTrace(dir / "trace.json", 10, 30);
  std::ofstream(dir / "whole.yaml") << tierJob("");
  std::ofstream(dir / "job.yaml") << tierJob(std::string(kTiers) + ", notice: 0}");
  Outcome r = runHydrozoa(dir.path().string(), {"train", "whole.yaml", "--no-progress", "--out", "whole"});
  ASSERT_EQ(r.code, 0) << r.err;
  // With recovery off: the spot market's take is not a failure.
  r = runHydrozoa(dir.path().string(), {"train", "job.yaml", "--no-progress", "--out", "run", "--max-recoveries",
                                        "0"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto recovered = eventsOf(dir / "run", "recovered");
  ASSERT_EQ(recovered.size(), 1u);
  EXPECT_EQ(recovered[0]["restored_from"], "live replicas");
  EXPECT_EQ(recovered[0]["lost_steps"], 0);
  EXPECT_EQ(recovered[0].value("evicted", false), true);
  EXPECT_EQ(eventsOf(dir / "run", "transient_tier_back").size(), 1u);
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["status"], "completed");
  EXPECT_EQ((*summary)["tiers"]["workers_taken"], 1);
  expectTheSameLosses(dir);
}

TEST(Tiers, BadTiersOnTheCommandLineAreOneLineEach) {
  ScratchDir dir;
  writeTrace(dir / "trace.json", 10, 30);
  std::ofstream(dir / "job.yaml") << tierJob("");
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--tiers", "reliable=0,transient=2", "--spot-trace", "trace.json"}, "leaves no reliable worker"},
      {{"--spot-trace", "trace.json"}, "give --tiers"},
      {{"--tiers", "reliable=1,transient=1"}, "spot_trace"},
      {{"--tiers", "reliable=1,transient=1", "--spot-trace", "trace.json", "--stages", "2"}, "stages: 1"},
      {{"--tiers", "reliable=1,transient=1", "--spot-trace", "missing.json"}, "missing.json"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"train", "job.yaml", "--no-progress", "--out", "bad"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const Outcome r = runHydrozoa(dir.path().string(), args);
    EXPECT_NE(r.code, 0) << c.says;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
  // A market the trace has no records for.
  std::ofstream(dir / "job2.yaml") << tierJob(std::string(kTiers) + ", market: p2.xlarge}");
  const Outcome r = runHydrozoa(dir.path().string(), {"train", "job2.yaml", "--no-progress", "--out", "bad2"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("no price records for p2.xlarge"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hydrozoa
