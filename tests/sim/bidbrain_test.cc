// BidBrain (sim/bidbrain.h): the cloud's spot price history read and
// written, the eviction estimate on a market whose prices are known, and
// the strategies' bills worked out by hand on small histories.
#include "sim/bidbrain.h"

#include <gtest/gtest.h>

namespace hydrozoa::sim {
namespace {

Json record(const std::string& type, const std::string& zone, const std::string& price, const std::string& t) {
  return {{"InstanceType", type}, {"AvailabilityZone", zone}, {"ProductDescription", "Linux/UNIX"},
          {"SpotPrice", price}, {"Timestamp", t}};
}

TEST(BidBrain, TimestampsAsTheCloudWritesThem) {
  EXPECT_EQ(*parseTimestamp("1970-01-01T00:00:00Z", "t"), 0);
  EXPECT_EQ(*parseTimestamp("2016-03-14T00:00:00.000Z", "t"), 1457913600);
  EXPECT_EQ(*parseTimestamp("2016-03-14T02:00:00+02:00", "t"), 1457913600);
  EXPECT_EQ(formatTimestamp(1457913600), "2016-03-14T00:00:00.000Z");
  for (const char* bad : {"", "yesterday", "2016-13-01T00:00:00Z", "2016-03-14T25:00:00Z", "2016-03-14T00:00:00PST"}) {
    auto r = parseTimestamp(bad, "x.Timestamp");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("x.Timestamp"), std::string::npos);
  }
}

TEST(BidBrain, TheCloudsExportParsesInAnyOrderAndRoundTrips) {
  const Json j = {{"SpotPriceHistory",
                   {record("c4.xlarge", "us-east-1a", "0.0500", "2016-03-14T01:00:00.000Z"),
                    record("c4.xlarge", "us-east-1a", "0.0400", "2016-03-14T00:00:00.000Z"),
                    record("c4.xlarge", "us-east-1b", "0.0450", "2016-03-14T00:30:00.000Z")}},
                  {"OnDemandPrices", {{"c4.xlarge", 0.199}}}};
  auto h = parseSpotHistory(j, "spot.json");
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->markets.size(), 2u);
  EXPECT_DOUBLE_EQ(h->markets[0].priceAt(1457913600 - 100), 0.04);  // before the first: the first
  EXPECT_DOUBLE_EQ(h->markets[0].priceAt(1457913600 + 1800), 0.04);
  EXPECT_DOUBLE_EQ(h->markets[0].priceAt(1457913600 + 3600), 0.05);
  EXPECT_DOUBLE_EQ(h->on_demand.at("c4.xlarge"), 0.199);
  EXPECT_EQ(h->begin, 1457913600);
  auto back = parseSpotHistory(spotHistoryToJson(*h), "again");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(spotHistoryToJson(*back), spotHistoryToJson(*h));
}

TEST(BidBrain, BadHistoriesNameTheRecordAndField) {
  const std::vector<std::pair<Json, std::string>> bad = {
      {Json::object(), "expected the cloud's spot price history"},
      {{{"SpotPriceHistory", Json::array()}}, "has no records"},
      {{{"SpotPriceHistory", {record("c4.xlarge", "a", "cheap", "2016-03-14T00:00:00Z")}}},
       "SpotPriceHistory[0].SpotPrice: \"cheap\" is not a price"},
      {{{"SpotPriceHistory", {record("c4.xlarge", "a", "-1", "2016-03-14T00:00:00Z")}}}, "is not a price"},
      {{{"SpotPriceHistory", {record("c4.xlarge", "a", "0.1", "noon")}}}, "SpotPriceHistory[0].Timestamp"},
      {{{"SpotPriceHistory", {{{"InstanceType", "c4.xlarge"}}}}}, "SpotPriceHistory[0].AvailabilityZone: missing"},
      {{{"SpotPriceHistory", {record("c4.xlarge", "a", "0.1", "2016-03-14T00:00:00Z")}}, {"OnDemandPrices", {{"c4.xlarge", -2}}}},
       "OnDemandPrices.c4.xlarge"},
  };
  for (const auto& [j, want] : bad) {
    auto h = parseSpotHistory(j, "spot.json");
    ASSERT_FALSE(h.ok()) << j.dump();
    EXPECT_NE(h.status().message().find(want), std::string::npos) << h.status().message();
  }
}

// A market at 0.05 that spikes to 0.30 for 10 minutes at the start of every
// odd hour.
SpotMarket spiky() {
  SpotMarket m{"c4.xlarge", "z", {}};
  for (int h = 0; h < 48; ++h) {
    if (h % 2 == 1) {
      m.prices.emplace_back(h * 3600.0, 0.30);
      m.prices.emplace_back(h * 3600.0 + 600, 0.05);
    } else {
      m.prices.emplace_back(h * 3600.0, 0.05);
    }
  }
  return m;
}

