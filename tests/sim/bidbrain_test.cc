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
  EXPECT_GT(estimateEviction(m, 0.1).beta, 0.2);             // the whole history
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

TEST(BidBrain, EvictionsLearntAsTimePassesWithinTheRestOfAnHour) {
  const SpotMarket m = spiky();
  // Step by step or at once, the same windows: the one-shot estimate's.
  EvictionLearner steps(m, 0.1), once(m, 0.1);
  for (Seconds t = 0; t <= 40 * 3600; t += 7 * 60) steps.advance(t);
  steps.advance(40 * 3600);
  once.advance(40 * 3600);
  EXPECT_EQ(steps.samples(), once.samples());
  EXPECT_DOUBLE_EQ(steps.within(3600).beta, estimateEviction(m, 0.1, 40 * 3600).beta);
  EXPECT_DOUBLE_EQ(steps.within(3600).tau, estimateEviction(m, 0.1, 40 * 3600).tau);
  // Within half an hour: of the 12 windows starting in an even hour, the 6
  // that start in its second half meet the spike within 1800 s (after
  // 1800, 1500, ... 300 s); those in an odd hour never do.
  const EvictionEstimate half = once.within(1800);
  EXPECT_NEAR(half.beta, 0.25, 0.01);
  EXPECT_NEAR(half.tau, 1050, 1);
  EXPECT_DOUBLE_EQ(once.within(0).beta, 0);
  EXPECT_DOUBLE_EQ(EvictionLearner(m, 0.1).within(3600).beta, 0);  // nothing seen yet
}

// A synthetic history of `days` from `start`, its markets' prices joined
// after `before`'s.
SpotHistory joined(const SpotHistory& before, const SpotGenOptions& o) {
  SpotHistory after = generateSpotHistory(o), h = before;
  for (size_t m = 0; m < h.markets.size(); ++m) {
    for (const auto& p : after.markets[m].prices) {
      if (p.first > h.markets[m].prices.back().first) h.markets[m].prices.push_back(p);
    }
  }
  h.end = after.end;
  return h;
}

TEST(BidBrain, DecisionsSeeNoPriceAfterThem) {
  // One calm week, then a second week that is calm or volatile: every
  // decision BidBrain makes in the first week is the same in both.
  SpotGenOptions o;
  o.days = 7;
  o.spike_every = 3 * 86400;
  const SpotHistory week = generateSpotHistory(o);
  o.start += 7 * 86400;
  o.seed = 2;
  o.spike_every = 1e9;
  const SpotHistory calm = joined(week, o);
  o.spike_every = 1800;
  const SpotHistory volatile_ = joined(week, o);
  ASSERT_NE(spotHistoryToJson(calm), spotHistoryToJson(volatile_));
  BidBrainJob job;
  job.reliable = 1;
  job.transient = 7;
  job.work_rate = {{"c4.xlarge", 4}, {"c4.2xlarge", 8}};
  BidBrainOptions opt;
  const Seconds weekEnds = week.end;
  // A job that ends within the first week: the same in every respect.
  job.work_hours = 48;
  opt.start = week.begin + 5 * 86400;
  auto a = compareBidding(calm, job, opt), b = compareBidding(volatile_, job, opt);
  ASSERT_TRUE(a.ok() && b.ok());
  const StrategyResult &x = (*a)[3], &y = (*b)[3];
  ASSERT_LT(opt.start + x.time, weekEnds);
  EXPECT_FALSE(x.decisions.empty());
  EXPECT_EQ(x.decisions, y.decisions);
  EXPECT_EQ(x.cost, y.cost);
  EXPECT_EQ(x.time, y.time);
  EXPECT_EQ(x.evictions, y.evictions);
  // One that runs into the second week: the same decisions up to its start.
  job.work_hours = 400;
  opt.start = week.begin + 6.5 * 86400;
  a = compareBidding(calm, job, opt);
  b = compareBidding(volatile_, job, opt);
  ASSERT_TRUE(a.ok() && b.ok());
  auto firstWeek = [&](const StrategyResult& r) {
    std::vector<BidDecision> d;
    for (const BidDecision& e : r.decisions) {
      if (e.at < weekEnds) d.push_back(e);
    }
    return d;
  };
  EXPECT_FALSE(firstWeek((*a)[3]).empty());
  EXPECT_EQ(firstWeek((*a)[3]), firstWeek((*b)[3]));
  EXPECT_NE((*a)[3].decisions, (*b)[3].decisions);  // after it, each week its own
}

