// Planner benchmark: our exact partitioner against Hydrozoa's own V=1000
// bounded DP (Hydrozoa appendix A.2) on the same inputs, in one run.
//
// Prints, per case: wall time of each, the speed ratio, how many inner DPs
// each solved, and the quality difference (how much longer the paper's best
// partition per stage count is than the optimum). Targets (issue 2): 200
// layers into up to 16 stages in under 1 s; 1000 layers into up to 64 stages
// in under 10 s; exact.
//
//   build/bench/plan_bench [--bounds 1000] [--quick]
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <random>

#include "model/zoo.h"
#include "plan/partition/bounded_dp.h"
#include "plan/partition/exact.h"
#include "plan/search.h"
#include "profile/predict.h"

using namespace hydrozoa;
using namespace hydrozoa::plan;

namespace {

double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A chain with layer times in [0.1, 10] ms (backward 1.5-2.5x forward) and
// boundary transfers of 0-3 ms, seeded.
PartitionProblem randomChain(int layers, std::int64_t microbatches, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> ms(0.1e-3, 10e-3), ratio(1.5, 2.5), comm(0, 3e-3);
  PartitionProblem p;
  p.microbatches = microbatches;
  for (int i = 0; i < layers; ++i) {
    p.costs.forward.push_back(ms(rng));
    p.costs.backward.push_back(p.costs.forward.back() * ratio(rng));
    if (i + 1 < layers) p.costs.cut.push_back(comm(rng));
  }
  return p;
}

PartitionProblem zooChain(const std::string& name, std::int64_t microbatches) {
  auto arch = model::buildArch({name, {}});
  auto prof = profile::predictProfile(*arch, *profile::loadDevice("v100"), {8}, "sgd_momentum");
  PartitionProblem p;
  p.costs = chainCosts(*prof, *prof->at(8), 1.25e9);  // 10 Gbit/s
  p.microbatches = microbatches;
  return p;
}

void runCase(const std::string& what, const PartitionProblem& p, int K, int bounds, bool runPaper) {
  auto t0 = std::chrono::steady_clock::now();
  const auto exact = ExactPartitioner().partitionAll(p, K);
  const double exactSeconds = seconds(t0);
  std::int64_t exactEvals = 0;
  double gap = 0;
  for (const auto& r : exact) {
    exactEvals += r.evaluations;
    gap = std::max(gap, r.proven_gap);
  }
  fmt::print("{}\n  ours (exact):        {:>9.3f} s  {:>10} DPs  proven gap {}\n", what, exactSeconds, exactEvals,
             gap == 0 ? "0 (optimal for every k)" : fmt::format("{:.3g} s", gap));
  if (!runPaper) {
    fmt::print("  paper (V={}):        skipped (--quick)\n\n", bounds);
    return;
  }
  t0 = std::chrono::steady_clock::now();
  const auto paper = BoundedDpPartitioner(bounds).partitionAll(p, K);
  const double paperSeconds = seconds(t0);
  double worst = 0, sum = 0;
  int worse = 0, feasible = 0;
  for (int k = 0; k < K; ++k) {
    if (!exact[k].feasible) continue;
    ++feasible;
    const double excess = paper[k].feasible ? paper[k].time.total / exact[k].time.total - 1 : 1e9;
    worst = std::max(worst, excess);
    sum += excess;
    worse += excess > 1e-12;
  }
  fmt::print("  paper (V={}):     {:>9.3f} s  {:>10} DPs\n", bounds, paperSeconds, paper[0].evaluations);
  fmt::print("  speed: ours is {:.0f}x faster; quality: the paper's partition is longer for {} of {} stage counts, "
             "by {:.3f}% on average and {:.3f}% at worst\n\n",
             paperSeconds / exactSeconds, worse, feasible, 100 * sum / feasible, 100 * worst);
}

}  // namespace

int main(int argc, char** argv) {
  int bounds = 1000;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--bounds") && i + 1 < argc) bounds = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--quick")) quick = true;
  }
  fmt::print("Partitioning: exact branch-and-bound vs the paper's bounded DP (V={}), same inputs, one run\n\n", bounds);
  runCase("200-layer random chain, up to 16 stages, M=32", randomChain(200, 32, 1), 16, bounds, true);
  runCase("1000-layer random chain, up to 64 stages, M=32", randomChain(1000, 32, 2), 64, bounds, !quick);
  runCase("ResNet-152 (52 layers, predicted V100, microbatch 8, 10 Gbit/s), up to 16 stages, M=32",
          zooChain("resnet152", 32), 16, bounds, true);
  runCase("BERT-large (26 layers, predicted V100), up to 16 stages, M=64", zooChain("bert24", 64), 16, bounds, true);
  return 0;
}
