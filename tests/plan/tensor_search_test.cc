// The search over (p, t, d, b) (plan/search.h with tensor parallelism), the
// plan.json field and the takeaways (plan/tensor_report.h).
#include <gtest/gtest.h>

#include "plan/cost/tensor_parallel.h"
#include "plan/gpt_profile.h"
#include "plan/plan.h"
#include "plan/search.h"
#include "plan/tensor_report.h"

namespace hydrozoa::plan {
namespace {

using testing::evenTransformerProfile;
using testing::transformerProfile;

Catalog aci() { return *loadCatalog("aci"); }

SearchOptions options(int workers, BytesPerSecond bandwidth) {
  SearchOptions o;
  o.workers = workers;
  o.bandwidth = bandwidth;
  o.global_batch = 8;
  o.tensor_link_workers = workers;
  return o;
}

// The best row with tensor-parallel degree t, (A, B) as given.
const Candidate* rowWith(const SearchResult& r, int t, int A, int B) {
  for (const Candidate& c : r.considered) {
    if (c.tensor_parallel == t && c.data_parallel == A && c.stages == B) return &c;
  }
  return nullptr;
}

// Seed 003 §4.3.2: with d = 1 and t·p = n, the bubble (p − 1)/m shrinks as t
// grows. 8 equal layers (1 ms forward, 2 ms backward per sample), GPipe, 8
// microbatches of 1, links so fast that only compute counts:
//   p4×t1: stages of 2 layers, R = (m + p − 1)(f + b) = 11 × 6 ms = 66 ms
//   p2×t2: stages of 4 layers at half the time, R = 9 × 6 ms = 54 ms.
TEST(TensorSearch, TheBubbleShrinksAsTGrows) {
  const profile::Profile prof = evenTransformerProfile(6);  // + embedding + LM head = 8 layers
  SearchOptions o = options(4, 1e15);
  o.data_parallel = 1;
  o.microbatch_size = 1;
  auto r = searchPlan(prof, aci(), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Candidate* p4 = rowWith(*r, 1, 1, 4);
  const Candidate* p2 = rowWith(*r, 2, 1, 2);
  const Candidate* p1 = rowWith(*r, 4, 1, 1);
  ASSERT_TRUE(p4 && p2 && p1);
  EXPECT_NEAR(p4->iteration, 0.066, 1e-6);
  EXPECT_NEAR(p2->iteration, 0.054, 1e-6);
  EXPECT_NEAR(p1->iteration, 0.048, 1e-6);  // t = 4: no pipeline, 8 × 8 × 3 ms / 4
  EXPECT_NEAR(p4->bubble_fraction, 3.0 / 11, 1e-6);
  EXPECT_NEAR(p2->bubble_fraction, 1.0 / 9, 1e-6);
  EXPECT_NEAR(p1->bubble_fraction, 0, 1e-6);
  EXPECT_EQ(p2->workersUsed(), 4);
  EXPECT_EQ(p2->strategy(), "p2×t2×d1");
  EXPECT_EQ(r->best().tensor_parallel, 4);
}

// Compute dominates and the tensor group's link is fast: t > 1 wins. The
// same model over a slow link: its allreduces (8·b·s·h per layer per
// microbatch) cost more than the compute they split, and t = 1 wins.
TEST(TensorSearch, PicksTensorParallelismOnlyWhenItsLinkIsFast) {
  const profile::Profile prof = evenTransformerProfile(6);
  SearchOptions fast = options(4, 1e8);
  fast.tensor_bandwidth = 1e12;
  auto r = searchPlan(prof, aci(), fast);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_GT(r->best().tensor_parallel, 1) << r->best().strategy();
  EXPECT_GT(r->best().tensor_communication, 0);
  auto slow = searchPlan(prof, aci(), options(4, 1e7));
  ASSERT_TRUE(slow.ok()) << slow.status().message();
  EXPECT_EQ(slow->best().tensor_parallel, 1) << slow->best().strategy();
  // Every (t, A, B) with A·B·t = 4 was considered: 3 of t = 1, 2 of t = 2, 1 of t = 4.
  EXPECT_EQ(slow->considered.size(), 6u);
  for (const Candidate& c : slow->considered) EXPECT_EQ(c.workersUsed(), 4) << c.strategy();
}

TEST(TensorSearch, TheLinkBoundsTAndOnlyFlushingSchedulesTakeIt) {
  const profile::Profile prof = evenTransformerProfile(2);
  SearchOptions o = options(8, 1e9);
  o.tensor_link_workers = 2;
  auto r = searchPlan(prof, aci(), o);
  ASSERT_TRUE(r.ok());
  for (const Candidate& c : r->considered) EXPECT_LE(c.tensor_parallel, 2);
  o.tensor_link_workers = 1;  // the default: no tensor parallelism
  auto none = searchPlan(prof, aci(), o);
  ASSERT_TRUE(none.ok());
  for (const Candidate& c : none->considered) EXPECT_EQ(c.tensor_parallel, 1);
  o.tensor_link_workers = 8;
  o.schedule = ScheduleKind::kTwoBW;
  auto twoBw = searchPlan(prof, aci(), o);
  ASSERT_TRUE(twoBw.ok());
  for (const Candidate& c : twoBw->considered) EXPECT_EQ(c.tensor_parallel, 1);
  o.tensor_parallel = 2;
  EXPECT_NE(searchPlan(prof, aci(), o).status().message().find("--tensor-parallel 2 needs a schedule that flushes"),
            std::string::npos);
}

// Each worker of a tensor group holds its share of the split layers.
TEST(TensorSearch, MemoryPerWorkerShrinksWithT) {
  const profile::Profile prof = transformerProfile("gpt", 4);
  SearchOptions o = options(4, 1e9);
  o.data_parallel = 1;
  o.stages = 1;
  o.microbatch_size = 2;
  o.microbatches = 4;
  o.global_batch.reset();
  o.workers = 1;
  o.tensor_link_workers = 1;
  auto one = searchPlan(prof, aci(), o);
  ASSERT_TRUE(one.ok()) << one.status().message();
  o.workers = 4;
  o.tensor_parallel = 4;
  auto four = searchPlan(prof, aci(), o);
  ASSERT_TRUE(four.ok()) << four.status().message();
  const StageDetail& whole = one->best().stage_details[0];
  const StageDetail& quarter = four->best().stage_details[0];
  EXPECT_LT(quarter.parameter_bytes, whole.parameter_bytes / 3);
  EXPECT_GT(quarter.parameter_bytes, whole.parameter_bytes / 4);
  EXPECT_LT(quarter.memory, whole.memory);
  // The runtime's memory is every worker's own: what shrinks is the state and the activations.
  const Bytes runtime = prof.runtime_bytes;
  EXPECT_LT(quarter.memory - runtime, (whole.memory - runtime) / 2);
}

TEST(TensorSearch, BadInputNamesTheConstraintAndTheValidValues) {
  const profile::Profile prof = transformerProfile("gpt", 2);
  SearchOptions o = options(8, 1e9);
  o.tensor_parallel = 3;
  EXPECT_EQ(searchPlan(prof, aci(), o).status().message(), "--tensor-parallel 3 does not divide heads=4: use 1, 2 or 4");
  o.tensor_parallel = 2;
  o.stages = 2;
  o.data_parallel = 4;
  EXPECT_EQ(searchPlan(prof, aci(), o).status().message(),
            "--tensor-parallel 2 × --stages 2 × --data-parallel 4 needs 16 workers but --workers is 8: use "
            "--data-parallel 2");
  o.data_parallel = 2;
  ASSERT_TRUE(searchPlan(prof, aci(), o).ok());
  // A model that tensor parallelism cannot split.
  profile::Profile cnn = prof;
  cnn.model = "cnn";
  for (auto& l : cnn.layers) l.kind = "conv";
  EXPECT_EQ(searchPlan(cnn, aci(), o).status().message(),
            "--tensor-parallel 2: cnn has no layer that tensor parallelism splits (transformer, embedding or lm_head): "
            "use 1");
}

TEST(PlanJson, TensorParallelRoundTripsAndIsRangeChecked) {
  const profile::Profile prof = evenTransformerProfile(2);
  SearchOptions o = options(8, 1e9);
  o.tensor_parallel = 2;
  auto r = searchPlan(prof, aci(), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Plan p = makePlan(*r, prof, o, "aci");
  ASSERT_EQ(p.tensor_parallel, 2);
  EXPECT_EQ(p.workersUsed(), 8);
  const Json j = planToJson(p);
  EXPECT_EQ(j["strategy"]["tensor_parallel"], 2);
  EXPECT_EQ(j["alternatives"][0]["tensor_parallel"], 2);
  auto back = planFromJson(j, "plan.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->tensor_parallel, 2);
  EXPECT_EQ(planToJson(*back), j);
  EXPECT_NE(renderPlanTable(*back).find("p" + std::to_string(p.pipeline_stages) + "×t2×d"), std::string::npos);
  // Absent (plans from before it): 1.
  Json old = j;
  old["strategy"].erase("tensor_parallel");
  for (auto& a : old["alternatives"]) a.erase("tensor_parallel");
  EXPECT_EQ(planFromJson(old, "plan.json")->tensor_parallel, 1);
  auto rejected = [&](const Json& bad) {
    auto read = planFromJson(bad, "plan.json");
    EXPECT_FALSE(read.ok());
    return read.ok() ? std::string() : read.status().message();
  };
  for (int bad : {0, -2, 65537}) {
    Json out = j;
    out["strategy"]["tensor_parallel"] = bad;
    EXPECT_NE(rejected(out).find("plan.json.strategy.tensor_parallel"), std::string::npos) << bad;
  }
  Json product = j;
  product["strategy"]["tensor_parallel"] = 65536;
  EXPECT_NE(rejected(product).find("× tensor_parallel 65536 is"), std::string::npos) << rejected(product);
  Json twoBw = j;
  twoBw["schedule"] = "2bw";
  EXPECT_NE(rejected(twoBw).find("needs a schedule that flushes"), std::string::npos);
}

TEST(PlanRanks, ATensorGroupHoldsConsecutiveRanks) {
  const std::vector<int> replicas{2, 2, 2};  // 3 stages, 2 copies
  EXPECT_EQ(workerRank(replicas, 1, 1, 1, 0), workerRank(replicas, 1, 1));
  // ((replica · stages) + stage) · t + tensor rank.
  EXPECT_EQ(workerRank(replicas, 2, 1, 4, 3), ((1 * 3) + 2) * 4 + 3);
  EXPECT_EQ(workerRank(replicas, 0, 0, 2, 1), 1);
}

TEST(TensorReport, ShowsTheBestWithAndWithoutSideBySide) {
  const profile::Profile prof = evenTransformerProfile(6);
  SearchOptions o = options(4, 1e8);
  o.tensor_bandwidth = 1e12;
  auto r = searchPlan(prof, aci(), o);
  ASSERT_TRUE(r.ok());
  const std::vector<ScheduleSearch> searches{{o, *r}};
  const SearchRow chosen{0, static_cast<size_t>(r->chosen)};
  const std::string table = renderTensorComparison(searches, chosen);
  EXPECT_NE(table.find("without"), std::string::npos) << table;
  EXPECT_NE(table.find("with tensor parallelism"), std::string::npos) << table;
  EXPECT_NE(table.find("*  with tensor parallelism  " + r->best().strategy()), std::string::npos) << table;
  // Only t = 1 considered: nothing to compare.
  SearchOptions none = o;
  none.tensor_link_workers = 1;
  EXPECT_EQ(renderTensorComparison({{none, *searchPlan(prof, aci(), none)}}, {0, 0}), "");
}

// Takeaway #1: with a link so slow that the model's cost puts everything
// into the pipeline, the plan pipelines where the thesis would split
// layers within the fast link's 4 workers, and the note says why.
TEST(TensorReport, SaysWhereThePlanDepartsFromTheTakeawaysAndWhy) {
  const profile::Profile prof = evenTransformerProfile(6);
  SearchOptions o = options(4, 1e7);
  auto r = searchPlan(prof, aci(), o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->best().tensor_parallel, 1);
  ASSERT_GT(r->best().stages, 1);
  const std::vector<ScheduleSearch> searches{{o, *r}};
  const std::vector<std::string> notes = takeawayNotes(prof, aci(), searches, {0, static_cast<size_t>(r->chosen)});
  ASSERT_FALSE(notes.empty());
  EXPECT_EQ(notes[0].rfind("Takeaway #1", 0), 0u) << notes[0];
  EXPECT_NE(notes[0].find("tensor-parallel allreduces"), std::string::npos) << notes[0];
  // With the fast link the chosen plan is the thesis's: nothing to say about #1.
  o.tensor_bandwidth = 1e12;
  auto fast = searchPlan(prof, aci(), o);
  ASSERT_TRUE(fast.ok());
  ASSERT_GT(fast->best().tensor_parallel, 1);
  for (const std::string& note : takeawayNotes(prof, aci(), {{o, *fast}}, {0, static_cast<size_t>(fast->chosen)})) {
    EXPECT_NE(note.rfind("Takeaway #1", 0), 0u) << note;
  }
}

}  // namespace
}  // namespace hydrozoa::plan
