// The spot market of a simulated cluster (sim/market.h): its trace read with
// each mistake named, prices from a VM catalog, the bill over changing
// prices, spot workers drawn coming and going; and the simulator on it
// (sim/simulator.h): a job whose spot worker is reclaimed mid-round, worked
// out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "sim/market.h"
#include "sim/simulator.h"

namespace hydrozoa::sim {
namespace {

const std::vector<sched::WorkerType> kTypes = {{"v100", 2}, {"v100:spot", 3}};

void expectError(const std::string& text, const std::string& message) {
  auto r = parseSpotTrace(text, kTypes, "spot.trace");
  ASSERT_FALSE(r.ok()) << text;
  EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().message();
}

TEST(SpotTrace, ReadsEventsInTimeOrderAndNamesEachMistake) {
  auto r = parseSpotTrace("# seconds type event value\n0 v100:spot price 0.78\n\n600\tv100:spot\tavailable 1  # two "
                          "reclaimed\n600 v100 price 2.67\n",
                          kTypes, "spot.trace");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[1].time, 600);
  EXPECT_EQ((*r)[1].type, 1);
  EXPECT_EQ((*r)[1].kind, SpotEvent::kAvailable);
  EXPECT_EQ((*r)[1].value, 1);
  EXPECT_EQ((*r)[2].type, 0);
  // Written and read back, the same.
  auto again = parseSpotTrace(formatSpotTrace(*r, kTypes), kTypes, "again");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->size(), 3u);

  expectError("0 v100:spot price\n", "spot.trace:1: 3 fields; expected 4");
  expectError("0 v100:spot price 1\n-5 v100:spot price 1\n", "spot.trace:2: time \"-5\" is not seconds");
  expectError("10 v100:spot price 1\n5 v100:spot price 1\n",
              "spot.trace:2: time 5 s comes before the line above's 10 s");
  expectError("0 k80 price 1\n", "spot.trace:1: \"k80\" is not a worker type of the cluster (v100, v100:spot)");
  expectError("0 v100:spot price 0\n", "price \"0\" is not USD per worker-hour above 0");
  expectError("0 v100:spot price nan\n", "price \"nan\"");
  expectError("0 v100:spot available 4\n", "available \"4\" is not a count of workers from 0 to v100:spot's 3");
  expectError("0 v100:spot available 1.5\n", "available \"1.5\"");
  expectError("0 v100:spot reclaim 1\n", "event \"reclaim\" is neither price nor available");
  expectError("1e300 v100:spot price 1\n", "time \"1e300\"");
}

// Thousands of seeded mutations of a valid trace: each read or refused,
// never a crash, and what is read keeps its bounds.
TEST(SpotTrace, SurvivesMutations) {
  const std::string valid = "0 v100:spot price 0.78\n600 v100:spot available 1\n900 v100 price 2.67\n"
                            "1200 v100:spot available 3\n";
  std::mt19937_64 rng(11);
  int read = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string text = valid;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) {
      const size_t at = rng() % (text.size() + 1);
      switch (rng() % 5) {
        case 0: if (at < text.size()) text[at] = static_cast<char>(rng() % 256); break;
        case 1: text = text.substr(0, at); break;
        case 2: text.insert(at, text.substr(at, rng() % 30)); break;
        case 3: text.insert(at, std::to_string(static_cast<std::int64_t>(rng()))); break;
        default: text.insert(at, rng() % 2 ? "-1e308" : "nan"); break;
      }
    }
    auto r = parseSpotTrace(text, kTypes, "m");
    if (!r.ok()) continue;
    ++read;
    for (const SpotEvent& e : *r) {
      ASSERT_TRUE(e.type == 0 || e.type == 1);
      ASSERT_TRUE(e.time >= 0 && std::isfinite(e.time));
      ASSERT_TRUE(e.kind == SpotEvent::kPrice ? e.value > 0 : e.value >= 0 && e.value <= kTypes[e.type].count);
    }
  }
  EXPECT_GT(read, 0);
}