TEST(BidBrain, EvictionEstimatesFromTheHistory) {
  const SpotMarket m = spiky();
  EXPECT_DOUBLE_EQ(estimateEviction(m, 0.3).beta, 0);  // above every spike
  // 0.1 above the price: a window starting in an even hour (0.05, bid 0.15)
  // meets the next spike within the hour, 3600, 3300, ... 300 s after its
  // start; one starting in an odd hour does not (the next is two hours on).
  const EvictionEstimate e = estimateEviction(m, 0.1);
  EXPECT_NEAR(e.beta, 0.5, 0.02);
  EXPECT_NEAR(e.tau, 1950, 30);  // the last windows of the history see fewer spikes
}

TEST(BidBrain, ALiveBidSeesThePastAlone) {
  // Quiet for a day, then the spiky market's odd-hour spikes.
  SpotMarket m{"c4.xlarge", "z", {{0, 0.05}}};
  for (const auto& [t, p] : spiky().prices) {
    if (t >= 24 * 3600) m.prices.emplace_back(t, p);
  }
  EXPECT_GT(estimateEviction(m, 0.1).beta, 0.2);             // the whole history (the simulator's)
  EXPECT_DOUBLE_EQ(estimateEviction(m, 0.1, 20 * 3600).beta, 0);  // what a live run knew at 20:00
  EXPECT_GT(estimateEviction(m, 0.1, 40 * 3600).beta, 0.2);
  EXPECT_DOUBLE_EQ(estimateEviction(m, 0.1, 1800).beta, 0);  // less than an hour seen: nothing

  // Beside 1 reliable instance at 0.199: nothing seen evicts, so the
  // cheapest bid and the most instances the replicas can share (2 is not
  // among them); E = (0.199 + 3 × 0.05) / 4.
  BidChoice c = chooseBid(m, 0.199, 1, {1, 3}, {0.001, 0.1}, 0);
  EXPECT_EQ(c.count, 3);
  EXPECT_NEAR(c.bid, 0.051, 1e-9);
  EXPECT_NEAR(c.cost_per_work, (0.199 + 0.15) / 4, 1e-9);
  EXPECT_NEAR(costPerWork(m, 0.199, 1, 3, 0.051, 0), c.cost_per_work, 1e-12);
  EXPECT_NEAR(costPerWork(m, 0.199, 1, 0, 0, 0), 0.199, 1e-12);  // the reliable ones alone
  // Where each eviction costs restarts (the live runtime), a bid above the
  // spikes. On the spiky market at 40:00, 0.001 above the price is evicted
  // within half the hours (β 0.5, τ about 1950 s), which are free, so E is
  // lower with it (about 0.083 against 0.0872 never evicted) unless each
  // eviction stalls the 4 instances for 0.6 h (two changes of 0.3 h; about
  // 0.13).
  const SpotMarket s = spiky();
  c = chooseBid(s, 0.199, 1, {3}, {0.001, 0.3}, 40 * 3600);
  EXPECT_NEAR(c.bid, 0.051, 1e-9);
  EXPECT_LT(c.cost_per_work, 0.085);
  c = chooseBid(s, 0.199, 1, {3}, {0.001, 0.3}, 40 * 3600, 0.6);
  EXPECT_NEAR(c.bid, 0.35, 1e-9);
  EXPECT_NEAR(c.cost_per_work, (0.199 + 0.15) / 4, 1e-9);
  EXPECT_GT(costPerWork(s, 0.199, 1, 3, 0.051, 40 * 3600, 0.6), 0.12);
  // Reliable instances that compute nothing beside 3 (AgileML's third
  // stage) work only after an eviction: never evicted, E = (0.199 + 0.15) / 3.
  c = chooseBid(m, 0.199, 1, {1, 3}, {0.001, 0.1}, 0, 0, {3});
  EXPECT_EQ(c.count, 3);
  EXPECT_NEAR(c.cost_per_work, (0.199 + 0.15) / 3, 1e-9);
  EXPECT_NEAR(costPerWork(m, 0.199, 1, 3, 0.051, 0, 0, true), c.cost_per_work, 1e-12);
  // Evicted within the hour (β 0.5 at 40:00 on the spiky market), the
  // reliable one works the hour's rest: more work than idle all along.
  const EvictionEstimate e = estimateEviction(s, 0.001, 40 * 3600);
  ASSERT_GT(e.beta, 0.2);
  const double p = s.priceAt(40 * 3600);
  const double spotWork = 3 * ((1 - e.beta) + e.beta * e.tau / 3600);
  EXPECT_NEAR(costPerWork(s, 0.199, 1, 3, p + 0.001, 40 * 3600, 0, true),
              (0.199 + (1 - e.beta) * 3 * p) / (e.beta * (1 - e.tau / 3600) + spotWork), 1e-12);
  EXPECT_GT(costPerWork(s, 0.199, 1, 3, p + 0.001, 40 * 3600, 0, true), costPerWork(s, 0.199, 1, 3, p + 0.001, 40 * 3600));
  // In a spike above the on-demand price, nothing lowers E: none held.
  c = chooseBid(m, 0.199, 1, {1, 3}, {0.001, 0.1}, 25 * 3600 + 60);
  EXPECT_EQ(c.count, 0);
  EXPECT_DOUBLE_EQ(c.cost_per_work, 0.199);
}

