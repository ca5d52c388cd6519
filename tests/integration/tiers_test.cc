// Reliable and transient tiers in live runs (docs/spot.md, "Live tiers";
// NOTE [Evicting at a step boundary] in cluster/tier_driver.cc), caused for
// real: a replayed spot market rises above the bid and the transient
// worker leaves at a step boundary (with a notice) or is killed (without
// one), then comes back when the price falls; every step is done once and
// the losses are those of a run that never lost it.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "integration/harness.h"

namespace hydrozoa {
namespace {

using testing::Outcome;
using testing::runHydrozoa;
using testing::ScratchDir;

// `epochs` of 80 steps of 24 samples (about 11 ms each here: a stop agreed
// on lies half a second of steps ahead, NOTE [Agreeing on a step]), one
// reliable and one transient replica of 3 microbatches of 4 (6 for the
// reliable one alone). Three epochs where the transient worker must come
// back by joining the running one: it is started when the price falls and
// joins once running (seconds on a loaded machine), while the reliable one
// trains on; two epochs were too few beside the Slurm tests.
std::string tierJob(const std::string& tiers, int epochs = 2) {
  return "name: tiers\n"
         "model: {name: mlp, options: {hidden: 1024, depth: 2}}\n"
         "data: {dataset: synthetic, synthetic_train: 1920, synthetic_test: 48}\n"
         "training: {epochs: " + std::to_string(epochs) + ", global_batch: 24, seed: 5, eval: false,\n"
         "           optimizer: {name: sgd, lr: 0.02, momentum: 0.5}}\n"
         "cluster: {workers: 2, bandwidth: 1Gbit/s, launcher: local" + tiers + "}\n"
         "plan: {data_parallel: 2, stages: 1, microbatches: 3}\n";
}

constexpr size_t kStepsPerEpoch = 80;
constexpr int kJoinEpochs = 3;

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

size_t countOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::vector<Json> eventsOf(const std::string& run, const std::string& name) {
  std::vector<Json> out;
  for (const Json& l : testing::metrics(run)) {
    if (l.value("event", "") == name) out.push_back(l);
  }
  return out;
}

// Runs whole.yaml and job.yaml (with `args`) into dir/whole and dir/run,
// recording the samples each worker takes at each step.
Outcome runBoth(const ScratchDir& dir, const std::vector<std::string>& args) {
  ::setenv("HYDROZOA_RECORD_SAMPLES", "1", 1);
  Outcome r = runHydrozoa(dir.path().string(), {"train", "whole.yaml", "--no-progress", "--out", "whole"});
  if (r.code == 0) {
    std::vector<std::string> all = {"train", "job.yaml", "--out", "run", "--max-recoveries", "0"};
    all.insert(all.end(), args.begin(), args.end());
    r = runHydrozoa(dir.path().string(), all);
  }
  ::unsetenv("HYDROZOA_RECORD_SAMPLES");
  return r;
}

// One trace minute every 25 ms of wall time: the price is above the bid
// from 0.25 s after the first step to 0.75 s (the market's clock starts
// with the first step done).
constexpr const char* kTiers = ", tiers: {reliable: 1, transient: 1, spot_trace: trace.json, speed: 2400";
constexpr const char* kAllTransient =
    ", tiers: {reliable: 0, transient: 2, spot_trace: trace.json, speed: 2400, checkpoint_restart: true";

// runBoth() of the job without tiers and with `tiers` (cluster.tiers, as
// kTiers + "}"), on a trace whose price is above the bid from trace minute
// 10 to 30.
Outcome runTiered(const ScratchDir& dir, const std::string& tiers, const std::vector<std::string>& args = {},
                  int epochs = 2, int spikeFrom = 10, int spikeTo = 30) {
  writeTrace(dir / "trace.json", spikeFrom, spikeTo);
  std::ofstream(dir / "whole.yaml") << tierJob("", epochs);
  std::ofstream(dir / "job.yaml") << tierJob(tiers, epochs);
  return runBoth(dir, args);
}

// Each global step's samples, over every worker of every generation (from
// $HYDROZOA_RECORD_SAMPLES: "global_step epoch replica id..."; a step that
// a taken worker began and the next generation did again counts once).
std::map<std::int64_t, std::set<std::int64_t>> samplesByStep(const std::filesystem::path& run) {
  std::map<std::int64_t, std::set<std::int64_t>> out;
  for (const testing::SampleRecord& r : testing::recordedSamples(run)) out[r.step].insert(r.ids.begin(), r.ids.end());
  return out;
}

// The run with tiers trained as the run without: every step took the same
// samples, and had the same loss: to the bit until the tier first changed
// at step `changed`, within 1e-5 for the 40 steps after, and within 5e-4
// after those (the same microbatches, but the reliable replica alone sums
// 6 of them where two replicas summed 3 each and then added: float
// rounding, which the training of random labels amplifies step by step. On
// Debian's libtorch 1.13 (OpenBLAS): 7e-8 at most over 160 steps, up to
// 3e-5 by step 240 in one CI run. On PyTorch 2.11's wheel (MKL),
// 2026-12-07: 2.4e-5 to 4.8e-5 at steps 125-160 in two tests of one CI run,
// 1.1e-4 to 1.6e-4 at steps 196-229 in another run, growing with the steps
// since the change. A microbatch lost or counted twice is 1e-3 at once,
// which the first 40 steps' bound catches, and the samples of every step
// are compared exactly below).
// A step that the taken worker finished but never reported has the other
// replica's loss alone, marked partial (NOTE [Recovering from a lost
// worker]): not compared.
void expectTheSameTraining(const ScratchDir& dir, std::int64_t changed, int epochs = 2) {
  const size_t steps = kStepsPerEpoch * static_cast<size_t>(epochs);
  const auto a = testing::stepLosses(dir / "whole"), b = testing::stepLosses(dir / "run");
  ASSERT_EQ(a.size(), steps);
  ASSERT_EQ(b.size(), steps);
  ASSERT_GT(changed, 0);
  std::set<size_t> partial;
  for (const Json& l : testing::metrics(dir / "run")) {
    if (l.value("partial", false)) partial.insert(l["step"].get<size_t>() - 1);
  }
  EXPECT_LE(partial.size(), 1u);
  for (size_t i = 0; i < a.size(); ++i) {
    if (partial.count(i)) continue;
    const auto step = static_cast<std::int64_t>(i);
    const double bound = step < changed ? 1e-12 : step < changed + 40 ? 1e-5 : 5e-4;
    EXPECT_NEAR(a[i], b[i], bound * std::fabs(a[i])) << "step " << i + 1 << " (the tier changed at " << changed << ")";
  }
  const auto want = samplesByStep(dir / "whole"), got = samplesByStep(dir / "run");
  ASSERT_EQ(want.size(), steps);
  ASSERT_EQ(got.size(), steps);
  for (const auto& [step, ids] : want) {
    ASSERT_EQ(ids.size(), 24u) << "step " << step;
    EXPECT_EQ(got.count(step) ? got.at(step) : std::set<std::int64_t>{}, ids) << "step " << step;
  }
}

// NOTE [Agreeing on a step], caused as well: the reliable worker hears of
// the leave 1 s late, after it has begun the step the others stop at, so
// the step moves for all (a notice of 8 s: in CI the step moved once more,
// by a wider margin, and a 3 s deadline came first).
TEST(Tiers, AnEvictedWorkerLeavesAtAStepBoundaryAndComesBackWithNothingLost) {
  ScratchDir dir;
  ::setenv("HYDROZOA_TEST_LATE_STEP_MESSAGE", "0:1000", 1);
  const Outcome r = runTiered(dir, std::string(kTiers) + ", notice: 8s}", {}, kJoinEpochs);
  ::unsetenv("HYDROZOA_TEST_LATE_STEP_MESSAGE");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto moved = eventsOf(dir / "run", "step_moved");
  ASSERT_GE(moved.size(), 1u);
  EXPECT_GT(moved[0]["to"].get<int>(), moved[0]["begun"].get<int>());
  EXPECT_GE(moved[0]["begun"].get<int>(), moved[0]["from"].get<int>());
  EXPECT_NE(r.err.find("above the bid"), std::string::npos) << r.err;
  ASSERT_EQ(eventsOf(dir / "run", "eviction_notice").size(), 1u);
  const auto left = eventsOf(dir / "run", "transient_tier_left");
  const auto back = eventsOf(dir / "run", "transient_tier_back");
  ASSERT_EQ(left.size(), 1u) << r.err;
  ASSERT_EQ(back.size(), 1u) << r.err;
  EXPECT_EQ(left[0]["replicas"], 1);
  EXPECT_EQ(back[0]["replicas"], 2);
  EXPECT_LT(left[0]["step"].get<int>(), back[0]["step"].get<int>());
  EXPECT_TRUE(eventsOf(dir / "run", "worker_lost").empty());  // left in time: nobody killed
  // NOTE [Regrouping at a step boundary]: the reliable worker's process ran
  // through the leave and the return (one start, where restarts would make
  // three), regrouped alone and then with the transient worker that joined.
  EXPECT_EQ(left[0].value("regrouped", false), true);
  EXPECT_EQ(back[0].value("regrouped", false), true);
  EXPECT_EQ(back[0].value("roles_ahead", false), true);  // NOTE [Roles for joiners ahead]
  const std::string log = testing::slurp(dir / "run/workers/worker-0.log");
  EXPECT_EQ(countOf(log, "replica 0 stage 0 of"), 1u) << log;
  for (const auto& [change, width] : {std::pair{left[0], 1}, std::pair{back[0], 2}}) {
    const std::string line =
        fmt::format("regrouped before step {}: replica 0 of {}", change["step"].get<int>(), width);
    EXPECT_EQ(countOf(log, line), 1u) << line << " in\n" << log;
  }
  // NOTE [State for joiners]: the transient worker that came back took its
  // state from replica 0 over the new group, no save in between.
  const std::string sent = fmt::format("sent the state (at step {}", back[0]["step"].get<int>());
  EXPECT_EQ(countOf(log, sent), 1u) << sent << " in\n" << log;
  std::string joiners;
  for (const auto& f : std::filesystem::directory_iterator(dir / "run/workers")) {
    if (f.path().extension() == ".log" && f.path().filename() != "worker-0.log") joiners += testing::slurp(f.path());
  }
  const std::string took = fmt::format("took the state (at step {}", back[0]["step"].get<int>());
  EXPECT_EQ(countOf(joiners, took), 1u) << took << " in\n" << joiners;
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["status"], "completed");
  const Json& tiers = (*summary)["tiers"];
  EXPECT_EQ(tiers["eviction_notices"], 1);
  EXPECT_EQ(tiers["workers_taken"], 0);
  EXPECT_EQ(tiers["returns"], 1);
  EXPECT_GT(tiers["trace_hours"].get<double>(), 1);
  // Billed by the hour begun: the reliable worker on demand, the transient
  // one at 0.05 $/h (the hour the eviction cut short is not charged).
  const double hours = tiers["trace_hours"].get<double>();
  const int billed = tiers["billed_hours"].get<int>();
  EXPECT_GT(billed, hours);
  EXPECT_LE(billed, hours + 1);
  EXPECT_NEAR(tiers["usd"]["reliable"].get<double>(), billed * 0.199, 1e-9);
  const double transient = tiers["usd"]["transient"].get<double>();
  EXPECT_GT(transient, 0);
  EXPECT_NEAR(transient / 0.05, std::round(transient / 0.05), 1e-9);  // whole hours at 0.05
  EXPECT_NEAR(tiers["all_on_demand_usd"].get<double>(), 2 * billed * 0.199, 1e-9);
  expectTheSameTraining(dir, left[0]["step"].get<std::int64_t>(), kJoinEpochs);
  EXPECT_TRUE(testing::noWorkersLeft(dir / "run"));
}

// NOTE [Reliable workers that compute nothing], AgileML's third stage, at a
// ratio of 1:1 here (reliable_idle_ratio: 1): the reliable replica takes no
// sample while the transient one is present (it takes all 6 microbatches),
// computes every step while evicted, and none again once it is back; the
// same training throughout (within float rounding from the first step: one
// replica sums the 6 microbatches that two summed 3 by 3 without tiers).
TEST(Tiers, TheReliableReplicaComputesNothingBesideEnoughTransientOnes) {
  ScratchDir dir;
  const Outcome r = runTiered(dir, std::string(kTiers) + ", notice: 8s, reliable_idle_ratio: 1}", {}, kJoinEpochs);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("1 reliable replica holds the state and computes nothing; the transient replicas take the step's "
                       "microbatches, 6 each"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("The reliable replicas compute again"), std::string::npos) << r.err;
  const auto left = eventsOf(dir / "run", "transient_tier_left");
  const auto back = eventsOf(dir / "run", "transient_tier_back");
  ASSERT_EQ(left.size(), 1u) << r.err;
  ASSERT_EQ(back.size(), 1u) << r.err;
  EXPECT_EQ(left[0]["idle_replicas"], 0);
  EXPECT_EQ(back[0]["idle_replicas"], 1);
  EXPECT_EQ(left[0].value("regrouped", false), true);
  EXPECT_EQ(back[0].value("regrouped", false), true);
  const std::int64_t leftAt = left[0]["step"].get<std::int64_t>(), backAt = back[0]["step"].get<std::int64_t>();
  const std::string log = testing::slurp(dir / "run/workers/worker-0.log");
  EXPECT_EQ(countOf(log, "replica 0: holds the state and computes nothing"), 2u) << log;
  EXPECT_EQ(countOf(log, "replica 0: computes again"), 1u) << log;
  EXPECT_EQ(countOf(log, fmt::format("regrouped before step {}: replica 0 of 1 (was 2), 6 microbatches", leftAt)), 1u) << log;
  EXPECT_EQ(countOf(log, fmt::format("regrouped before step {}: replica 0 of 2 (was 1), 0 microbatches", backAt)), 1u) << log;
  // Replica 0's samples, step by step (a change's step is the first the new group runs).
  size_t idleSteps = 0, busySteps = 0;
  for (const testing::SampleRecord& s : testing::recordedSamples(dir / "run")) {
    if (s.replica != 0) continue;
    const bool alone = s.step >= leftAt && s.step < backAt;
    EXPECT_EQ(s.ids.size(), alone ? 24u : 0u) << "step " << s.step << " (alone from " << leftAt << " to " << backAt << ")";
    ++(alone ? busySteps : idleSteps);
  }
  EXPECT_GT(idleSteps, 0u);
  EXPECT_GT(busySteps, 0u);
  expectTheSameTraining(dir, 1, kJoinEpochs);
  EXPECT_TRUE(testing::noWorkersLeft(dir / "run"));
}

TEST(Tiers, AWorkerEvictedWithoutNoticeIsRecoveredFromTheReliableReplica) {
  ScratchDir dir;
  // With recovery off: the spot market's take is not a failure. The spike
  // from 1 s into the training to 1.5 s: taken at 0.25 s (minute 10), the
  // worker was once gone before the first step was done beside the Slurm
  // tests, and the run restarted from the start.
  const Outcome r = runTiered(dir, std::string(kTiers) + ", notice: 0}", {"--no-progress"}, kJoinEpochs, 40, 60);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto recovered = eventsOf(dir / "run", "recovered");
  ASSERT_EQ(recovered.size(), 1u) << r.err;
  // From the reliable replica's live state; or, when the eviction lands on
  // an epoch's end, from the checkpoint of that very step (seen in CI): the
  // same state, nothing redone either way.
  const std::string from = recovered[0]["restored_from"];
  EXPECT_TRUE(from == "live replicas" || from == "checkpoint") << r.err;
  EXPECT_EQ(recovered[0]["lost_steps"], 0) << r.err;
  EXPECT_EQ(recovered[0].value("evicted", false), true);
  const auto back = eventsOf(dir / "run", "transient_tier_back");
  ASSERT_EQ(back.size(), 1u) << r.err;
  EXPECT_EQ(back[0].value("regrouped", false), true);  // joined the running reliable worker
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["status"], "completed");
  EXPECT_EQ((*summary)["tiers"]["workers_taken"], 1);
  expectTheSameTraining(dir, recovered[0]["restore_step"].get<std::int64_t>(), kJoinEpochs);
}