TEST(SpotTrace, PricesFromAVmCatalogOnDemandAndSpot) {
  auto gcp = plan::loadCatalog("gcp-vm");
  ASSERT_TRUE(gcp.ok()) << gcp.status().message();
  auto p = catalogPrices(*gcp, {{"v100", 1}, {"v100:spot", 1}, {"k80:spot", 1}});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_DOUBLE_EQ((*p)[0], 2.67);
  EXPECT_DOUBLE_EQ((*p)[1], 0.78);
  EXPECT_DOUBLE_EQ((*p)[2], 0.175);
  auto aws = plan::loadCatalog("aws-vm");  // no spot prices in it
  ASSERT_TRUE(aws.ok());
  auto none = catalogPrices(*aws, {{"v100:spot", 1}});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("catalog aws-vm sells no v100 spot instance"), std::string::npos)
      << none.status().message();
  EXPECT_FALSE(catalogPrices(*gcp, {{"p4", 1}}).ok());
  auto aci = plan::loadCatalog("aci");
  ASSERT_TRUE(aci.ok());
  EXPECT_NE(catalogPrices(*aci, {{"v100", 1}}).status().message().find("is not of VM instances"), std::string::npos);
}

TEST(SpotTrace, TheBillFollowsThePrice) {
  auto events = parseSpotTrace("50 v100:spot price 2\n50 v100:spot price 3\n200 v100:spot price 1\n", kTypes, "t");
  ASSERT_TRUE(events.ok());
  const PriceTrack bill({10, 1}, *events);
  EXPECT_DOUBLE_EQ(bill.dollars(0, 0, 3600), 10);           // on demand: no events
  EXPECT_DOUBLE_EQ(bill.dollars(1, 0, 50), 50.0 / 3600);    // before the change
  EXPECT_DOUBLE_EQ(bill.dollars(1, 0, 100), (50 * 1 + 50 * 3) / 3600.0);  // the last of two at one time holds
  EXPECT_DOUBLE_EQ(bill.dollars(1, 100, 300), (100 * 3 + 100 * 1) / 3600.0);
  EXPECT_DOUBLE_EQ(bill.dollars(1, 300, 300), 0);
}

TEST(SpotTrace, DrawnWorkersComeAndGoAtTheirMeanRates) {
  const std::vector<sched::WorkerType> types = {{"k80", 5}, {"v100:spot", 100}};
  SpotTraceOptions o;
  o.uptime = 3600;
  o.downtime = 1200;
  o.horizon = 500 * 3600.0;
  o.seed = 7;
  auto a = generateSpotTrace(types, o);
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto b = generateSpotTrace(types, o);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(a->size(), b->size());  // the seed decides
  // Only the spot type, counts within the cluster's, and up 3/4 of the time.
  double up = 0, last = 0, count = 100;
  for (const SpotEvent& e : *a) {
    ASSERT_EQ(e.type, 1);
    ASSERT_GE(e.value, 0);
    ASSERT_LE(e.value, 100);
    ASSERT_GE(e.time, last);
    up += count * (e.time - last);
    last = e.time;
    count = e.value;
  }
  EXPECT_NEAR(up / (100 * last), 0.75, 0.03);
  // A longer draw starts with the same events.
  o.horizon *= 2;
  auto longer = generateSpotTrace(types, o);
  ASSERT_TRUE(longer.ok());
  ASSERT_GT(longer->size(), a->size());
  for (size_t i = 0; i < a->size(); ++i) ASSERT_EQ((*longer)[i].time, (*a)[i].time);
  auto none = generateSpotTrace({{"k80", 5}}, o);
  EXPECT_NE(none.status().message().find("no spot worker types"), std::string::npos);
}

sched::Throughputs throughputs() {
  auto t = sched::Throughputs::fromJson(
      Json::parse(R"js({"v100": {"('R', 1)": {"null": 40.0}}, "k80": {"('R', 1)": {"null": 10.0}}})js"), "t");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return *t;
}

sched::TraceJob job(double steps, double arrival = 0) {
  sched::TraceJob j;
  j.type = "R";
  j.total_steps = steps;
  j.arrival = arrival;
  return j;
}

