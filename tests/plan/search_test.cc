#include "plan/search.h"

#include <gtest/gtest.h>

#include "plan/plan.h"
#include "plan/toy_profile.h"

namespace hydrozoa::plan {
namespace {

using testing::toyProfile;

Catalog aci() {
  auto c = loadCatalog("aci");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

SearchOptions basic(int workers) {
  SearchOptions o;
  o.workers = workers;
  o.bandwidth = 1e9;
  o.memory_limit = 8 * kGB;
  return o;
}

std::vector<std::pair<int, int>> strategies(const SearchResult& r) {
  std::vector<std::pair<int, int>> s;
  for (const auto& c : r.considered) s.emplace_back(c.data_parallel, c.stages);
  return s;
}

TEST(SearchPlan, SixteenWorkersConsiderStrategiesThatUseThemAll) {
  auto r = searchPlan(toyProfile(20), aci(), basic(16));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(strategies(*r), (std::vector<std::pair<int, int>>{{16, 1}, {8, 2}, {4, 4}, {2, 8}, {1, 16}}));
}

TEST(SearchPlan, AllStrategiesIsAlgorithmOne) {
  SearchOptions o = basic(6);
  o.all_strategies = true;
  auto r = searchPlan(toyProfile(20), aci(), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(strategies(*r), (std::vector<std::pair<int, int>>{{6, 1}, {3, 2}, {2, 3}, {1, 4}, {1, 5}, {1, 6}}));
  EXPECT_NE(r->considered[3].reason.find("uses 4 of 6 workers"), std::string::npos);
}

TEST(SearchPlan, GlobalBatchIsHonouredByEveryRow) {
  SearchOptions o = basic(8);
  o.global_batch = 64;
  auto r = searchPlan(toyProfile(12), aci(), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const auto& c : r->considered) {
    ASSERT_TRUE(c.feasible) << c.reason;
    EXPECT_EQ(c.globalBatch(), 64) << c.data_parallel << "x" << c.stages;
  }
}

TEST(SearchPlan, ReplicasMustDivideTheGlobalBatch) {
  SearchOptions o = basic(12);
  o.global_batch = 64;
  o.all_strategies = true;
  auto r = searchPlan(toyProfile(12), aci(), o);
  ASSERT_TRUE(r.ok());
  for (const auto& c : r->considered) EXPECT_EQ(64 % c.data_parallel, 0) << c.data_parallel;
}

// One replica of a 4-stage pipeline with 8 microbatches, no memory limit.
SearchOptions fourStages() {
  SearchOptions o = basic(4);
  o.data_parallel = 1;
  o.stages = 4;
  o.microbatches = 8;
  o.memory_limit.reset();
  return o;
}

TEST(SearchPlan, OneReplicaIterationIsExactlyR) {
  SearchOptions o = fourStages();
  const auto prof = toyProfile(10);
  auto r = searchPlan(prof, aci(), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Candidate& c = r->best();
  const ChainCosts costs = chainCosts(prof, *prof.at(c.microbatch_size), o.bandwidth);
  EXPECT_EQ(c.iteration, pipelineTime(costs, c.partition, 8).total);
  EXPECT_EQ(c.allreduce, 0);
}

// NOTE [A pipeline on a shared host]: four stages of one microbatch on two
// cores never compute more than two at once (a stage's update beside the
// next one's backward pass), so nothing slows: the iteration is R on cores
// of their own plus the first stage's update, which comes last, where
// scaling every time by 4/2 would have doubled it.
TEST(SearchPlan, OnASharedHostAPipelineOfOneMicrobatchIsNotSlowed) {
  SearchOptions o = fourStages();
  o.microbatches = 1;
  o.host_cores = 2;
  auto prof = toyProfile(10);
  for (auto& l : prof.layers) l.optimizer_ms = 0.01;  // far shorter than any backward pass
  auto r = searchPlan(prof, aci(), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Candidate& c = r->best();
  EXPECT_EQ(c.compute_scale, 2);
  EXPECT_TRUE(c.pipeline.shared);
  const ChainCosts costs = chainCosts(prof, *prof.at(c.microbatch_size), o.bandwidth);
  const Seconds R = pipelineTime(costs, c.partition, 1).total;
  EXPECT_NEAR(c.pipeline.total, R, 1e-9);
  Seconds firstUpdate = 0;
  for (int i = 0; i <= c.partition.lastLayer(0, 10); ++i) firstUpdate += 0.01e-3;
  EXPECT_NEAR(c.iteration, R + firstUpdate, 1e-9);
  EXPECT_NEAR(c.stage_details[0].update, firstUpdate, 1e-12);
  EXPECT_NEAR(c.stage_details[0].tail, firstUpdate, 1e-12);
  for (size_t s = 1; s < c.stage_details.size(); ++s) EXPECT_EQ(c.stage_details[s].tail, 0) << s;
}

// The toy profile planned as A x B on 4 workers with allreduce overheads.
Result<SearchResult> planWithAllreduce(const profile::Profile& prof, int A, int B) {
  SearchOptions o = basic(4);
  o.data_parallel = A;
  o.stages = B;
  o.allreduce_alpha = 1e-10;
  o.allreduce_beta = 1e-4;
  return searchPlan(prof, aci(), o);
}

// Every bucket's ring allreduce of `bytes` (a stage's layers) over A
// replicas at 1 GB/s, one after another.
Seconds bucketsInSequence(const std::vector<Bytes>& bytes, int A, double alpha, Seconds beta) {
  Seconds total = 0;
  for (const auto& bucket : gradientBuckets(bytes, kFirstBucketBytes, kBucketBytes)) {
    Bytes b = 0;
    for (int i : bucket) b += bytes[i];
    total += ringAllreduceTime(b, A, 1e9, alpha, beta);
  }
  return total;
}

// 2 replicas of 2 stages, 3 microbatches of 4, with allreduce overheads.
SearchOptions twoByTwoReducing() {
  SearchOptions o = basic(4);
  o.data_parallel = 2;
  o.stages = 2;
  o.microbatch_size = 4;
  o.microbatches = 3;
  o.allreduce_alpha = 1e-10;
  o.allreduce_beta = 1e-4;
  return o;
}

TEST(SearchPlan, ALinksLatencyIsPaidByEveryTransferAndEveryAllreduceRound) {
  const auto prof = toyProfile(6);
  SearchOptions o = twoByTwoReducing();
  auto without = searchPlan(prof, aci(), o);
  o.latency = 0.002;
  o.partition = without.ok() ? std::optional<Partition>(without->best().partition) : std::nullopt;
  auto with = searchPlan(prof, aci(), o);
  ASSERT_TRUE(without.ok() && with.ok());
  const Candidate& a = without->best();
  const Candidate& b = with->best();
  // Each cut costs the latency more.
  const ChainCosts plain = chainCosts(prof, *prof.at(4), o.bandwidth);
  const ChainCosts delayed = chainCosts(prof, *prof.at(4), o.bandwidth, 0.002);
  ASSERT_EQ(plain.cut.size(), delayed.cut.size());
  for (size_t i = 0; i < plain.cut.size(); ++i) EXPECT_NEAR(delayed.cut[i], plain.cut[i] + 0.002, 1e-12);
  EXPECT_NEAR(b.pipeline.total, pipelineTime(delayed, b.partition, 3).total, 1e-12);
  EXPECT_GT(b.pipeline.total, a.pipeline.total + 2 * 0.002 - 1e-12);  // one cut, forward and backward
  // Each of an allreduce's 2(A-1) rounds pays it once.
  for (size_t s = 0; s < 2; ++s) {
    std::vector<Bytes> bytes;
    for (int i = b.stage_details[s].first_layer; i <= b.stage_details[s].last_layer; ++i) {
      bytes.push_back(prof.layers[i].parameter_bytes);
    }
    EXPECT_NEAR(b.stage_details[s].allreduce, bucketsInSequence(bytes, 2, 1e-10, 1e-4 + 0.002), 1e-12);
  }
  // The plan records it; plans without it read as none.
  const Plan p = makePlan(*with, prof, o, "aci");
  Json j = planToJson(p);
  EXPECT_EQ(j["inputs"]["latency_s"], 0.002);
  EXPECT_EQ(planFromJson(j, "plan.json")->latency, 0.002);
  j["inputs"].erase("latency_s");
  EXPECT_EQ(planFromJson(j, "plan.json")->latency, 0);
  // Out of range is refused.
  o.latency = -1;
  EXPECT_FALSE(searchPlan(prof, aci(), o).ok());
}

// The transport's own latency per message (the probe's ping-pong) is paid
// by every transfer between stages, and by no allreduce round: β, fitted on
// the same transport, already holds it.
TEST(SearchPlan, TheTransportsLatencyIsPaidByEveryTransferOnly) {
  const auto prof = toyProfile(6);
  SearchOptions o = twoByTwoReducing();
  auto without = searchPlan(prof, aci(), o);
  ASSERT_TRUE(without.ok());
  o.partition = without->best().partition;
  o.transfer_latency = 0.003;
  auto with = searchPlan(prof, aci(), o);
  ASSERT_TRUE(with.ok()) << with.status().message();
  const Candidate& a = without->best();
  const Candidate& b = with->best();
  const ChainCosts delayed = chainCosts(prof, *prof.at(4), o.bandwidth, 0.003);
  EXPECT_NEAR(b.pipeline.total, pipelineTime(delayed, b.partition, 3).total, 1e-12);
  EXPECT_GT(b.pipeline.total, a.pipeline.total + 2 * 0.003 - 1e-12);
  for (size_t s = 0; s < 2; ++s) EXPECT_EQ(b.stage_details[s].allreduce, a.stage_details[s].allreduce) << s;
  // The plan records it; plans without it read as none; out of range is refused.
  Json j = planToJson(makePlan(*with, prof, o, "aci"));
  EXPECT_EQ(j["inputs"]["transfer_latency_s"], 0.003);
  EXPECT_EQ(planFromJson(j, "plan.json")->transfer_latency, 0.003);
  j["inputs"].erase("transfer_latency_s");
  EXPECT_EQ(planFromJson(j, "plan.json")->transfer_latency, 0);
  // NOTE [A message's delivery on busy cores]: where the probe timed it,
  // a transfer pays its mean beyond its bytes over the bandwidth, unless the
  // ping-pong's latency is more.
  profile::NetworkProfile network;
  network.bandwidth = 1e9;
  network.latency = 40e-6;
  SearchOptions measured;
  useMeasuredTransport(measured, network);
  EXPECT_EQ(measured.transfer_latency, 40e-6);
  network.delivery = profile::MessageDelivery{4000, 250e-6, 90e-6, 150e-6, 0};
  useMeasuredTransport(measured, network);
  EXPECT_NEAR(measured.transfer_latency, 246e-6, 1e-12);
  network.delivery->mean = 30e-6;
  useMeasuredTransport(measured, network);
  EXPECT_EQ(measured.transfer_latency, 40e-6);
  // NOTE [Messages one at a time]: the helpers' CPU per message sent and
  // received beyond the burst's, at the probe's size, goes half to each side
  // of every row; none when the burst's is already as much.
  network.messages = profile::MessageCpuTable{{{8, 40e-6, 10e-6, 5e-6, 30e-6}, {7992, 60e-6, 20e-6, 5e-6, 50e-6}}};
  network.delivery->helper_cpu = 160e-6;  // at 4,000 bytes the burst's is 15 + 40 us
  useMeasuredTransport(measured, network);
  ASSERT_TRUE(measured.message_cpu);
  EXPECT_NEAR(measured.message_cpu->rows[0].send_threads, 10e-6 + 52.5e-6, 1e-12);
  EXPECT_NEAR(measured.message_cpu->rows[1].receive, 50e-6 + 52.5e-6, 1e-12);
  EXPECT_EQ(measured.message_cpu->rows[1].send, 60e-6);  // the compute thread's own: as timed
  EXPECT_EQ(measured.message_cpu->rows[0].post, 5e-6);
  network.delivery->helper_cpu = 30e-6;
  useMeasuredTransport(measured, network);
  EXPECT_EQ(measured.message_cpu->rows[1].receive, 50e-6);
  o.transfer_latency = 61;
  auto bad = searchPlan(prof, aci(), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("network.latency_s"), std::string::npos) << bad.status().message();
}

// NOTE [What a message costs the cores] (profile/network.cc): the compute
// threads' part of every transfer's message is charged to the passes that
// send and receive it; on a host whose cores the compute threads fill, the
// other threads' part too.
TEST(SearchPlan, MessagesTakeCpuFromThePassesOnEitherSide) {
  const auto prof = toyProfile(6);
  SearchOptions o = twoByTwoReducing();
  auto without = searchPlan(prof, aci(), o);
  ASSERT_TRUE(without.ok());
  o.partition = without->best().partition;
  o.message_cpu = profile::MessageCpuTable{{{8, 1e-3, 2e-3, 4e-4, 3e-3}}};
  auto spare = searchPlan(prof, aci(), o);
  o.host_cores = 64;  // 4 workers, 60 cores to spare
  auto spareCores = searchPlan(prof, aci(), o);
  o.host_cores = 4;  // every core computes
  auto full = searchPlan(prof, aci(), o);
  ASSERT_TRUE(spare.ok() && spareCores.ok() && full.ok());
  const Partition& p = without->best().partition;
  ChainCosts own = chainCosts(prof, *prof.at(4), o.bandwidth);
  addMessageCpu(own, *prof.at(4), *o.message_cpu, /*fullHost=*/false);
  EXPECT_DOUBLE_EQ(own.send[0], 1e-3);
  EXPECT_DOUBLE_EQ(own.receive[0], 4e-4);
  EXPECT_NEAR(spare->best().pipeline.total, pipelineTime(own, p, 3).total, 1e-12);
  EXPECT_NEAR(spareCores->best().pipeline.total, spare->best().pipeline.total, 1e-12);
  // Each of 3 microbatches: a forward and a backward pass on each side of the one boundary.
  EXPECT_GT(spare->best().pipeline.total, without->best().pipeline.total + 2 * (1e-3 + 4e-4) - 1e-12);
  addMessageCpu(own, *prof.at(4), *o.message_cpu, /*fullHost=*/true);
  EXPECT_DOUBLE_EQ(own.send[0], 3e-3);
  EXPECT_DOUBLE_EQ(own.receive[0], 3.4e-3);
  EXPECT_GT(full->best().pipeline.total, spare->best().pipeline.total + 2 * (2e-3 + 3e-3) - 1e-12);
  // The per-stage times are the passes' own (what the runtime's traces time).
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_EQ(full->best().stage_details[s].forward, without->best().stage_details[s].forward) << s;
  }
}

TEST(SearchPlan, AllreduceTermUsesTheReplicaGroupSize) {
  const auto prof = toyProfile(6);
  auto r = planWithAllreduce(prof, 4, 1);
  ASSERT_TRUE(r.ok());
  const Candidate& c = r->best();
  const ChainCosts costs = chainCosts(prof, *prof.at(c.microbatch_size), 1e9);
  std::vector<Bytes> bytes;
  for (const auto& l : prof.layers) bytes.push_back(l.parameter_bytes);
  // Every bucket's allreduce over the 4 replicas, one after another; the
  // iteration waits for what outlasts the backward pass.
  const Seconds total = bucketsInSequence(bytes, 4, 1e-10, 1e-4);
  const AllreduceTime expected = overlappedAllreduce(bytes, costs.backward, 0, 4, 1e9, 1e-10, 1e-4);
  ASSERT_EQ(c.stage_details.size(), 1u);
  EXPECT_NEAR(c.stage_details[0].allreduce, total, 1e-12);
  EXPECT_NEAR(expected.total, total, 1e-12);
  EXPECT_NEAR(c.allreduce, expected.exposed, 1e-12);
  EXPECT_LT(c.allreduce, total);  // some of it hides behind the backward pass
  EXPECT_NEAR(c.iteration, c.pipeline.total + c.allreduce, 1e-12);
}

TEST(SearchPlan, AStageAfterTheFirstHidesItsAllreduceBehindTheStagesBeforeIt) {
  const auto prof = toyProfile(6);
  auto r = planWithAllreduce(prof, 2, 2);
  ASSERT_TRUE(r.ok());
  const Candidate& c = r->best();
  const ChainCosts costs = chainCosts(prof, *prof.at(c.microbatch_size), 1e9);
  ASSERT_EQ(c.stage_details.size(), 2u);
  auto stageOf = [&](const StageDetail& d) {
    std::vector<Bytes> bytes;
    std::vector<Seconds> backward;
    for (int i = d.first_layer; i <= d.last_layer; ++i) {
      bytes.push_back(prof.layers[i].parameter_bytes);
      backward.push_back(costs.backward[i]);
    }
    return std::make_pair(bytes, backward);
  };
  const auto [b0, r0] = stageOf(c.stage_details[0]);
  const auto [b1, r1] = stageOf(c.stage_details[1]);
  const Seconds drain = c.stage_details[0].backward + costs.cut[c.stage_details[0].last_layer];
  const Seconds x0 = overlappedAllreduce(b0, r0, 0, 2, 1e9, 1e-10, 1e-4).exposed;
  const Seconds x1 = overlappedAllreduce(b1, r1, drain, 2, 1e9, 1e-10, 1e-4).exposed;
  EXPECT_NEAR(c.stage_details[0].allreduce_exposed, x0, 1e-12);
  EXPECT_NEAR(c.stage_details[1].allreduce_exposed, x1, 1e-12);
  EXPECT_NEAR(c.allreduce, std::max(x0, x1), 1e-12);
}

// Four replicas of one stage, with an allreduce to pay.
SearchOptions fourReplicas() {
  SearchOptions o = basic(4);
  o.data_parallel = 4;
  o.stages = 1;
  o.allreduce_alpha = 1e-10;
  o.allreduce_beta = 1e-4;
  return o;
}

TEST(SearchPlan, OnAFullHostTheWholeAllreduceIsCharged) {
  const auto prof = toyProfile(6);
  SearchOptions o = fourReplicas();
  o.host_cores = 8;  // 4 workers on 8 cores: buckets hide behind the backward pass
  auto spare = searchPlan(prof, aci(), o);
  o.host_cores = 4;  // every core computes: the allreduce takes their time
  auto full = searchPlan(prof, aci(), o);
  ASSERT_TRUE(spare.ok() && full.ok());
  const Candidate& a = spare->best();
  const Candidate& b = full->best();
  ASSERT_EQ(a.microbatch_size, b.microbatch_size);
  EXPECT_EQ(a.compute_scale, 1);
  EXPECT_EQ(b.compute_scale, 1);
  EXPECT_NEAR(a.stage_details[0].allreduce, b.stage_details[0].allreduce, 1e-12);
  EXPECT_LT(a.allreduce, a.stage_details[0].allreduce);
  EXPECT_NEAR(b.stage_details[0].allreduce_exposed, b.stage_details[0].allreduce, 1e-12);
  EXPECT_NEAR(b.iteration, b.pipeline.total + b.stage_details[0].allreduce, 1e-12);
}

// Replicas on one host sum through shared memory on their compute threads:
// every bucket after the backward pass, whether or not the host is full,
// at the shared host's pace, and no link, α, β or latency in it.
TEST(SearchPlan, ReplicasSharingMemoryPayEveryBucketOnTheComputeThread) {
  const auto prof = toyProfile(6);
  std::vector<Bytes> bytes;
  for (const auto& l : prof.layers) bytes.push_back(l.parameter_bytes);
  SearchOptions o = fourReplicas();
  o.latency = 0.5;  // would dwarf everything if it applied
  o.shared_memory = SharedMemoryCost{2e-9, 1e-4, 2};
  for (const int cores : {8, 4, 2}) {
    o.host_cores = cores;
    auto r = searchPlan(prof, aci(), o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const Candidate& c = r->best();
    SharedMemoryCost scaled = *o.shared_memory;
    scaled.seconds_per_byte *= c.compute_scale;
    scaled.seconds_per_allreduce *= c.compute_scale;
    const Seconds expect = sharedMemoryAllreduce(bytes, 0, 4, scaled).total;
    EXPECT_NEAR(c.stage_details[0].allreduce, expect, 1e-12) << cores;
    EXPECT_NEAR(c.stage_details[0].allreduce_exposed, expect, 1e-12) << cores;
    EXPECT_NEAR(c.iteration, c.pipeline.total + expect + c.stage_details[0].update, 1e-12) << cores;
  }
  // Each replica holds its slot of the segment: the gradients once more.
  o.host_cores = 8;
  auto shm = searchPlan(prof, aci(), o);
  SearchOptions gloo = o;
  gloo.shared_memory.reset();
  auto ring = searchPlan(prof, aci(), gloo);
  ASSERT_TRUE(shm.ok() && ring.ok());
  ASSERT_EQ(shm->best().microbatch_size, ring->best().microbatch_size);
  Bytes params = 0;
  for (Bytes b : bytes) params += b;
  EXPECT_EQ(shm->best().stage_details[0].memory, ring->best().stage_details[0].memory + params);
  o.shared_memory->replicas = 1;
  EXPECT_FALSE(searchPlan(prof, aci(), o).ok());
}

// NOTE [Allreduce on a shared host]: the allreduce's CPU work (α, β) slows
// down with the compute on an oversubscribed host; the link (1/D) and its
// latency do not.
TEST(SearchPlan, OnAnOversubscribedHostTheAllreducesCpuWorkIsScaledAsTheCompute) {
  const auto prof = toyProfile(6);
  SearchOptions o = fourReplicas();
  o.latency = 0.002;
  std::vector<Bytes> bytes;
  for (const auto& l : prof.layers) bytes.push_back(l.parameter_bytes);
  for (const int cores : {4, 2, 1}) {  // 4 workers: a core each, 2 to a core, 4 to a core
    o.host_cores = cores;
    auto r = searchPlan(prof, aci(), o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const Candidate& c = r->best();
    const double s = 4.0 / cores;
    EXPECT_EQ(c.compute_scale, s);
    EXPECT_NEAR(c.stage_details[0].allreduce, bucketsInSequence(bytes, 4, s * 1e-10, s * 1e-4 + 0.002), 1e-12);
    EXPECT_NEAR(c.allreduce, c.stage_details[0].allreduce, 1e-12);  // a full host: all of it is charged
  }
}

// NOTE [The update]: each stage's optimizer step follows its allreduce; a
// stage after the first steps while the stages before it still drain their
// backward passes, and the iteration waits only for what outlasts them.
profile::Profile withUpdates(profile::Profile prof, double msPerLayer) {
  for (auto& l : prof.layers) l.optimizer_ms = l.parameter_bytes > 0 ? msPerLayer : 0;
  return prof;
}

TEST(SearchPlan, OneReplicaWaitsForItsUpdateAfterThePipeline) {
  const auto prof = withUpdates(toyProfile(6), 2.0);
  SearchOptions o = basic(1);
  o.microbatch_size = 4;  // pinned: a longer tail would favour more microbatches
  o.microbatches = 2;
  auto r = searchPlan(prof, aci(), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Candidate& c = r->best();
  EXPECT_NEAR(c.stage_details[0].update, 6 * 2e-3, 1e-12);
  EXPECT_NEAR(c.update, 6 * 2e-3, 1e-12);
  EXPECT_NEAR(c.iteration, c.pipeline.total + 6 * 2e-3, 1e-12);
  // A profile from before updates were measured plans as it always did.
  auto old = searchPlan(toyProfile(6), aci(), o);
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->best().update, 0);
  EXPECT_NEAR(old->best().iteration, c.pipeline.total, 1e-12);
}

TEST(SearchPlan, ALaterStagesUpdateOverlapsTheBackwardPassesDrainingBeforeIt) {
  SearchOptions o = basic(2);
  o.data_parallel = 1;
  o.stages = 2;
  for (const double ms : {0.01, 1000.0}) {  // shorter than the drain, then far longer
    const auto prof = withUpdates(toyProfile(6), ms);
    auto r = searchPlan(prof, aci(), o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const Candidate& c = r->best();
    ASSERT_EQ(c.stage_details.size(), 2u);
    const ChainCosts costs = chainCosts(prof, *prof.at(c.microbatch_size), o.bandwidth);
    const StageDetail& s0 = c.stage_details[0];
    const StageDetail& s1 = c.stage_details[1];
    const Seconds drain = s0.backward + costs.cut[s0.last_layer];
    EXPECT_NEAR(s0.update, (s0.last_layer - s0.first_layer + 1) * ms / 1e3, 1e-12);
    EXPECT_NEAR(s0.tail, s0.update, 1e-12);
    EXPECT_NEAR(s1.tail, std::max<Seconds>(0, s1.update - drain), 1e-12);
    EXPECT_NEAR(c.iteration, c.pipeline.total + std::max(s0.tail, s1.tail), 1e-12);
    EXPECT_NEAR(c.update, std::max(s0.tail, s1.tail), 1e-12);  // no allreduce: all of the tail is update
  }
}

// A replicated pipeline (A > 1, B > 1) copies each stage's state aside
// before its update (recovery's step before): that copy is part of the
// update; other plans, and plans without recovery, do not make it.
TEST(SearchPlan, AReplicatedPipelinesUpdateIncludesCopyingTheStepBefore) {
  auto prof = withUpdates(toyProfile(6), 2.0);
  for (auto& l : prof.layers) l.snapshot_ms = l.parameter_bytes > 0 ? 0.5 : 0;
  auto updateOf = [&](int A, int B, bool recovery) {
    SearchOptions o = basic(A * B);
    o.data_parallel = A;
    o.stages = B;
    o.recovery_copies = recovery;
    auto r = searchPlan(prof, aci(), o);
    EXPECT_TRUE(r.ok()) << r.status().message();
    const StageDetail& d = r->best().stage_details[0];
    return std::pair{d.update, d.last_layer - d.first_layer + 1};
  };
  const auto [replicated, layers] = updateOf(2, 2, true);
  EXPECT_NEAR(replicated, layers * (2.0 + 0.5) / 1e3, 1e-12);
  const auto [noRecovery, layers2] = updateOf(2, 2, false);
  EXPECT_NEAR(noRecovery, layers2 * 2.0 / 1e3, 1e-12);
  const auto [dataParallel, all] = updateOf(2, 1, true);
  EXPECT_NEAR(dataParallel, all * 2.0 / 1e3, 1e-12);
  const auto [pipeline, layers3] = updateOf(1, 2, true);
  EXPECT_NEAR(pipeline, layers3 * 2.0 / 1e3, 1e-12);
}

TEST(SearchPlan, TheUpdateFollowsTheAllreduceAndComputesAtTheSharedHostsPace) {
  const auto prof = withUpdates(toyProfile(6), 3.0);
  SearchOptions o = fourReplicas();
  for (const int cores : {8, 4, 2}) {  // spare cores, a full host, two workers to a core
    o.host_cores = cores;
    auto r = searchPlan(prof, aci(), o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const Candidate& c = r->best();
    const StageDetail& d = c.stage_details[0];
    EXPECT_NEAR(d.update, c.compute_scale * 6 * 3e-3, 1e-12);
    // One stage: nothing drains after it, so all of its allreduce's tail and its update are waited for.
    EXPECT_NEAR(d.tail, d.allreduce_exposed + d.update, 1e-12);
    EXPECT_NEAR(c.iteration, c.pipeline.total + c.allreduce + c.update, 1e-12);
    EXPECT_NEAR(c.update, d.update, 1e-12);
  }
}

TEST(ComputeScale, WorkersSharingAHostsCoresComputeSlower) {
  EXPECT_EQ(computeScale(4, 1, 0), 1);  // no shared host: a core per thread
  EXPECT_EQ(computeScale(2, 1, 2), 1);
  EXPECT_EQ(computeScale(1, 1, 8), 1);
  EXPECT_EQ(computeScale(4, 1, 2), 2);
  EXPECT_EQ(computeScale(3, 1, 2), 1.5);
  EXPECT_EQ(computeScale(2, 2, 2), 2);
  EXPECT_EQ(computeScale(2, 0, 2), 1);  // threads below one count as one
}

// NOTE [Compute beside busy cores]: two replicas on two cores that slow each
// other 1.4× compute 1.4× longer and so does their update; the allreduce's
// fit, measured with both busy, is as it was; one worker alone is as fast
// as on a host of its own.
TEST(SearchPlan, ReplicasOnBusyCoresComputeAsSlowlyAsTheProfileMeasured) {
  const auto prof = withUpdates(toyProfile(6), 3.0);
  SearchOptions o = fourReplicas();
  o.workers = 2;
  o.data_parallel = 2;
  o.host_cores = 2;
  auto plain = searchPlan(prof, aci(), o);
  o.busy_slowdown = 1.4;
  auto busy = searchPlan(prof, aci(), o);
  ASSERT_TRUE(plain.ok() && busy.ok());
  const Candidate& a = plain->best();
  const Candidate& b = busy->best();
  ASSERT_EQ(a.microbatches, b.microbatches);
  EXPECT_DOUBLE_EQ(b.compute_scale, 1.4);
  EXPECT_NEAR(b.pipeline.total, 1.4 * a.pipeline.total, 1e-9);
  EXPECT_NEAR(b.stage_details[0].update, 1.4 * a.stage_details[0].update, 1e-12);
  EXPECT_NEAR(b.stage_details[0].allreduce, a.stage_details[0].allreduce, 1e-12);
  o.workers = 1;
  o.data_parallel = 1;
  auto alone = searchPlan(prof, aci(), o);
  o.busy_slowdown = 1;
  auto own = searchPlan(prof, aci(), o);
  ASSERT_TRUE(alone.ok() && own.ok());
  EXPECT_DOUBLE_EQ(alone->best().iteration, own->best().iteration);
}

// A model whose first layer does most of the work: PipeDream's optimizer
// gives it three of four workers and the rest one (1F1B-RR), which beats
// every even split under the pipedream schedule; the plan keeps each
// stage's copies and the table shows them. Without round-robin, or with the
// strategy pinned, only the even rows.
profile::Profile heavyFirstLayer() {
  profile::Profile p = testing::toyProfile(4);
  for (auto& meas : p.measurements) {
    for (size_t i = 0; i < meas.layers.size(); ++i) {
      const double ms = (i == 0 ? 9.0 : 1.0) * static_cast<double>(meas.microbatch_size);
      meas.layers[i].forward_ms = ms / 3;
      meas.layers[i].backward_ms = 2 * ms / 3;
    }
  }
  return p;
}

TEST(SearchPlan, PipeDreamReplicatesAHeavyStageMoreThanTheOthers) {
  const auto prof = heavyFirstLayer();
  SearchOptions o = basic(4);
  o.schedule = ScheduleKind::kPipeDream;
  o.global_batch = 48;
  auto r = searchPlan(prof, aci(), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Candidate& c = r->best();
  ASSERT_FALSE(c.stage_replicas.empty()) << c.strategy();
  EXPECT_EQ(c.workersUsed(), 4);
  EXPECT_EQ(c.stage_replicas.front(), c.data_parallel);
  EXPECT_GT(c.stage_replicas.front(), c.stage_replicas.back());
  EXPECT_EQ(c.globalBatch(), 48);
  for (const Candidate& even : r->considered) {
    if (even.stage_replicas.empty() && even.feasible) {
      EXPECT_GT(c.samples_per_second, even.samples_per_second) << even.strategy();
    }
  }
  const Plan p = makePlan(*r, prof, o, "aci");
  EXPECT_FALSE(p.evenlyReplicated());
  EXPECT_EQ(p.workersUsed(), 4);
  for (size_t s = 0; s < p.stages.size(); ++s) EXPECT_EQ(p.replicasOf(s), c.stage_replicas[s]);
  auto back = planFromJson(planToJson(p), "plan.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->alternatives.back().stage_replicas, c.stage_replicas);
  EXPECT_NE(renderPlanTable(*back).find(c.strategy() + " "), std::string::npos) << renderPlanTable(*back);
  o.round_robin = false;
  r = searchPlan(prof, aci(), o);
  ASSERT_TRUE(r.ok());
  for (const Candidate& row : r->considered) EXPECT_TRUE(row.stage_replicas.empty());
  o.round_robin = true;
  o.stages = 2;
  r = searchPlan(prof, aci(), o);
  ASSERT_TRUE(r.ok());
  for (const Candidate& row : r->considered) EXPECT_TRUE(row.stage_replicas.empty());
  // Under another schedule, only the even rows.
  o.stages.reset();
  o.schedule = ScheduleKind::kOneFOneB;
  r = searchPlan(prof, aci(), o);
  ASSERT_TRUE(r.ok());
  for (const Candidate& row : r->considered) EXPECT_TRUE(row.stage_replicas.empty());
}

TEST(SearchPlan, OnASharedHostCandidatesWithMoreThreadsThanCoresComputeSlower) {
  SearchOptions o = fourStages();
  const auto prof = toyProfile(10);
  auto alone = searchPlan(prof, aci(), o);
  o.host_cores = 2;
  auto shared = searchPlan(prof, aci(), o);
  ASSERT_TRUE(alone.ok() && shared.ok());
  const Candidate& a = alone->best();
  const Candidate& b = shared->best();
  EXPECT_EQ(a.compute_scale, 1);
  EXPECT_EQ(b.compute_scale, 2);
  // Every stage's compute doubles; the transfers do not.
  ASSERT_EQ(a.partition, b.partition);
  for (size_t s = 0; s < a.stage_details.size(); ++s) {
    EXPECT_NEAR(b.stage_details[s].forward, 2 * a.stage_details[s].forward, 1e-12);
    EXPECT_NEAR(b.stage_details[s].backward, 2 * a.stage_details[s].backward, 1e-12);
  }
  // The pipeline's time is its schedule's with the stages computing at each
  // moment sharing the cores: slower than alone, at most the uniformly
  // scaled time (cost/pipeline_test.cc tests the simulation).
  EXPECT_TRUE(b.pipeline.shared);
  EXPECT_FALSE(a.pipeline.shared);
  EXPECT_NEAR(b.pipeline.compute, a.pipeline.compute, 1e-12);
  EXPECT_NEAR(b.pipeline.communication, a.pipeline.communication, 1e-12);
  EXPECT_GT(b.pipeline.total, a.pipeline.total);
  EXPECT_LE(b.pipeline.total, 2 * a.pipeline.total);
  // Two workers fit on two cores: nothing changes.
  o.stages = 2;
  auto two = searchPlan(prof, aci(), o);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->best().compute_scale, 1);
  // The plan says what it assumed.
  const Plan p = makePlan(*shared, prof, o, "aci");
  EXPECT_EQ(p.compute_scale, 2);
  EXPECT_EQ(p.host_cores, 2);
  const Json j = planToJson(p);
  EXPECT_EQ(j["predicted"]["compute_scale"], 2);
  EXPECT_EQ(j["inputs"]["host_cores"], 2);
  auto back = planFromJson(j, "plan.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->compute_scale, 2);
  EXPECT_EQ(back->host_cores, 2);
}

// The heap that passes of the planned microbatch size leave in a worker
// (profile's Measurement::heap_bytes) is in every stage's memory, on top of
// the process's own.
TEST(SearchPlan, TheHeapOfThePlannedMicrobatchSizeIsInEveryStage) {
  auto prof = toyProfile(8);
  const MemoryCosts before = memoryCosts(prof, *prof.at(8));
  prof.measurements.back().heap_bytes = 7 * kMB;
  ASSERT_EQ(prof.measurements.back().microbatch_size, 8);
  const MemoryCosts after = memoryCosts(prof, *prof.at(8));
  EXPECT_EQ(after.runtime, before.runtime + 7 * kMB);
  EXPECT_EQ(stageMemory(after, 2, 5, 3), stageMemory(before, 2, 5, 3) + 7 * kMB);
  SearchOptions o = basic(2);
  o.data_parallel = 1;
  o.microbatch_size = 8;
  o.microbatches = 2;
  auto r = searchPlan(prof, aci(), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const auto& d : r->best().stage_details) {
    EXPECT_EQ(d.memory, stageMemory(after, d.first_layer, d.last_layer, 2));
  }
}

TEST(SearchPlan, WithoutGlobalBatchTakesTheMostMicrobatchesThatFit) {
  SearchOptions o = basic(2);
  o.data_parallel = 1;
  o.microbatch_size = 8;
  const auto prof = toyProfile(8);
  const MemoryCosts mem = memoryCosts(prof, *prof.at(8));
  // A limit that fits some dozens of microbatches on two stages.
  o.memory_limit = stageMemory(mem, 0, 3, 20);
  auto r = searchPlan(prof, aci(), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Candidate& c = r->best();
  for (const auto& d : c.stage_details) EXPECT_LE(d.memory, *o.memory_limit);
  // One more microbatch would not fit any 2-stage split.
  bool anyFits = false;
  for (int cut = 1; cut < 8; ++cut) {
    anyFits |= stageMemory(mem, 0, cut - 1, c.microbatches + 1) <= *o.memory_limit &&
               stageMemory(mem, cut, 7, c.microbatches + 1) <= *o.memory_limit;
  }
  EXPECT_FALSE(anyFits) << c.microbatches;
}

TEST(SearchPlan, PlansNeverExceedTheMemoryLimit) {
  SearchOptions o = basic(8);
  o.global_batch = 128;
  const auto prof = toyProfile(16, 3, 200 * kMB);
  o.memory_limit = 2 * kGB;
  auto r = searchPlan(prof, aci(), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const auto& c : r->considered) {
    for (const auto& d : c.stage_details) EXPECT_LE(d.memory, 2 * kGB);
  }
}

// A replicated pipeline's workers keep recovery's copy of their stage's
// parameters and optimizer state (docs/recovery.md): counted only there,
// and only when recovery is on.
TEST(SearchPlan, ReplicatedPipelinesCountRecoverysCopyOfTheState) {
  const auto prof = toyProfile(8, 3, 10 * kMB);
  auto memoryOf = [&](int A, int B, bool copies) {
    SearchOptions o = basic(A * B);
    o.global_batch = 64;
    o.data_parallel = A;
    o.stages = B;
    o.recovery_copies = copies;
    auto r = searchPlan(prof, aci(), o);
    EXPECT_TRUE(r.ok()) << r.status().message();
    Bytes total = 0;
    for (const auto& d : r->best().stage_details) total += d.memory;
    return total;
  };
  Bytes state = 0;
  for (const auto& l : prof.layers) state += l.parameter_bytes + l.optimizer_state_bytes;
  EXPECT_EQ(memoryOf(2, 2, true) - memoryOf(2, 2, false), state);  // summed over the stages
  EXPECT_EQ(memoryOf(1, 2, true), memoryOf(1, 2, false));          // no replica: no copy
  EXPECT_EQ(memoryOf(2, 1, true), memoryOf(2, 1, false));          // one stage: replicas agree anyway
}

TEST(SearchPlan, NothingFitsSaysHowMuchMemoryWould) {
  SearchOptions o = basic(2);
  o.memory_limit = 200 * kMB;  // runtime alone is 100 MB; some single layers need more
  o.global_batch = 64;
  auto r = searchPlan(toyProfile(16, 3, 200 * kMB), aci(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInfeasible);
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("nothing fits in 200 MB per worker"), std::string::npos) << m;
  EXPECT_NE(m.find("needs 3.63 GB per worker"), std::string::npos) << m;
  EXPECT_NE(m.find("--memory 3630MB"), std::string::npos) << m;
  EXPECT_EQ(m.find("--workers"), std::string::npos) << m;  // no number of workers would help
}

// Issue 8 §4: the partitioner's memory window counts the dataset held by
// the first and last stages, as stageMemory does; so with a dataset the
// search finds the split that fits instead of rejecting the strategy.
TEST(SearchPlan, DatasetBytesChangeTheOptimalSplit) {
  bool found = false;
  for (std::uint32_t seed = 1; seed <= 40 && !found; ++seed) {
    const auto prof = toyProfile(6, seed, 50 * kMB);
    SearchOptions o = basic(3);
    o.global_batch = 8;
    o.data_parallel = 1;
    o.stages = 3;
    o.microbatch_size = 1;
    auto free = searchPlan(prof, aci(), o);
    ASSERT_TRUE(free.ok()) << free.status().message();
    const Partition fastest = free->best().partition;
    // With the dataset, the least limit any 3-stage split fits in.
    const Bytes data = 400 * kMB;
    const MemoryCosts mem = memoryCosts(prof, *prof.at(1), false, data);
    auto worst = [&](const Partition& p) {
      Bytes most = 0;
      for (int s = 0; s < 3; ++s) most = std::max(most, stageMemory(mem, p.first[s], p.lastLayer(s, 6), 8));
      return most;
    };
    Bytes least = -1;
    for (int a = 1; a < 6; ++a) {
      for (int b = a + 1; b < 6; ++b) {
        const Bytes w = worst(Partition{{0, a, b}});
        if (least < 0 || w < least) least = w;
      }
    }
    if (worst(fastest) <= least) continue;  // the fastest split fits anyway: try another profile
    o.data_bytes = data;
    o.memory_limit = least;
    auto fitted = searchPlan(prof, aci(), o);
    ASSERT_TRUE(fitted.ok()) << "seed " << seed << ": " << fitted.status().message();
    EXPECT_FALSE(fitted->best().partition == fastest);
    EXPECT_LE(worst(fitted->best().partition), least);
    for (const auto& d : fitted->best().stage_details) EXPECT_LE(d.memory, least);
    found = true;
  }
  EXPECT_TRUE(found) << "no seed made the dataset change the split";
}

// Issue 8 §4: a pinned microbatch count that is what makes nothing fit is named.
TEST(SearchPlan, NothingFitsNamesThePinThatMakesItSo) {
  SearchOptions o = basic(2);
  o.memory_limit = 1 * kGB;
  o.microbatches = 512;
  auto r = searchPlan(toyProfile(16, 3, 10 * kMB), aci(), o);
  ASSERT_FALSE(r.ok());
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("with --microbatches 512"), std::string::npos) << m;
  EXPECT_NE(m.find("drop the pin"), std::string::npos) << m;
  o.microbatches.reset();
  EXPECT_TRUE(searchPlan(toyProfile(16, 3, 10 * kMB), aci(), o).ok());
}

// Issue 8 §1: counts from users are range-checked, and products of them
// cannot overflow.
TEST(SearchPlan, HostileCountsAreErrorsNotCrashes) {
  const auto prof = toyProfile(6);
  SearchOptions o = basic(4);
  o.workers = 70000;
  EXPECT_NE(searchPlan(prof, aci(), o).status().message().find("--workers: 70000 is out of range"), std::string::npos);
  o = basic(65536);
  o.data_parallel = 65536;
  o.stages = 6;
  EXPECT_FALSE(searchPlan(prof, aci(), o).ok());  // 65,536 × 6 does not fit in 65,536 workers (no int overflow)
  o = basic(4);
  o.microbatches = std::int64_t{1} << 40;
  EXPECT_NE(searchPlan(prof, aci(), o).status().message().find("--microbatches"), std::string::npos);
  o = basic(4);
  o.global_batch = std::int64_t{1} << 40;
  EXPECT_NE(searchPlan(prof, aci(), o).status().message().find("--global-batch"), std::string::npos);
  // The largest microbatch count in range: memory saturates instead of wrapping to a "fitting" negative.
  o = basic(1);
  o.microbatches = kMicrobatchesRange.max;
  auto r = searchPlan(prof, aci(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInfeasible) << r.status().message();
}

TEST(SearchPlan, NothingFitsSuggestsWorkersWhenMoreStagesWouldFit) {
  SearchOptions o = basic(2);
  o.memory_limit = 200 * kMB;
  o.max_microbatches = 1;
  auto r = searchPlan(toyProfile(16, 3, 10 * kMB), aci(), o);
  ASSERT_FALSE(r.ok());
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("use at least"), std::string::npos) << m;
  EXPECT_NE(m.find("--workers"), std::string::npos) << m;
}

TEST(SearchPlan, NothingFeasibleForAnotherReasonSaysThatReason) {
  SearchOptions o = basic(4);
  o.accelerator = "k80";  // GPU workers on a platform without GPUs
  auto r = searchPlan(toyProfile(8), *loadCatalog("lambda"), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("lambda functions have no accelerators"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(r.status().message().find("nothing fits"), std::string::npos);
}

TEST(SearchPlan, PinsAreChecked) {
  const auto prof = toyProfile(6);
  SearchOptions o = basic(4);
  o.microbatch_size = 3;
  EXPECT_NE(searchPlan(prof, aci(), o).status().message().find("was not profiled"), std::string::npos);
  o = basic(4);
  o.stages = 7;
  EXPECT_NE(searchPlan(prof, aci(), o).status().message().find("between 1 and the model's 6 layers"), std::string::npos);
  o = basic(4);
  o.data_parallel = 2;
  o.stages = 3;
  EXPECT_NE(searchPlan(prof, aci(), o).status().message().find("needs 6 workers"), std::string::npos);
  o = basic(4);
  o.partition = Partition{{0, 2, 2}};
  EXPECT_FALSE(searchPlan(prof, aci(), o).ok());
}

TEST(SearchPlan, PinnedPartitionIsUsed) {
  SearchOptions o = basic(3);
  o.partition = Partition{{0, 1, 5}};
  auto r = searchPlan(toyProfile(6), aci(), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->best().partition, (Partition{{0, 1, 5}}));
  EXPECT_EQ(r->best().data_parallel, 1);
}

TEST(SearchPlan, ObjectivesPickTheirBest) {
  const auto prof = toyProfile(12, 5);
  for (Objective obj : {Objective::kFastest, Objective::kCheapest, Objective::kSamplesPerDollar}) {
    SearchOptions o = basic(8);
    o.global_batch = 64;
    o.objective = obj;
    auto r = searchPlan(prof, aci(), o);
    ASSERT_TRUE(r.ok());
    for (const auto& c : r->considered) {
      if (!c.feasible) continue;
      const Candidate& b = r->best();
      if (obj == Objective::kFastest) {
        EXPECT_GE(b.samples_per_second, c.samples_per_second);
      } else if (obj == Objective::kCheapest) {
        EXPECT_LE(b.cost_per_hour, c.cost_per_hour);
      } else {
        EXPECT_GE(b.samples_per_dollar, c.samples_per_dollar);
      }
    }
  }
  EXPECT_FALSE(parseObjective("quickest").ok());
}

TEST(SearchPlan, CostIsTheSumOfRightSizedWorkers) {
  SearchOptions o = basic(4);
  o.global_batch = 32;
  auto r = searchPlan(toyProfile(8), aci(), o);
  ASSERT_TRUE(r.ok());
  const Candidate& c = r->best();
  double sum = 0;
  for (const auto& d : c.stage_details) sum += c.data_parallel * d.worker.cost_per_hour;
  EXPECT_NEAR(c.cost_per_hour, sum, 1e-12);
  EXPECT_NEAR(c.samples_per_dollar, c.samples_per_second * 3600 / c.cost_per_hour, 1e-6);
}

}  // namespace
}  // namespace hydrozoa::plan
