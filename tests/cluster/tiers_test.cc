// The tiers of a job spec and the replay of the transient tier's market
// (cluster/tiers.h): every form parses and round-trips, every bad value is
// one error naming it, the market's price follows the trace at the replay's
// speed, and the bill adds up in trace time.
#include "cluster/tiers.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cluster/job_spec.h"
#include "cluster/job_yaml.h"

namespace hydrozoa::cluster {
namespace {

// A market whose price is 0.05 $/h, 1.00 for an hour from 01:00, 0.05 after.
std::string writeTrace() {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("hz-tiers-" + std::to_string(::getpid()) + ".json")).string();
  std::ofstream out(path);
  out << R"({"SpotPriceHistory": [
    {"AvailabilityZone": "us-east-1b", "InstanceType": "c4.xlarge", "SpotPrice": "0.050000", "Timestamp": "2016-03-14T00:00:00Z"},
    {"AvailabilityZone": "us-east-1b", "InstanceType": "c4.xlarge", "SpotPrice": "1.000000", "Timestamp": "2016-03-14T01:00:00Z"},
    {"AvailabilityZone": "us-east-1b", "InstanceType": "c4.xlarge", "SpotPrice": "0.050000", "Timestamp": "2016-03-14T02:00:00Z"},
    {"AvailabilityZone": "us-east-1a", "InstanceType": "c4.xlarge", "SpotPrice": "0.060000", "Timestamp": "2016-03-14T00:00:00Z"},
    {"AvailabilityZone": "us-east-1a", "InstanceType": "m4.large", "SpotPrice": "0.020000", "Timestamp": "2016-03-14T00:00:00Z"}],
  "OnDemandPrices": {"c4.xlarge": 0.199, "m4.large": 0.1}})";
  return path;
}

TEST(Tiers, AJobSpecsTiersPinItsReplicasAndRoundTrip) {
  auto s = parse("model: {name: mlp}\ncluster:\n  tiers: {reliable: 1, transient: 3, spot_trace: t.json, "
                 "market: c4.xlarge/us-east-1b, bid: 0.2, speed: 600, notice: 2s}\n");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->tiers.reliable, 1);
  EXPECT_EQ(s->tiers.transient, 3);
  EXPECT_EQ(*s->data_parallel, 4);
  EXPECT_EQ(*s->stages, 1);
  EXPECT_EQ(s->workers, 4);
  EXPECT_DOUBLE_EQ(*s->tiers.bid, 0.2);
  EXPECT_DOUBLE_EQ(s->tiers.notice, 2);
  EXPECT_EQ(s->tiers.bidder, "fixed");
  EXPECT_TRUE(s->tiers.regroup);  // NOTE [Regrouping at a step boundary]
  auto again = parseJobSpec(jobSpecToJson(*s), "job.yaml");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(jobSpecToJson(*again), jobSpecToJson(*s));
  // Every change restarting every worker, for comparison.
  s = parse("model: {name: mlp}\ncluster:\n  tiers: {reliable: 1, transient: 1, spot_trace: t.json, regroup: false}\n");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_FALSE(s->tiers.regroup);
  again = parseJobSpec(jobSpecToJson(*s), "job.yaml");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_FALSE(again->tiers.regroup);
  // AgileML's third stage from 3:1 on (NOTE [Reliable workers that compute nothing]).
  EXPECT_DOUBLE_EQ(s->tiers.reliable_idle_ratio, 16);
  s = parse("model: {name: mlp}\ncluster:\n  tiers: {reliable: 1, transient: 3, spot_trace: t.json, "
            "reliable_idle_ratio: 3}\n");
  ASSERT_TRUE(s.ok()) << s.status().message();
  again = parseJobSpec(jobSpecToJson(*s), "job.yaml");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_DOUBLE_EQ(again->tiers.reliable_idle_ratio, 3);
  // All transient, the state in checkpoints.
  s = parse("model: {name: mlp}\ncluster:\n  tiers: {reliable: 0, transient: 4, spot_trace: t.json, "
            "checkpoint_restart: true}\n");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->tiers.enabled());
  EXPECT_EQ(*s->data_parallel, 4);
  again = parseJobSpec(jobSpecToJson(*s), "job.yaml");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(again->tiers.checkpoint_restart);
}