// NOTE [BidBrain in a live run]: started at the trace's beginning (by
// default it starts a day in, to have a history), BidBrain knows no
// eviction and buys the transient worker at the lowest bid it weighs
// (0.05 + 0.0001 $/h); the spike evicts it, BidBrain buys nothing while the
// price is above on demand and buys again when it falls; the training is
// the same. With regroup: false, so that a leave by restarting every worker
// (the way for jobs that cannot regroup) keeps a test.
TEST(Tiers, BidBrainBidsForTheTransientTierAndTheTrainingIsTheSame) {
  ScratchDir dir;
  const Outcome r =
      runTiered(dir, std::string(kTiers) + ", notice: 3s, start: \"2016-03-14T00:00:00Z\", regroup: false}",
                {"--bidbrain"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("bid for by BidBrain"), std::string::npos) << r.err;
  const auto notices = eventsOf(dir / "run", "eviction_notice");
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_NEAR(notices[0]["bid"].get<double>(), 0.0501, 1e-9);
  std::vector<Json> bought;
  for (const Json& e : eventsOf(dir / "run", "bid")) {
    if (e["decision"] == "acquire") bought.push_back(e);
  }
  ASSERT_EQ(bought.size(), 1u);  // after the spike (the first was before training began)
  EXPECT_NEAR(bought[0]["price"].get<double>(), 0.05, 1e-9);
  EXPECT_EQ(bought[0]["workers"], 1);
  EXPECT_LT(bought[0]["cost_per_work"].get<double>(), 0.199);
  const auto left = eventsOf(dir / "run", "transient_tier_left");
  ASSERT_EQ(left.size(), 1u);
  EXPECT_FALSE(left[0].contains("regrouped"));  // regroup: false: the leave restarted the reliable worker too
  ASSERT_EQ(eventsOf(dir / "run", "transient_tier_back").size(), 1u);
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["status"], "completed");
  EXPECT_EQ((*summary)["tiers"]["bidder"], "bidbrain");
  EXPECT_GT((*summary)["tiers"]["decisions"].get<int>(), 1);
  expectTheSameTraining(dir, left[0]["step"].get<std::int64_t>());
  EXPECT_TRUE(testing::noWorkersLeft(dir / "run"));
}