SpotHistory flatHistory(double spot, double onDemand, double hours) {
  SpotHistory h;
  h.markets.push_back({"c4.xlarge", "z", {{0, spot}, {hours * 3600, spot}}});
  h.on_demand["c4.xlarge"] = onDemand;
  h.begin = 0;
  h.end = hours * 3600;
  return h;
}

TEST(BidBrain, OnAQuietMarketEveryStrategyBillsWholeHours) {
  // 10 instance-hours on 1 reliable + 4 transient: 2 hours; spot at 0.05, on demand 0.20.
  const SpotHistory h = flatHistory(0.05, 0.20, 48);
  BidBrainJob job;
  job.work_hours = 10;
  job.reliable = 1;
  job.transient = 4;
  auto r = compareBidding(h, job, {});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 4u);
  const StrategyResult& od = (*r)[0];
  EXPECT_EQ(od.name, "on-demand");
  EXPECT_NEAR(od.time, 2 * 3600, 60);
  EXPECT_NEAR(od.cost, 5 * 0.20 * 2, 1e-9);
  const StrategyResult& ckpt = (*r)[1];
  EXPECT_NEAR(ckpt.cost, 5 * 0.05 * 2, 1e-9);  // all spot, never evicted
  EXPECT_EQ(ckpt.evictions, 0);
  const StrategyResult& bb = (*r)[3];
  EXPECT_EQ(bb.name, "bidbrain");
  // One on demand for the state, four spot: 2 hours of 0.20 + 4 × 0.05.
  EXPECT_NEAR(bb.time, 2 * 3600, 120);
  EXPECT_NEAR(bb.cost, 2 * (0.20 + 4 * 0.05), 1e-9);
  EXPECT_LT(bb.cost, od.cost);
}

TEST(BidBrain, AnEvictedHourIsFreeAndCheckpointRestartRedoesWork) {
  // Spot 0.05, but 0.50 (above the on-demand 0.20) from 1:30 to 2:00.
  SpotHistory h = flatHistory(0.05, 0.20, 48);
  h.markets[0].prices = {{0, 0.05}, {5400, 0.50}, {7200, 0.05}, {48 * 3600, 0.05}};
  BidBrainJob job;
  job.work_hours = 12;
  job.reliable = 1;
  job.transient = 3;
  auto r = compareBidding(h, job, {});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const StrategyResult& ckpt = (*r)[1];
  EXPECT_EQ(ckpt.evictions, 4);
  EXPECT_GT(ckpt.lost_hours, 0);  // the work since the 1:00 checkpoint, and a restart
  const StrategyResult& bb = (*r)[3];
  EXPECT_EQ(bb.lost_hours, 0);   // AgileML: an evicted replica leaves at a step boundary, nothing redone
  EXPECT_LT(bb.time, ckpt.time);
  EXPECT_LT(bb.cost, (*r)[0].cost);
}

TEST(BidBrain, BadJobsAndMissingPricesAreRefused) {
  SpotHistory h = flatHistory(0.05, 0.20, 4);
  BidBrainJob job;
  job.reliable = 0;
  auto r = compareBidding(h, job, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("the state lives on the reliable tier"), std::string::npos);
  job.reliable = 1;
  h.on_demand.clear();
  r = compareBidding(h, job, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no on-demand price for it"), std::string::npos) << r.status().message();
}

TEST(BidBrain, TheGeneratorIsDeterministicAndSpiky) {
  SpotGenOptions o;
  o.days = 3;
  const SpotHistory a = generateSpotHistory(o), b = generateSpotHistory(o);
  EXPECT_EQ(spotHistoryToJson(a), spotHistoryToJson(b));
  ASSERT_EQ(a.markets.size(), 4u);
  double top = 0;
  for (const auto& [t, p] : a.markets[0].prices) top = std::max(top, p);
  EXPECT_GT(top, a.on_demand.at("c4.xlarge"));  // spikes above the on-demand price
}

}  // namespace
}  // namespace hydrozoa::sim