TEST(Tiers, BadTiersAreOneErrorNamingThem) {
  const std::string head = "model: {name: mlp}\n";
  struct Case {
    std::string yaml, says;
  };
  const Case cases[] = {
      {"cluster: {tiers: {reliable: 0, transient: 4, spot_trace: t.json}}", "leaves no reliable worker"},
      {"cluster: {tiers: {reliable: 1, transient: 3}}", "spot_trace"},
      {"cluster: {tiers: {reliable: 1, transient: 3, spot_trace: t.json, bid: -1}}", "bid"},
      {"cluster: {tiers: {reliable: 1, transient: 3, spot_trace: t.json, speed: 0}}", "speed"},
      {"cluster: {tiers: {reliable: 1, transient: 3, spot_trace: t.json, price: 3}}", "unknown key \"price\""},
      {"cluster: {tiers: {reliable: 1, transient: 3, spot_trace: t.json, bidder: cheapest}}", "bidder \"cheapest\""},
      {"cluster: {tiers: {reliable: 0, transient: 3, spot_trace: t.json}}", "or checkpoint_restart: true"},
      {"cluster: {tiers: {reliable: 1, transient: 3, spot_trace: t.json, checkpoint_restart: true}}",
       "checkpoint_restart is for tiers that are all transient"},
      {"cluster: {tiers: {reliable: 0, transient: 0, spot_trace: t.json, checkpoint_restart: true}}",
       "needs transient workers"},
      {"cluster: {tiers: {reliable: 0, transient: 2, spot_trace: t.json, checkpoint_restart: true, bidder: bidbrain}}",
       "BidBrain bids beside a reliable tier"},
      {"cluster: {tiers: {reliable: 1, transient: 3, spot_trace: t.json, bidder: bidbrain, bid: 0.1}}",
       "bid is BidBrain's to choose"},
      {"cluster: {tiers: {reliable: 1, transient: 3, spot_trace: t.json}}\nplan: {data_parallel: 2}",
       "plan.data_parallel is 2"},
      {"cluster: {workers: 8, tiers: {reliable: 1, transient: 3, spot_trace: t.json}}\nplan: {stages: 2}",
       "stages: 1"},
      {"cluster: {tiers: {reliable: 1, transient: 3, spot_trace: t.json}}\nscaling: {policy: adabatch}",
       "scaling.policy adabatch"},
      {"cluster: {tiers: {reliable: 1, transient: 2, spot_trace: t.json}}\ntraining: {global_batch: 64}",
       "3 replicas do not divide"},
      {"cluster: {tiers: {reliable: 1, transient: 3, spot_trace: t.json, regroup: sometimes}}", "regroup"},
      {"cluster: {tiers: {reliable: 1, transient: 3, spot_trace: t.json, reliable_idle_ratio: -1}}",
       "reliable_idle_ratio -1 must be a transient:reliable ratio from 0"},
      {"cluster: {tiers: {reliable: 1, transient: 3, spot_trace: t.json, reliable_idle_ratio: never}}",
       "reliable_idle_ratio"},
  };
  for (const Case& c : cases) {
    auto s = parse(head + c.yaml);
    ASSERT_FALSE(s.ok()) << c.yaml;
    EXPECT_NE(s.status().message().find(c.says), std::string::npos) << s.status().message();
    EXPECT_NE(s.status().message().find("job.yaml"), std::string::npos) << s.status().message();
  }
  TierSpec t;
  ASSERT_TRUE(parseTierCounts("reliable=0,transient=3", "--tiers", &t).ok());  // for checkpoint_restart
  t.spot_trace = "t.json";
  EXPECT_NE(validateTiers(t, "--tiers").message().find("leaves no reliable worker"), std::string::npos);
  t.checkpoint_restart = true;
  EXPECT_TRUE(validateTiers(t, "--tiers").ok());
  EXPECT_FALSE(parseTierCounts("transient=3", "--tiers", &t).ok());  // reliable= is required
  EXPECT_FALSE(parseTierCounts("spot=3", "--tiers", &t).ok());
  ASSERT_TRUE(parseTierCounts("reliable=2,transient=6", "--tiers", &t).ok());
  EXPECT_EQ(t.reliable + t.transient, 8);
}