// NOTE [Checkpoint-restart]: both workers transient; evicted with notice,
// they save at a step boundary, the run waits out the spike with no worker
// and restarts from that checkpoint on disk: nothing redone, the same
// training (and the same replicas: the losses are bit-equal throughout).
TEST(Tiers, AllTransientTiersStopWhenEvictedAndRestartFromTheCheckpoint) {
  ScratchDir dir;
  const Outcome r = runTiered(dir, std::string(kAllTransient) + ", notice: 3s}");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("every worker was transient and is gone"), std::string::npos) << r.err;
  ASSERT_EQ(eventsOf(dir / "run", "eviction_notice").size(), 1u);
  const auto left = eventsOf(dir / "run", "transient_tier_left");
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0]["replicas"], 0);
  const auto back = eventsOf(dir / "run", "transient_tier_back");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0]["replicas"], 2);
  EXPECT_EQ(back[0]["step"], left[0]["step"]);  // restarted where it stopped
  // Waited out the spike: from minute 10 or later to minute 30.
  EXPECT_GE(back[0]["trace_time"].get<std::string>(), "2016-03-14T00:30:00");
  EXPECT_TRUE(eventsOf(dir / "run", "worker_lost").empty());
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["status"], "completed");
  const Json& tiers = (*summary)["tiers"];
  EXPECT_EQ(tiers["checkpoint_restart"], true);
  EXPECT_GT(tiers["waited_trace_hours"].get<double>(), 0);
  EXPECT_LT(tiers["waited_trace_hours"].get<double>(), 20.0 / 60);
  EXPECT_DOUBLE_EQ(tiers["usd"]["reliable"].get<double>(), 0);
  expectTheSameTraining(dir, left[0]["step"].get<std::int64_t>());
  EXPECT_TRUE(testing::noWorkersLeft(dir / "run"));
}

