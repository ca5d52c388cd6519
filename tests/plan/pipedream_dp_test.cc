// PipeDream's optimizer (plan/planners/pipedream_dp.h) against brute force
// on small chains, and by hand.
#include "plan/planners/pipedream_dp.h"
#include "plan/planners/pipedream_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <fstream>
#include <random>
#include <sstream>

#include "plan/cost/memory.h"
#include "plan/toy_profile.h"
#include "profile/pipedream.h"

namespace hydrozoa::plan {
namespace {

// Per layer: compute, activation, parameter and boundary values.
struct Layers {
  std::vector<double> compute, activation, parameters, boundary;
  int numLayers() const { return static_cast<int>(compute.size()); }
  PipeDreamStates states() const { return chainStates(compute, activation, parameters, boundary); }
};

Layers randomChain(int layers, std::mt19937& rng) {
  std::uniform_real_distribution<double> time(0.001, 0.02);
  std::uniform_int_distribution<Bytes> bytes(0, 40'000'000);
  Layers c;
  for (int i = 0; i < layers; ++i) {
    c.compute.push_back(time(rng));
    c.activation.push_back(static_cast<double>(bytes(rng)));
    c.parameters.push_back(rng() % 3 ? static_cast<double>(bytes(rng)) : 0.0);
    c.boundary.push_back(static_cast<double>(bytes(rng)));
  }
  return c;
}

// Every split of the chain into consecutive stages and every assignment of
// replica counts using exactly `machines` machines: the best slowest-stage
// time, as the DP's formulas define one stage's time (see the header). With
// activation transfers, the boundary after stage t counts at the replicas
// of stage t + 1 (its input) and, for t ≥ 1, of stage t (the output of the
// last stage of a sub-pipeline), as PipeDream's optimizer counts them: the
// first stage's output is not charged at its own replicas.
double bruteForce(const Layers& c, int machines, double B, const PipeDreamOptions& o) {
  const int N = c.numLayers();
  double best = std::numeric_limits<double>::infinity();
  auto sum = [](const auto& v, int a, int b) {
    double s = 0;
    for (int i = a; i <= b; ++i) s += static_cast<double>(v[i]);
    return s;
  };
  // stages: (first, last, replicas)
  std::vector<std::tuple<int, int, int>> stages;
  std::function<void(int, int)> go = [&](int first, int used) {
    if (first == N) {
      if (used != machines) return;
      double t = 0;
      int before = 0;
      for (size_t s = 0; s < stages.size(); ++s) {
        const auto [a, b, r] = stages[s];
        before += r;
        if (o.memory_limit &&
            std::ceil(static_cast<double>(machines - before) / r) * (sum(c.activation, a, b) + sum(c.parameters, a, b)) >
                static_cast<double>(*o.memory_limit)) {
          return;
        }
        t = std::max(t, (sum(c.compute, a, b) + 4.0 * (r - 1) * sum(c.parameters, a, b) / (B * r)) / r);
        if (o.activation_compression && s + 1 < stages.size()) {  // the boundary after it
          const int next = std::get<2>(stages[s + 1]);
          t = std::max(t, 2.0 * c.boundary[b] / (B * (s == 0 ? next : std::min(r, next))) / *o.activation_compression);
        }
      }
      best = std::min(best, t);
      return;
    }
    for (int last = first; last < N; ++last) {
      for (int r = 1; used + r <= machines && (r == 1 || !o.straight); ++r) {
        stages.emplace_back(first, last, r);
        go(last + 1, used + r);
        stages.pop_back();
      }
    }
  };
  go(0, 0);
  return best;
}

TEST(PipeDreamDp, EqualsBruteForceOnSmallChains) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const int N = 1 + static_cast<int>(rng() % 6);
    const int M = 1 + static_cast<int>(rng() % 4);
    const Layers c = randomChain(N, rng);
    PipeDreamOptions o;
    o.levels = {{M, 1e9}};
    o.straight = trial % 5 == 1;
    if (trial % 3 == 0) o.activation_compression = 1.0 + trial % 7;
    if (trial % 6 == 5) o.memory_limit = 60'000'000;
    const double want = bruteForce(c, M, 1e9, o);
    auto got = planPipeDream(c.states(), o);
    if (!std::isfinite(want)) {
      EXPECT_FALSE(got.ok()) << "trial " << trial;
      continue;
    }
    ASSERT_TRUE(got.ok()) << "trial " << trial << ": " << got.status().message();
    EXPECT_NEAR(got->time_per_stage, want, 1e-12) << "trial " << trial;
    // The stages it reports cover the chain and use the machines.
    ASSERT_EQ(got->levels.size(), 1u);
    int used = 0, next = 0;
    for (const PipeDreamStage& s : got->levels[0]) {
      EXPECT_EQ(s.first_layer, next);
      next = s.last_layer + 1;
      used += s.replicas;
    }
    EXPECT_EQ(next, N);
    EXPECT_EQ(used, M) << "trial " << trial;
    if (o.straight) {
      EXPECT_EQ(got->levels[0].size(), static_cast<size_t>(M)) << "trial " << trial;
    }
    // Allowed to leave machines unused, it is never slower.
    o.fewer_machines = true;
    auto fewer = planPipeDream(c.states(), o);
    ASSERT_TRUE(fewer.ok());
    EXPECT_LE(fewer->time_per_stage, got->time_per_stage + 1e-15) << "trial " << trial;
  }
}

