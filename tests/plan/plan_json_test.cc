#include "plan/plan.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "plan/toy_profile.h"

namespace hydrozoa::plan {
namespace {

// The planner's choice for 4 workers and a global batch of 32, or with
// `pipeline`, 1 copy of a 2-stage pipeline of 4 microbatches of 8.
Plan samplePlan(bool pipeline = false) {
  const auto prof = testing::toyProfile(10);
  SearchOptions o;
  o.workers = 4;
  o.bandwidth = 1e9;
  o.global_batch = 32;
  if (pipeline) {
    o.data_parallel = 1;
    o.stages = 2;
    o.microbatches = 4;
  }
  auto r = searchPlan(prof, *loadCatalog("aci"), o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return makePlan(*r, prof, o, "aci");
}

TEST(PlanJson, HasTheContractFields) {
  const Json j = planToJson(samplePlan());
  EXPECT_TRUE(j["strategy"]["data_parallel"].is_number_integer());
  EXPECT_TRUE(j["strategy"]["pipeline_stages"].is_number_integer());
  EXPECT_TRUE(j["microbatch_size"].is_number_integer());
  EXPECT_TRUE(j["num_microbatches"].is_number_integer());
  ASSERT_TRUE(j["stages"].is_array());
  for (const auto& s : j["stages"]) {
    EXPECT_TRUE(s["first_layer"].is_number_integer());
    EXPECT_TRUE(s["last_layer"].is_number_integer());
    EXPECT_TRUE(s["memory_bytes"].is_number_integer());
  }
  for (const char* k : {"iteration_seconds", "samples_per_second", "cost_per_hour", "samples_per_dollar"}) {
    EXPECT_TRUE(j["predicted"][k].is_number()) << k;
  }
  EXPECT_EQ(j["stages"].size(), j["strategy"]["pipeline_stages"].get<size_t>());
  EXPECT_EQ(j["stages"].back()["last_layer"], 9);
  EXPECT_EQ(j["global_batch"], 32);
}

TEST(PlanJson, RoundTrips) {
  const Plan p = samplePlan();
  auto back = planFromJson(planToJson(p), "plan.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(planToJson(*back), planToJson(p));
  EXPECT_EQ(renderPlanTable(*back), renderPlanTable(p));
  EXPECT_TRUE(planToJson(p)["inputs"]["shared_memory_allreduce"].is_null());
  // The schedule: written, read back; a plan from before schedules is GPipe's.
  EXPECT_EQ(planToJson(p)["schedule"], "gpipe");
  Plan oneF = p;
  oneF.schedule = ScheduleKind::kOneFOneB;
  auto read = planFromJson(planToJson(oneF), "plan.json");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->schedule, ScheduleKind::kOneFOneB);
  Json old = planToJson(oneF);
  old.erase("schedule");
  EXPECT_EQ(planFromJson(old, "plan.json")->schedule, ScheduleKind::kGPipe);
  // Scatter/gather of stage boundaries: written only when on (t > 1), read back.
  EXPECT_FALSE(planToJson(p)["strategy"].contains("scatter_gather"));
  Plan gathered = p;
  gathered.tensor_parallel = 2;
  gathered.scatter_gather = true;
  auto sg = planFromJson(planToJson(gathered), "plan.json");
  ASSERT_TRUE(sg.ok()) << sg.status().message();
  EXPECT_TRUE(sg->scatter_gather);
  EXPECT_EQ(planToJson(*sg), planToJson(gathered));
  // Replicas summing through shared memory: the fit round-trips and the
  // header says so.
  Plan shm = p;
  shm.shared_memory = SharedMemoryCost{4e-10, 3e-4, 2};
  auto again = planFromJson(planToJson(shm), "plan.json");
  ASSERT_TRUE(again.ok()) << again.status().message();
  ASSERT_TRUE(again->shared_memory);
  EXPECT_EQ(again->shared_memory->seconds_per_byte, 4e-10);
  EXPECT_EQ(again->shared_memory->replicas, 2);
  EXPECT_NE(renderPlanTable(*again).find("replicas summing through shared memory"), std::string::npos);
  Json bad = planToJson(shm);
  bad["inputs"]["shared_memory_allreduce"]["replicas"] = 1;
  auto rejected = planFromJson(bad, "plan.json");
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(rejected.status().message().find("shared_memory_allreduce.replicas"), std::string::npos)
      << rejected.status().message();
  // The host's slowdown beside busy cores: kept; 1 in plans from before it.
  Plan busy = p;
  busy.busy_slowdown = 1.3;
  EXPECT_EQ(planFromJson(planToJson(busy), "plan.json")->busy_slowdown, 1.3);
  Json before = planToJson(busy);
  before["inputs"].erase("busy_slowdown");
  EXPECT_EQ(planFromJson(before, "plan.json")->busy_slowdown, 1);
  before["inputs"]["busy_slowdown"] = 0.5;
  auto slower = planFromJson(before, "plan.json");
  ASSERT_FALSE(slower.ok());
  EXPECT_NE(slower.status().message().find("inputs.busy_slowdown: 0.5 is out of range"), std::string::npos)
      << slower.status().message();
}

TEST(PlanJson, APlanWrittenBeforeTheOverlapWasModelledWaitsForAllOfItsAllreduce) {
  SearchOptions o;
  o.workers = 4;
  o.bandwidth = 1e8;
  o.global_batch = 32;
  o.data_parallel = 4;
  o.stages = 1;
  const auto prof = testing::toyProfile(10);
  auto r = searchPlan(prof, *loadCatalog("aci"), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  Json j = planToJson(makePlan(*r, prof, o, "aci"));
  const double total = j["stages"][0]["allreduce_seconds"].get<double>();
  EXPECT_LT(j["stages"][0]["allreduce_exposed_seconds"].get<double>(), total);
  j["stages"][0].erase("allreduce_exposed_seconds");
  auto back = planFromJson(j, "plan.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->stages[0].allreduce_exposed_seconds, total);
}

TEST(PlanJson, RejectsInconsistentPlans) {
  struct Case {
    std::function<void(Json&)> corrupt;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {[](Json& j) { j["schema"] = "something/else"; }, "plan.json.schema"},
      {[](Json& j) { j["strategy"]["pipeline_stages"] = 0; }, "pipeline_stages: 0 is out of range; expected a whole number from 1"},
      {[](Json& j) { j["microbatch_size"] = -2; }, "plan.json.microbatch_size: -2 is out of range; expected a whole number from 1"},
      {[](Json& j) { j["stages"][0]["first_layer"] = 1; }, "must be consecutive"},
      {[](Json& j) { j["stages"].push_back(j["stages"].back()); }, "but stages lists"},
      {[](Json& j) { j["stages"].back()["last_layer"] = 5; j["stages"].back()["first_layer"] = 0; j["stages"] = Json::array({j["stages"].back()}); j["strategy"]["pipeline_stages"] = 1; }, "the model has 10 layers"},
      {[](Json& j) { j.erase("stages"); }, "plan.json.stages: missing"},
      {[](Json& j) { j["stages"][0]["replicas"] = 3; },
       "stages[0].replicas is 3 but strategy.data_parallel is 4: the input stage's copies"},
      {[](Json& j) { j["stages"][0]["replicas"] = 0; }, "plan.json.stages[0].replicas: 0 is out of range"},
      {[](Json& j) { j["schedule"] = "pipedream-9"; },
       "plan.json.schedule: unknown pipeline schedule \"pipedream-9\"; available: gpipe, 1f1b, interleaved"},
      {[](Json& j) { j["strategy"]["scatter_gather"] = true; },
       "plan.json: strategy.scatter_gather splits stage boundaries over a tensor group, but tensor_parallel is 1"},
      {[](Json& j) { j["strategy"]["scatter_gather"] = 1; }, "plan.json.strategy.scatter_gather"},
  };
  for (const auto& c : cases) {
    Json j = planToJson(samplePlan());
    c.corrupt(j);
    auto r = planFromJson(j, "plan.json");
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
}

// Stages with their own copies (1F1B-RR): written per stage, read back,
// the workers their sum; absent, every stage has data_parallel.
TEST(PlanJson, StagesReplicatedUnevenly) {
  Json j = planToJson(samplePlan(/*pipeline=*/true));
  ASSERT_EQ(j["strategy"]["data_parallel"], 1);
  ASSERT_EQ(j["num_microbatches"], 4);
  ASSERT_GE(j["stages"].size(), 2u);
  for (const auto& s : j["stages"]) EXPECT_EQ(s["replicas"], 1);
  j["stages"][1]["replicas"] = 2;
  auto p = planFromJson(j, "plan.json");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_FALSE(p->evenlyReplicated());
  EXPECT_EQ(p->replicasOf(1), 2);
  EXPECT_EQ(p->workersUsed(), static_cast<int>(j["stages"].size()) + 1);
  EXPECT_EQ(planToJson(*p)["stages"][1]["replicas"], 2);
  EXPECT_NE(renderPlanTable(*p).find("each stage's copies taking microbatches round-robin"), std::string::npos);
  for (auto& s : j["stages"]) s.erase("replicas");
  p = planFromJson(j, "plan.json");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_TRUE(p->evenlyReplicated());
  // A stage's copies must share a step's microbatches evenly.
  j["stages"][1]["replicas"] = 3;
  p = planFromJson(j, "plan.json");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("plan.json: stages[1].replicas is 3, which does not divide the 4 microbatches of "
                                      "a step (data_parallel 1 × num_microbatches 4): microbatches go round-robin over "
                                      "a stage's copies; make num_microbatches a multiple of 3"),
            std::string::npos)
      << p.status().message();
}

TEST(PlanJson, TruncatedFile) {
  const std::string path = std::filesystem::temp_directory_path() / ("plan." + std::to_string(::getpid()) + ".json");
  const std::string text = planToJson(samplePlan()).dump(1);
  ASSERT_TRUE(writeFileAtomically(path, text.substr(0, text.size() - 20)).ok());
  auto r = loadPlan(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
  std::filesystem::remove(path);
}

TEST(PlanTable, MarksTheChosenRow) {
  const std::string table = renderPlanTable(samplePlan());
  EXPECT_NE(table.find("  *  "), std::string::npos) << table;
  EXPECT_NE(table.find("4×1"), std::string::npos);
  EXPECT_NE(table.find("1×4"), std::string::npos);
  EXPECT_NE(table.find("samples per dollar"), std::string::npos);
}

}  // namespace
}  // namespace hydrozoa::plan