// Runs whole.yaml and the tiered job (a 3 s notice, at most `maxRecoveries`
// recoveries) into dir/whole and dir/run, and SIGKILLs the first worker
// started to join (one not among the first two) once `now(pid)` says so,
// with the coordinator stopped (SIGSTOP) for `pause` around the kill.
struct KilledJoiner {
  Outcome whole, run;
  pid_t killed = 0;  // 0: none was killed within a minute (or the run without tiers failed)
};
KilledJoiner runKillingAJoiner(const ScratchDir& dir, const char* maxRecoveries,
                               const std::function<bool(pid_t)>& now,
                               std::chrono::milliseconds pause = std::chrono::milliseconds(0)) {
  KilledJoiner k;
  writeTrace(dir / "trace.json", 10, 30);
  std::ofstream(dir / "whole.yaml") << tierJob("", kJoinEpochs);
  std::ofstream(dir / "job.yaml") << tierJob(std::string(kTiers) + ", notice: 3s}", kJoinEpochs);
  ::setenv("HYDROZOA_RECORD_SAMPLES", "1", 1);
  k.whole = runHydrozoa(dir.path().string(), {"train", "whole.yaml", "--no-progress", "--out", "whole"});
  if (k.whole.code != 0) {
    ::unsetenv("HYDROZOA_RECORD_SAMPLES");
    return k;
  }
  const pid_t pid = testing::spawnHydrozoa(
      dir.path().string(), {"train", "job.yaml", "--no-progress", "--out", "run", "--max-recoveries", maxRecoveries});
  const std::string endpoint = testing::waitForSteps(dir / "run", 1);
  std::set<pid_t> first;
  for (pid_t w : testing::workersOf(endpoint)) first.insert(w);
  EXPECT_EQ(first.size(), 2u);
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       k.killed == 0 && !endpoint.empty() && std::chrono::steady_clock::now() < until;) {
    for (pid_t w : testing::workersOf(endpoint)) {
      if (first.count(w) == 0 && now(w)) {
        if (pause.count() > 0) ::kill(pid, SIGSTOP);
        if (::kill(w, SIGKILL) == 0) k.killed = w;
        if (pause.count() > 0) {
          std::this_thread::sleep_for(pause);
          ::kill(pid, SIGCONT);
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  k.run = testing::waitHydrozoa(dir.path().string(), pid);
  ::unsetenv("HYDROZOA_RECORD_SAMPLES");
  return k;
}

// NOTE [Regrouping at a step boundary], caused: the transient worker
// started to join the running reliable one is killed as soon as it
// appears (a spot instance that dies while it boots). The return then
// happens as a new generation of both workers (or, had the worker died
// after the regroup was asked, as the recovery of an evicted one); either
// way the run completes with the same training.
TEST(Tiers, AWorkerKilledWhileJoiningLeavesTheReturnToANewGeneration) {
  ScratchDir dir;
  const KilledJoiner k = runKillingAJoiner(dir, "0", [](pid_t) { return true; });
  ASSERT_EQ(k.whole.code, 0) << k.whole.err;
  const Outcome& r = k.run;
  ASSERT_GT(k.killed, 0) << "no worker started to join:\n" << r.err;
  ASSERT_EQ(r.code, 0) << r.err;
  const auto left = eventsOf(dir / "run", "transient_tier_left");
  const auto back = eventsOf(dir / "run", "transient_tier_back");
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].value("regrouped", false), true);
  const auto recovered = eventsOf(dir / "run", "recovered");
  if (recovered.empty()) {
    ASSERT_EQ(back.size(), 1u) << r.err;
    EXPECT_FALSE(back[0].contains("regrouped"));  // every worker started again
  }
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["status"], "completed");
  expectTheSameTraining(dir, left[0]["step"].get<std::int64_t>(), kJoinEpochs);
  EXPECT_TRUE(testing::noWorkersLeft(dir / "run"));
}