// Seed 003 Figure 2.7: stage 1 takes 2 + 4 time units, stage 2 1 + 2; on 3
// machines the first stage is replicated twice, and each stage sustains one
// input per 3 units. The first layer has no parameters (replicating it is
// free), the second some (replicating the whole model is not).
TEST(PipeDreamDp, TheDissertationsReplicatedFirstStage) {
  const PipeDreamStates c = chainStates({6, 3}, {0, 0}, {0, 100'000'000}, {0, 0});
  PipeDreamOptions o;
  o.levels = {{3, 1e9}};
  auto r = planPipeDream(c, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->time_per_stage, 3);
  ASSERT_EQ(r->levels[0].size(), 2u);
  EXPECT_EQ(r->levels[0][0].replicas, 2);
  EXPECT_EQ(r->levels[0][1].replicas, 1);
  EXPECT_DOUBLE_EQ(r->single_machine, 9);
  EXPECT_DOUBLE_EQ(r->data_parallel, (9 + 4.0 * 2 * 1e8 / (1e9 * 3)) / 3);
}

// Two levels: 2 servers of 2 machines. The top level splits the model
// across servers, then each server's share is split across its machines.
TEST(PipeDreamDp, TwoLevelsSplitAcrossServersThenWithin) {
  // Replicating the first and last layers costs: 4(m−1)|w|/(B·m).
  const PipeDreamStates c = chainStates({1, 1, 1, 1}, {0, 0, 0, 0}, {400'000'000, 0, 0, 400'000'000}, {0, 0, 0, 0});
  PipeDreamOptions o;
  o.levels = {{2, 10e9}, {2, 1e9}};
  auto r = planPipeDream(c, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->levels.size(), 2u);
  // A straight pipeline of 4 one-layer stages: 1 per microbatch.
  EXPECT_DOUBLE_EQ(r->time_per_stage, 1);
  ASSERT_EQ(r->levels[0].size(), 2u);  // across the 2 servers
  EXPECT_EQ(r->levels[0][0].last_layer, 1);
  ASSERT_EQ(r->levels[1].size(), 4u);  // within each
  for (const PipeDreamStage& s : r->levels[1]) EXPECT_EQ(s.first_layer, s.last_layer);
}