TEST(Tiers, TheMarketReplaysTheTraceAndBillsInTraceTime) {
  const std::string path = writeTrace();
  TierSpec spec;
  spec.reliable = 1;
  spec.transient = 2;
  spec.spot_trace = path;
  spec.speed = 3600;  // a trace hour per second
  // Unnamed: the cheapest on-demand type (m4.large); named by type: its first zone.
  auto m = TierMarket::open(spec);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->market().type, "m4.large");
  spec.market = "c4.xlarge";
  m = TierMarket::open(spec);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->market().zone, "us-east-1a");
  spec.market = "c4.xlarge/us-east-1b";
  m = TierMarket::open(spec);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_DOUBLE_EQ(m->bid(), 0.199);  // the on-demand price by default
  EXPECT_FALSE(m->outbid(0.5));
  EXPECT_TRUE(m->outbid(1.5));  // 01:30 in the trace
  EXPECT_FALSE(m->outbid(2.5));
  EXPECT_FALSE(m->outbid(1000));  // past its end the last price holds
  // A spike between two looks is still an eviction (the cloud's, at once).
  EXPECT_TRUE(m->outbidBetween(0.5, 2.5));
  EXPECT_FALSE(m->outbidBetween(2.0, 2.5));
  EXPECT_FALSE(m->outbidBetween(0, 0.9));
  // One reliable worker, and two transient ones held from 00:00, evicted at
  // 01:12 (their hour from 01:00 at $1.00 is refunded), bought again at
  // 02:00 at $0.05 and let go at that hour's end: each hour is billed when
  // it begins, at the price then.
  m->start(0);
  m->acquire(0, 2, m->bid());
  m->advance(0.5);
  EXPECT_EQ(m->held(), 2);
  EXPECT_NEAR(m->hourLeft(0.5), 0.5, 1e-9);
  m->advance(1.1);
  EXPECT_NEAR(m->summary(1, 2)["usd"]["transient"].get<double>(), 2 * (0.05 + 1.0), 1e-9);
  m->evict(1.2);
  EXPECT_EQ(m->held(), 0);
  m->acquire(2, 2, m->bid());
  m->lapse();
  m->advance(2.5);
  EXPECT_EQ(m->held(), 2);
  m->advance(3.5);
  EXPECT_EQ(m->held(), 0);  // let go at 03:00
  const Json sum = m->summary(1, 2);
  EXPECT_NEAR(sum["trace_hours"].get<double>(), 3.5, 1e-9);
  EXPECT_EQ(sum["billed_hours"], 4);  // the reliable worker's hours begun: 00:00, 01:00, 02:00, 03:00
  EXPECT_NEAR(sum["usd"]["reliable"].get<double>(), 4 * 0.199, 1e-9);
  EXPECT_NEAR(sum["usd"]["transient"].get<double>(), 2 * 0.05 + 2 * 0.05, 1e-9);
  EXPECT_NEAR(sum["transient_hours"].get<double>(), 2 * 1.2 + 2 * 1.0, 1e-9);
  EXPECT_NEAR(sum["all_on_demand_usd"].get<double>(), 3 * 4 * 0.199, 1e-9);

  // What the trace lacks is one error naming the file and the fix.
  spec.market = "p2.xlarge";
  m = TierMarket::open(spec);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("no price records for p2.xlarge"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("c4.xlarge/us-east-1b"), std::string::npos);
  spec.market = "";
  spec.start = "2015-01-01T00:00:00Z";
  m = TierMarket::open(spec);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("outside the trace"), std::string::npos) << m.status().message();
  spec.start = "";
  spec.spot_trace = path + ".missing";
  EXPECT_FALSE(TierMarket::open(spec).ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace hydrozoa::cluster