// NOTE [Roles for joiners ahead], caused: the transient worker that comes
// back is killed once it has its role (the regroup's step confirmed; it is
// setting up, or waiting at the new group's rendezvous, or has just
// joined). The reliable worker, waiting for it there or training on, is
// recovered from where it is (the joiner lost before the switch counts as
// evicted, after it as one recovery), and the run completes with the same
// training. The coordinator is stopped for half a second around the kill,
// so that it finds the loss with the reliable worker's reports of the steps
// up to the regroup's still to read: they must not switch to the new group
// while the recovery halts and saves it (recovery.cc, halting_; CI once
// restored such a run from its start).
TEST(Tiers, AJoinerKilledOnceItHasItsRoleIsRecoveredFrom) {
  ScratchDir dir;
  auto hasItsRole = [&dir](pid_t w) {  // its id from its command line ("... --id N"), its role from its log
    const std::string args = testing::slurp("/proc/" + std::to_string(w) + "/cmdline");
    const size_t at = args.find(std::string("--id") + '\0');
    if (at == std::string::npos) return false;
    const std::string id = args.substr(at + 5, args.find('\0', at + 5) - at - 5);
    const std::string log = testing::slurp(dir / ("run/workers/worker-" + id + ".log"));
    return log.find("replica 1 stage 0 of 2x1") != std::string::npos;
  };
  const KilledJoiner k = runKillingAJoiner(dir, "1", hasItsRole, std::chrono::milliseconds(500));
  ASSERT_EQ(k.whole.code, 0) << k.whole.err;
  const Outcome& r = k.run;
  ASSERT_GT(k.killed, 0) << "no joiner got its role:\n" << r.err;
  ASSERT_EQ(r.code, 0) << r.err;
  const auto left = eventsOf(dir / "run", "transient_tier_left");
  ASSERT_GE(left.size(), 1u) << r.err;
  const auto recovered = eventsOf(dir / "run", "recovered");
  ASSERT_GE(recovered.size(), 1u) << r.err;
  EXPECT_EQ(recovered[0]["restored_from"], "live replicas") << recovered[0].dump() << "\n" << r.err;
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["status"], "completed");
  expectTheSameTraining(dir, left[0]["step"].get<std::int64_t>(), kJoinEpochs);
  EXPECT_TRUE(testing::noWorkersLeft(dir / "run"));
}