// PipeDream's published profiles (tests/fixtures/pipedream/README.md): the
// time per stage its published optimizer printed, to 1e-9, on one level and
// two, straight, and with activation transfers; the stages where they do
// not tie.
std::string publishedGraph(const std::string& name) {
  std::ifstream in(std::string(HYDROZOA_SOURCE_DIR) + "/tests/fixtures/pipedream/" + name + ".graph.txt");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// PipeDream's cuts (the antichain DAG) of a published profile.
PipeDreamStates publishedStates(const std::string& name) {
  auto graph = profile::parsePipeDreamGraph(publishedGraph(name), name);
  EXPECT_TRUE(graph.ok()) << graph.status().message();
  auto states = pipeDreamStates(*graph);
  EXPECT_TRUE(states.ok()) << states.status().message();
  return *states;
}

TEST(PipeDreamDp, ReproducesThePublishedOptimizerOnItsProfiles) {
  struct Case {
    std::string profile;
    std::vector<PipeDreamLevel> levels;
    bool straight = false;
    std::optional<double> compression;
    double time;
    std::vector<std::tuple<int, int, int>> top;  // [start, end) and replicas of the top level; empty: ties
  };
  const std::vector<Case> cases = {
      {"vgg16", {{4, 1e9}}, false, {}, 0.175732624, {{0, 15, 3}, {15, 40, 1}}},
      {"vgg16", {{4, 1e10}, {4, 1e9}}, false, {}, 0.0443458714667, {{0, 16, 3}, {16, 40, 1}}},
      {"vgg16", {{4, 1e9}}, true, {}, 0.21645, {}},
      {"vgg16", {{8, 1e9}}, false, 1.0, 0.10383317029, {{0, 24, 7}, {24, 40, 1}}},
      {"alexnet", {{4, 1e9}}, false, {}, 0.023165752, {}},
      {"alexnet", {{4, 1e10}, {4, 1e9}}, false, {}, 0.0060111784, {{0, 6, 2}, {6, 9, 1}, {9, 22, 1}}},
      {"alexnet", {{4, 1e9}}, true, {}, 0.028721, {}},
      {"alexnet", {{8, 1e9}}, false, 1.0, 0.018874368, {}},
      // Graphs with branches: cut at their antichains, as PipeDream does.
      {"resnet18", {{4, 1e9}}, false, {}, 0.065918, {}},
      {"resnet18", {{4, 1e10}, {4, 1e9}}, false, {}, 0.01709254, {}},
      {"resnet18", {{4, 1e9}}, true, {}, 0.069523, {}},
      {"resnet18", {{8, 1e9}}, false, 1.0, 0.05078332704, {}},
      {"gnmt", {{4, 1e9}}, false, {}, 0.025868, {}},
      {"gnmt", {{4, 1e10}, {4, 1e9}}, false, {}, 0.011081, {}},
      {"gnmt", {{4, 1e9}}, true, {}, 0.025868, {}},
      {"gnmt", {{8, 1e9}}, false, 1.0, 0.019285, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.profile + " levels " + std::to_string(c.levels.size()));
    PipeDreamOptions o;
    o.levels = c.levels;
    o.straight = c.straight;
    o.activation_compression = c.compression;
    const PipeDreamStates states = publishedStates(c.profile);
    EXPECT_EQ(states.size(), c.profile == "vgg16" ? 40 : c.profile == "alexnet" ? 22 : c.profile == "resnet18" ? 100 : 99);
    auto r = planPipeDream(states, o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_NEAR(r->time_per_stage, c.time, 1e-9 * c.time);
    if (c.top.empty()) continue;
    std::vector<std::tuple<int, int, int>> top;
    for (const PipeDreamStage& s : r->levels.front()) top.emplace_back(s.first_layer, s.last_layer + 1, s.replicas);
    EXPECT_EQ(top, c.top);
  }
}

// The partition as plan.json: the lowest level's stages with the replicas
// of the levels above multiplied in, NOAM microbatches per input-stage copy
// (raised until every stage's copies divide a step's), the slowest stage's
// time per microbatch.
TEST(PipeDreamPlan, FlattensTheLevelsIntoAPlan) {
  const PipeDreamStates states = publishedStates("vgg16");
  PipeDreamOptions o;
  o.levels = {{4, 1e9}};
  auto r = planPipeDream(states, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto planned = pipeDreamPlan(*r, states, o, 64);
  ASSERT_TRUE(planned.ok()) << planned.status().message();
  Plan p = *planned;
  EXPECT_EQ(p.schedule, ScheduleKind::kPipeDream);
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0].last_layer, 14);
  EXPECT_EQ(p.replicasOf(0), 3);
  EXPECT_EQ(p.replicasOf(1), 1);
  EXPECT_EQ(p.data_parallel, 3);
  EXPECT_EQ(p.num_microbatches, 2);  // ⌈4 / 3⌉
  EXPECT_EQ(p.workersUsed(), 4);
  EXPECT_NEAR(p.iteration_seconds, 6 * r->time_per_stage, 1e-12);
  EXPECT_NEAR(p.samples_per_second, 64 / r->time_per_stage, 1e-9);
  EXPECT_NEAR(p.stages[0].forward_seconds + p.stages[0].backward_seconds, r->levels[0][0].compute, 1e-12);
  EXPECT_GT(p.stages[0].forward_seconds, 0);
  auto back = planFromJson(planToJson(p), "plan.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->replicasOf(0), 3);
  // A global batch: a whole number of steps' microbatches, which 3 and 1 divide.
  planned = pipeDreamPlan(*r, states, o, 64, 64 * 12);
  ASSERT_TRUE(planned.ok()) << planned.status().message();
  EXPECT_EQ(planned->num_microbatches, 4);
  EXPECT_EQ(planned->globalBatch(), 64 * 12);
  planned = pipeDreamPlan(*r, states, o, 64, 64 * 10);
  ASSERT_FALSE(planned.ok());
  EXPECT_EQ(planned.status().message(),
            "--global-batch 640 is not a whole number of steps' microbatches: microbatches of 64 go round-robin over "
            "stages replicated 3, 1, so a step holds a multiple of 3 microbatches (192 samples); use --global-batch "
            "576 or 768");
  planned = pipeDreamPlan(*r, states, o, 1, 3 * (std::int64_t{1} << 21));
  ASSERT_FALSE(planned.ok());
  EXPECT_NE(planned.status().message().find("raise --microbatch-size"), std::string::npos)
      << planned.status().message();

  o.levels = {{4, 1e10}, {4, 1e9}};
  r = planPipeDream(states, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  planned = pipeDreamPlan(*r, states, o, 1);
  ASSERT_TRUE(planned.ok()) << planned.status().message();
  p = *planned;
  EXPECT_EQ(p.workersUsed(), 16);
  for (size_t s = 0; s < p.stages.size(); ++s) {
    EXPECT_EQ(p.data_parallel * p.num_microbatches % p.replicasOf(s), 0) << s;
  }
  back = planFromJson(planToJson(p), "plan.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
}

// A PipeDream plan's workers are sized and priced as Hydrozoa's own: by the
// profile's memory model (the runtime, weights, gradients and state, a
// weight version and the activations per microbatch in flight), then the
// catalog's cheapest worker that holds it.
TEST(PipeDreamPlan, SizesAndPricesItsWorkersFromTheProfile) {
  const profile::Profile prof = testing::toyProfile(8);
  const PipeDreamStates states = pipeDreamChain(prof, 4);
  PipeDreamOptions o;
  o.levels = {{3, 1e9}};
  o.straight = true;
  auto r = planPipeDream(states, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto planned = pipeDreamPlan(*r, states, o, 4);
  ASSERT_TRUE(planned.ok()) << planned.status().message();
  Plan p = *planned;
  ASSERT_EQ(p.stages.size(), 3u);
  stageMemoryFromProfile(p, prof, *prof.at(4));
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const PlanStage& st = p.stages[s];
    const auto held = static_cast<std::int64_t>(3 - s);  // p − s in flight, unreplicated
    const MemoryCosts costs = memoryCosts(prof, *prof.at(4), false, 0, false, held > 1 ? static_cast<int>(held) : 0);
    EXPECT_EQ(st.memory_bytes, stageMemory(costs, st.first_layer, st.last_layer, held)) << s;
    EXPECT_GT(st.memory_bytes, prof.runtime_bytes) << s;
  }
  auto catalog = loadCatalog("aci");
  ASSERT_TRUE(catalog.ok());
  ASSERT_TRUE(priceStages(p, *catalog, "").ok());
  EXPECT_EQ(p.platform, "aci");
  UsdPerHour sum = 0;
  for (const PlanStage& st : p.stages) {
    EXPECT_GE(st.worker_memory_bytes, st.memory_bytes);
    EXPECT_GT(st.cost_per_hour, 0);
    EXPECT_FALSE(st.worker.empty());
    sum += st.cost_per_hour;
  }
  EXPECT_NEAR(p.cost_per_hour, sum, 1e-9);
  EXPECT_NEAR(p.samples_per_dollar, p.samples_per_second * 3600 / p.cost_per_hour, 1e-6);
  EXPECT_TRUE(planFromJson(planToJson(p), "plan.json").ok());
  // A stage larger than any worker of the platform: an error naming it.
  p.stages[1].memory_bytes = 100000 * kGB;
  const Status big = priceStages(p, *catalog, "");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.message().find("stage 1 (layers"), std::string::npos) << big.message();
}

TEST(PipeDreamDp, BadOptionsAreErrors) {
  const PipeDreamStates one = chainStates({1}, {0}, {0}, {0});
  EXPECT_FALSE(planPipeDream(one, {}).ok());
  PipeDreamOptions o;
  o.levels = {{0, 1e9}};
  EXPECT_FALSE(planPipeDream(one, o).ok());
  // A straight 2-stage pipeline whose first stage stashes one microbatch
  // of 100 bytes of parameters, on machines of 1 byte.
  const PipeDreamStates c = chainStates({1, 1}, {0, 0}, {100, 100}, {0, 0});
  o.levels = {{2, 1e9}};
  o.straight = true;
  o.memory_limit = 1;
  auto r = planPipeDream(c, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("fits 1 B per machine"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace hydrozoa::plan