TEST(BidBrain, ABiggerTypePaysOffByItsWorkRate) {
  // c4.2xlarge at 0.08 an hour does the work of two c4.xlarge at 0.05 each
  // (ν 8 against 4): dearer per instance, cheaper per work.
  SpotHistory h;
  h.markets.push_back({"c4.xlarge", "z", {{0, 0.05}, {96 * 3600.0, 0.05}}});
  h.markets.push_back({"c4.2xlarge", "z", {{0, 0.08}, {96 * 3600.0, 0.08}}});
  h.on_demand = {{"c4.xlarge", 0.199}, {"c4.2xlarge", 0.398}};
  h.begin = 0;
  h.end = 96 * 3600;
  BidBrainJob job;
  job.work_hours = 20;  // of one c4.xlarge
  job.reliable = 1;
  job.transient = 4;
  job.work_rate = {{"c4.xlarge", 4}, {"c4.2xlarge", 8}};
  auto r = compareBidding(h, job, {});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const StrategyResult& bb = (*r)[3];
  ASSERT_FALSE(bb.decisions.empty());
  for (const BidDecision& d : bb.decisions) EXPECT_EQ(d.market, "c4.2xlarge/z");
  // 1 c4.xlarge on demand and 4 c4.2xlarge: 4 + 32 units an hour of 80.
  EXPECT_NEAR(bb.time, 80.0 / 36 * 3600, 1);
  // Billed by the hour, the rest of the last one not charged (the thesis's
  // accounting: the next job uses it).
  EXPECT_NEAR(bb.cost, 80.0 / 36 * (0.199 + 4 * 0.08), 1e-9);
  // The spot baselines take the market cheapest per work too.
  EXPECT_NEAR((*r)[1].time, 80.0 / 40 * 3600, 1);  // 5 c4.2xlarge
  // Counting every type as one unit of work, the smaller is cheaper.
  job.work_rate.clear();
  r = compareBidding(h, job, {});
  ASSERT_TRUE(r.ok());
  for (const BidDecision& d : (*r)[3].decisions) EXPECT_EQ(d.market, "c4.xlarge/z");
  // A bad ν, φ, σ is refused by name.
  job.work_rate = {{"c4.xlarge", 0}};
  r = compareBidding(h, job, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("work rate (ν) of c4.xlarge"), std::string::npos);
  job.work_rate.clear();
  BidBrainOptions o;
  o.scaling = 1.5;
  EXPECT_FALSE(compareBidding(h, job, o).ok());
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

// Spot 0.05, but 0.50 (above the on-demand 0.20) from 1:30 to 2:00.
SpotHistory spikeFrom90Minutes() {
  SpotHistory h = flatHistory(0.05, 0.20, 48);
  h.markets[0].prices = {{0, 0.05}, {5400, 0.50}, {7200, 0.05}, {48 * 3600, 0.05}};
  return h;
}

TEST(BidBrain, AnEvictedHourIsFreeAndCheckpointRestartRedoesWork) {
  const SpotHistory h = spikeFrom90Minutes();
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

TEST(BidBrain, AChangeAndAnEvictionStallTheJob) {
  // The fixed bid is evicted at 1:30 (the price jumps above it for half an
  // hour) and buys again at 2:00: λ after the eviction, σ after the
  // purchase, the job computes nothing; BidBrain's model charged it.
  const SpotHistory h = spikeFrom90Minutes();
  BidBrainJob job;
  job.work_hours = 20;
  job.reliable = 1;
  job.transient = 3;
  BidBrainOptions o;
  o.eviction_overhead = 0;
  o.change_overhead = 0;
  auto quick = compareBidding(h, job, o);
  o.eviction_overhead = 300;
  o.change_overhead = 600;
  auto slow = compareBidding(h, job, o);
  ASSERT_TRUE(quick.ok() && slow.ok());
  // Removed at 1:32 (the notice): the reliable one, alone until 2:00 (the
  // price above on demand), stalls for λ; bought again at 2:00: all four
  // stall for σ. 300 + 4 × 600 instance-seconds lost, made up by four.
  EXPECT_NEAR((*slow)[2].time - (*quick)[2].time, (300 + 4 * 600) / 4.0, 1e-6);
  EXPECT_EQ((*slow)[0].time, (*quick)[0].time);  // on demand: nothing changes
}

}  // namespace
}  // namespace hydrozoa::sim