// Without notice the workers are taken before any checkpoint (the first is
// at the epoch's end, step 80): the run restores the start, waits out the
// spike and does those steps again, to the same losses bit for bit.
TEST(Tiers, AllTransientTiersEvictedWithoutNoticeRedoTheStepsSinceTheCheckpoint) {
  ScratchDir dir;
  const Outcome r = runTiered(dir, std::string(kAllTransient) + ", notice: 0}");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto recovered = eventsOf(dir / "run", "recovered");
  ASSERT_EQ(recovered.size(), 1u);
  EXPECT_EQ(recovered[0]["restore_step"], 0);
  EXPECT_GT(recovered[0]["lost_steps"].get<int>(), 0);
  EXPECT_EQ(recovered[0].value("evicted", false), true);
  ASSERT_EQ(eventsOf(dir / "run", "transient_tier_left").size(), 1u);
  auto summary = readJsonFile(dir / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["status"], "completed");
  EXPECT_EQ((*summary)["tiers"]["workers_taken"], 2);
  expectTheSameTraining(dir, 2 * kStepsPerEpoch);
  EXPECT_TRUE(testing::noWorkersLeft(dir / "run"));
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
      {{"--bidbrain"}, "--bidbrain bids for the transient tier"},
      {{"--tiers", "reliable=1,transient=1", "--spot-trace", "trace.json", "--checkpoint-restart"},
       "checkpoint_restart is for tiers that are all transient"},
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
