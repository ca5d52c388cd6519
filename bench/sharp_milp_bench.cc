// Sharded-LRTF, random and round-robin against the exact optimum of Hydra's
// MILP (select/sharp.h, CBC) on instances made from a SHARP run's measured
// units: each unit's mean load (load_begin to compute_begin, a run without
// double buffering) and compute (compute_begin to end) per task and place in
// the step, from <run>/timeline.csv and <run>/sharp.json. bench/sharp_bench.sh
// runs it; alone: sharp_milp_bench RUN_DIR [WORKERS=2].
#include <fmt/format.h>

#include <iostream>
#include <map>

#include "core/files.h"
#include "select/sharp.h"
#include "select/timeline.h"

using namespace hydrozoa;
using namespace hydrozoa::select;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: sharp_milp_bench RUN_DIR [WORKERS]\n";
    return 2;
  }
  const std::string run = argv[1];
  const int workers = argc > 2 ? std::stoi(argv[2]) : 2;
  auto sharp = readJsonFile(run + "/sharp.json");
  if (!sharp.ok()) {
    std::cerr << sharp.status().message() << "\n";
    return 1;
  }
  // (task, place in the step) -> {load, compute} sums and count.
  std::map<std::pair<int, int>, std::array<double, 3>> sums;
  std::map<int, int> perStep;
  for (const Json& t : (*sharp)["tasks"]) perStep[t["index"].get<int>()] = 2 * static_cast<int>(t["shards"].size()) - 1;
  for (const TimelineUnit& u : readTimeline(run + "/timeline.csv")) {
    if (u.kind == "evaluate") continue;
    auto& s = sums[{u.task, static_cast<int>(u.unit % perStep[u.task])}];
    s[0] += u.compute_begin - u.load_begin;
    s[1] += u.end - u.compute_begin;
    s[2] += 1;
  }
  std::vector<ModelWork> all;
  for (const auto& [task, n] : perStep) {
    ModelWork m;
    m.name = fmt::format("task {}", task);
    for (int p = 0; p < n; ++p) {
      const auto& s = sums[{task, p}];
      m.units.push_back({s[2] > 0 ? s[0] / s[2] : 0, s[2] > 0 ? s[1] / s[2] : 0});
    }
    all.push_back(m);
  }
  struct Instance {
    std::string name;
    std::vector<ModelWork> models;
  };
  std::vector<Instance> instances;
  // CBC proves optima of Hydra's big-M job shop up to about a dozen units
  // in seconds (20 units: not within minutes).
  const auto some = [&](std::vector<size_t> which, std::int64_t minibatches) {
    std::vector<ModelWork> out;
    for (size_t w : which) {
      if (w >= all.size()) continue;
      out.push_back(all[w]);
      out.back().minibatches = minibatches;
    }
    return out;
  };
  instances.push_back({"tasks 0, 2, 6: 1 minibatch each", some({0, 2, 6}, 1)});
  instances.push_back({"tasks 0 and 4: 2 minibatches each", some({0, 4}, 2)});
  instances.push_back({"tasks 1, 3, 5: 1 minibatch each", some({1, 3, 5}, 1)});
  for (const Instance& i : instances) {
    std::int64_t units = 0;
    for (const ModelWork& m : i.models) units += m.totalUnits();
    auto best = optimalSharp(i.models, workers, 60);
    if (!best.ok()) {
      std::cout << fmt::format("  {} ({} units): {}\n", i.name, units, best.status().message());
      continue;
    }
    std::cout << fmt::format("  {} ({} units) on {} workers: optimum {:.3f} s\n", i.name, units, workers,
                             best->makespan);
    for (Order o : {Order::kLrtf, Order::kRandom, Order::kRoundRobin, Order::kSequential}) {
      SharpOptions so;
      so.workers = workers;
      so.order = o;
      so.double_buffer = false;
      auto r = simulateSharp(i.models, so);
      if (!r.ok()) continue;
      std::cout << fmt::format("    {:12} {:.3f} s, {:+.1f}% over the optimum\n", orderName(o), r->makespan,
                               100 * (r->makespan / best->makespan - 1));
    }
  }
  return 0;
}
