// FuncPipe's performance model of pipelined training on serverless functions
// (seed 001 §3.4 and appendix B; docs/functions.md): a chain of L layers cut
// into stages, every stage replicated d times, each stage's workers of one
// memory tier, activations and gradients passed through a storage channel,
// and the replicas of a stage synchronised by scatter-reduce through it.
//
// With x_i = 1 when a stage ends after layer i (x_L = 1), j(i) the tier of
// layer i's stage, µ = M / d microbatches per replica, and the hats summing
// a quantity from layer i up to the top of its stage (û_i = u_i + û_{i+1}·
// (1 − x_i), û_L = u_L: at a stage's lowest layer, the stage's total):
//
//   t_fc^i = β·T_f^{i,j(i)}              t_bc^i = β·T_b^{i,j(i)}
//   t_fu^i = x_i·(o_i / W_{j(i)} + t_lat)    t_fd^i = x_i·(o_i / W_{j(i+1)} + t_lat)
//   t_bu^{i+1} = t_fu^i's bytes over W_{j(i+1)}, t_bd^{i+1} over W_{j(i)}
//     (the gradient of layer i's output goes back: the same bytes)
//   t_f = Σ_i t_fc^i + Σ_{i<L} (t_fu^i + t_fd^i) + (µ − 1)·Δ_f,
//     Δ_f = max{ t̂_fc^i, t_fu^i, t_fd^i }                                    (appendix B)
//   t_b^i = Σ_{k≥i} t_bc^k + Σ_{k>i} (t_bu^k + t_bd^k) + (µ − 1)·Δ_b^i,
//     Δ_b^i = max{ t̂_bc^{k≥i}, t_bu^{k>i}, t_bd^{k>i} }                          (11)
//   t_s^i = [d > 1]·(γ·ŝ_i / W_{j(i)} + δ·t_lat)                                (12)
//   t_iter = t_f + max_i (t_b^i + t_s^i)                                      (7)
//   c_iter = P · t_iter · d · Σ_{stages} M_{j}                                 (5, 6)
//
// with the pipelined scatter-reduce's γ = 2, δ = 2 + d (2), or LambdaML's
// γ = 3 − 2/d, δ = 4 (1). A stage fits when µ·Â + (2 + f + 2·[d > 1])·Ŝ +
// s_0 ≤ M_j at its lowest layer: the activations of its µ microbatches (the
// forward passes all run before the backward ones), the parameters, their
// gradients, f times them of optimizer state (FuncPipe's model has f = 0),
// and twice them serialised for the synchronisation; s_0 the worker's own
// (3b). The paper's hats run the other way in places and its sync term uses
// the stage's lowest layer; taken here as the stage's total at its lowest
// layer, which is what its text says they are.
//
// Pure: no libtorch, no solver. The planner that searches this model is
// plan/planners/funcpipe_milp.h; `bestByEnumeration` tries every
// configuration and is its reference in tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"

namespace hydrozoa::plan {

// A memory size the platform offers a function.
struct FunctionTier {
  Bytes memory = 0;
  BytesPerSecond bandwidth = 0;  // W_j: to and from the storage channel
};

enum class ScatterReduce { kPipelined, kLambdaML };

struct FuncPipeProblem {
  // Per layer (size L): forward and backward compute on each tier ([i][j],
  // seconds), the output's bytes (o_i; the last layer's is unused), the
  // activations one microbatch keeps (a_i) and the parameters (s_i).
  std::vector<std::vector<Seconds>> forward, backward;
  std::vector<Bytes> output, activation, parameters;
  std::vector<FunctionTier> tiers;         // ascending memory
  std::vector<int> data_parallel = {1};    // D: the degrees to choose from
  std::int64_t microbatches = 1;           // M per iteration over all replicas
  int workers = 0;                         // at most d × stages (0: no limit)
  Bytes worker_bytes = 0;                  // s_0
  double optimizer_state = 0;              // f: bytes of state per parameter byte
  Seconds latency = 0;                     // t_lat
  double slowdown = 1;                     // β
  double price_per_gb_second = 0;          // P, per GB (10^9 bytes) and second
  ScatterReduce sync = ScatterReduce::kPipelined;

  int numLayers() const { return static_cast<int>(forward.size()); }
  int numTiers() const { return static_cast<int>(tiers.size()); }
};

// A configuration: stage s covers layers [first[s], first[s+1]) on tier
// tier[s], d replicas of every stage.
struct FuncPipeConfig {
  std::vector<int> first;  // first[0] == 0, ascending
  std::vector<int> tier;   // per stage, an index into FuncPipeProblem::tiers
  int data_parallel = 1;

  int numStages() const { return static_cast<int>(first.size()); }
  bool operator==(const FuncPipeConfig& o) const {
    return first == o.first && tier == o.tier && data_parallel == o.data_parallel;
  }
};

struct FuncPipeCost {
  Seconds iteration = 0;      // t_iter
  Seconds forward = 0;        // t_f
  Seconds backward = 0;       // max_i (t_b^i + t_s^i)
  double dollars = 0;         // c_iter
  Bytes memory = 0;           // d · Σ stages' tiers
  std::vector<Bytes> needs;   // per stage: what it must hold (3b)
  bool fits = true;           // every stage within its tier
};

// Checks the problem's shapes and ranges; errors name the field.
Status validateFuncPipeProblem(const FuncPipeProblem& problem);
// Checks a configuration against its problem (ranges, d a degree of D that
// divides M, d × stages within the workers).
Status validateFuncPipeConfig(const FuncPipeProblem& problem, const FuncPipeConfig& config);

// The model above for one configuration (valid for `problem`).
FuncPipeCost funcPipeCost(const FuncPipeProblem& problem, const FuncPipeConfig& config);

// The scatter-reduce's γ and δ at degree d (both 0 at d = 1: no sync).
struct SyncTerms {
  double gamma = 0, delta = 0;
};
SyncTerms syncTerms(const FuncPipeProblem& problem, int d);
// What a stage holding these activations (per microbatch) and parameters
// must have at degree d (3b), rounded up to whole bytes.
Bytes stageNeeds(const FuncPipeProblem& problem, int d, double activations, double parameters);

// Points fastest first, without one that a faster (or as fast) point is as
// cheap as: the cost/time Pareto frontier of `points` (each with a `cost`,
// a FuncPipeCost). Prices equal to rounding (a function twice the size for
// half the time) are equal: the slower one is not on it.
template <typename Point>
std::vector<Point> fastestFirstFrontier(std::vector<Point> points) {
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
    return a.cost.iteration != b.cost.iteration ? a.cost.iteration < b.cost.iteration
                                                : a.cost.dollars < b.cost.dollars;
  });
  std::vector<Point> frontier;
  for (Point& p : points) {
    if (!frontier.empty() && p.cost.dollars >= frontier.back().cost.dollars * (1 - 1e-9)) continue;
    frontier.push_back(std::move(p));
  }
  return frontier;
}

// α1·c_iter + α2·t_iter.
struct FuncPipeWeights {
  double cost = 1;  // α1, per dollar
  double time = 0;  // α2, per second
};
double funcPipeObjective(const FuncPipeCost& cost, const FuncPipeWeights& weights);

// Every configuration (every cut, tier per stage and degree): the one whose
// stages fit with the least objective (ties: the first found), or nothing
// when none fits. Exponential: for tests and small chains (L ≤ 16).
std::optional<FuncPipeConfig> bestByEnumeration(const FuncPipeProblem& problem, const FuncPipeWeights& weights);

}  // namespace hydrozoa::plan