// One job of 250 s on one v100 spot worker (v100's throughput), rounds of
// 100 s, 10 s lost to each start: rounds 0-99 (starts, 90 s of steps), 100-130
// (reclaimed at 130), 200-299 (no worker: it waits), 300-399 (back from 260:
// starts again, 90 s), 400-440 (its last 40 s). The price, $1/h, is $2/h from 50 s.
TEST(SpotSimulation, AReclaimedWorkerStopsTheJobThereAndItResumesWhenOneIsBack) {
  const std::vector<sched::WorkerType> types = {{"v100:spot", 1}};
  auto policy = sched::makePolicy("max_min_fairness");
  ASSERT_TRUE(policy.ok());
  SimOptions o;
  o.round = 100;
  o.preemption = 10;
  o.price = {1};
  auto spot = parseSpotTrace("50 v100:spot price 2\n130 v100:spot available 0\n260 v100:spot available 1\n", types,
                             "t");
  ASSERT_TRUE(spot.ok());
  o.spot = *spot;
  auto r = simulate({job(10000)}, types, throughputs(), **policy, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->jobs[0].finish, 440);
  EXPECT_EQ(r->reclaimed, 1);
  EXPECT_EQ(r->rounds, 5);
  EXPECT_EQ(r->jobs[0].rounds, 4);  // it waited one
  EXPECT_NEAR(r->cost, (50 * 1 + 50 * 2 + 30 * 2 + 100 * 2 + 40 * 2) / 3600.0, 1e-12);
  EXPECT_NEAR(r->utilisation, 270.0 / (440 - 130), 1e-12);  // of the worker there was
  // Without the market: 10 s lost once, 250 s of steps.
  o.spot.clear();
  auto calm = simulate({job(10000)}, types, throughputs(), **policy, o);
  ASSERT_TRUE(calm.ok());
  EXPECT_DOUBLE_EQ(calm->jobs[0].finish, 260);
  EXPECT_EQ(calm->reclaimed, 0);
}

// Two jobs on two spot workers, one reclaimed mid-round: the job that came
// later stops; the other runs on to its end.
TEST(SpotSimulation, TheJobThatCameLastLosesTheReclaimedWorker) {
  const std::vector<sched::WorkerType> types = {{"v100:spot", 2}};
  auto policy = sched::makePolicy("max_min_fairness");
  ASSERT_TRUE(policy.ok());
  SimOptions o;
  o.round = 100;
  auto spot = parseSpotTrace("40 v100:spot available 1\n", types, "t");
  ASSERT_TRUE(spot.ok());
  o.spot = *spot;
  auto r = simulate({job(6000), job(6000, 0)}, types, throughputs(), **policy, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->jobs[0].finish, 150);  // 150 s on one worker throughout
  // Job 1: 40 s, then waits in round 100-199 (one worker, job 0 keeps it),
  // then 110 s from 200.
  EXPECT_DOUBLE_EQ(r->jobs[1].finish, 310);
  EXPECT_EQ(r->reclaimed, 1);
}

TEST(SpotSimulation, JobsThatCanRunNowhereAgainAreNamedNotWaitedForForever) {
  const std::vector<sched::WorkerType> types = {{"v100:spot", 1}};
  auto policy = sched::makePolicy("max_min_fairness");
  ASSERT_TRUE(policy.ok());
  SimOptions o;
  o.round = 100;
  o.spot = *parseSpotTrace("50 v100:spot available 0\n", types, "t");
  auto r = simulate({job(10000)}, types, throughputs(), **policy, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("at 100 s: 1 jobs wait for workers that the spot trace never brings back"),
            std::string::npos)
      << r.status().message();
  // With an on-demand type beside it, the job moves there.
  const std::vector<sched::WorkerType> mixed = {{"k80", 1}, {"v100:spot", 1}};
  o.spot = *parseSpotTrace("50 v100:spot available 0\n", mixed, "t");
  auto moved = simulate({job(10000)}, mixed, throughputs(), **policy, o);
  ASSERT_TRUE(moved.ok()) << moved.status().message();
  // 50 s on the v100 (2,000 steps), then 800 s on the k80 from 100 s.
  EXPECT_DOUBLE_EQ(moved->jobs[0].finish, 900);
  // Prices changing with none given is a mistake named.
  o.spot = *parseSpotTrace("50 v100:spot price 1\n", mixed, "t");
  EXPECT_NE(simulate({job(10000)}, mixed, throughputs(), **policy, o).status().message().find("--prices"),
            std::string::npos);
}

}  // namespace
}  // namespace hydrozoa::sim
