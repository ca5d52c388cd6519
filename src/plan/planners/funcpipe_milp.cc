#include "plan/planners/funcpipe_milp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "plan/solver/milp.h"

namespace hydrozoa::plan {

namespace {

using Terms = std::vector<std::pair<int, double>>;

// Bytes as gigabytes, so that the program's coefficients are near 1.
double gb(double bytes) { return bytes / 1e9; }

// A stage that may be chosen: layers [first, last] on `tier`, with its
// constants (the model's terms that depend on it alone).
struct Segment {
  int first = 0, last = 0, tier = 0;
  int var = -1;        // y: chosen
  Seconds forward = 0, backward = 0;
  Seconds out = 0;     // its output up (forward) and the gradient down (backward), at its bandwidth
  Seconds in = 0;      // its input down (forward) and that input's gradient up (backward)
  Seconds sync = 0;    // t_s
};

struct Built {
  Milp milp;
  std::vector<Segment> segments;
};

// The least memory of all the functions of one replica of any configuration
// at degree d: the whole model's needs (3b) in one stage.
Bytes leastMemory(const FuncPipeProblem& p, int d) {
  double params = 0, acts = 0;
  for (int i = 0; i < p.numLayers(); ++i) {
    params += static_cast<double>(p.parameters[i]);
    acts += static_cast<double>(p.activation[i]);
  }
  return std::max(p.tiers.front().memory, stageNeeds(p, d, acts, params));
}

// The program for one degree d: the least t_iter, at most `timeCap`, among
// configurations whose functions of one replica take at most `memoryCap`
// (< 0: any). False when no stage of any layer fits.
bool build(const FuncPipeProblem& p, int d, double memoryCap, Seconds timeCap, Built& b) {
  const int L = p.numLayers(), J = p.numTiers();
  const double mu = static_cast<double>(p.microbatches / d);
  const SyncTerms sync = syncTerms(p, d);
  Milp& m = b.milp;

  // Every stage that fits its tier (the memory constraint holds by
  // construction), less those that a smaller tier dominates: as fast in
  // both passes and with as much bandwidth, it serves every objective at
  // least as well for less memory (funcpipe_milp.h).
  std::vector<std::vector<int>> starting(L + 1), ending(L);  // segment indices by first and last layer
  for (int a = 0; a < L; ++a) {
    std::vector<double> f(J, 0), bw(J, 0);
    double params = 0, acts = 0;
    for (int e = a; e < L; ++e) {
      params += static_cast<double>(p.parameters[e]);
      acts += static_cast<double>(p.activation[e]);
      const Bytes needs = stageNeeds(p, d, acts, params);
      std::vector<int> kept;
      for (int j = 0; j < J; ++j) {
        f[j] += p.slowdown * p.forward[e][j];
        bw[j] += p.slowdown * p.backward[e][j];
        const FunctionTier& t = p.tiers[j];
        if (needs > t.memory) continue;
        const bool dominated = std::any_of(kept.begin(), kept.end(), [&](int k) {
          return f[k] <= f[j] && bw[k] <= bw[j] && p.tiers[k].bandwidth >= t.bandwidth;
        });
        if (dominated) continue;
        kept.push_back(j);
        Segment s;
        s.first = a;
        s.last = e;
        s.tier = j;
        s.forward = f[j];
        s.backward = bw[j];
        s.out = e + 1 < L ? static_cast<double>(p.output[e]) / t.bandwidth + p.latency : 0;
        s.in = a > 0 ? static_cast<double>(p.output[a - 1]) / t.bandwidth + p.latency : 0;
        s.sync = sync.gamma * params / t.bandwidth + sync.delta * p.latency;  // 0 at d = 1
        s.var = m.addVariable(0, 1, 0, true);
        starting[a].push_back(static_cast<int>(b.segments.size()));
        ending[e].push_back(static_cast<int>(b.segments.size()));
        b.segments.push_back(s);
      }
    }
  }
  if (starting[0].empty() || ending[L - 1].empty()) return false;
  const std::vector<Segment>& seg = b.segments;
  // A path of stages from layer 0 to the last: one stage starts where the one before ends.
  for (int a = 0; a < L; ++a) {
    Terms flow;
    for (int k : starting[a]) flow.push_back({seg[k].var, 1});
    if (a > 0) {
      for (int k : ending[a - 1]) flow.push_back({seg[k].var, -1});
    }
    m.addConstraint(flow, Milp::kEqual, a == 0 ? 1 : 0);
  }
  {
    Terms last;
    for (int k : ending[L - 1]) last.push_back({seg[k].var, 1});
    m.addConstraint(last, Milp::kEqual, 1);
  }
  if (p.workers > 0) {  // at most workers / d stages
    Terms all;
    for (const Segment& s : seg) all.push_back({s.var, 1});
    m.addConstraint(all, Milp::kAtMost, static_cast<double>(p.workers / d));
  }
  if (memoryCap >= 0) {  // in GB
    Terms memory;
    for (const Segment& s : seg) memory.push_back({s.var, gb(static_cast<double>(p.tiers[s.tier].memory))});
    m.addConstraint(memory, Milp::kAtMost, gb(memoryCap));
  }
  auto continuous = [&](double objective = 0) { return m.addVariable(0, HUGE_VAL, objective, false); };
  // Which stages cover each layer: exactly one of them is chosen, so a max
  // over the chosen stages is at least, per layer, the sum over the stages
  // covering it (the same for integers, and far tighter for fractions than
  // one row per stage).
  std::vector<std::vector<int>> covering(L);
  for (size_t k = 0; k < seg.size(); ++k) {
    for (int i = seg[k].first; i <= seg[k].last; ++i) covering[i].push_back(static_cast<int>(k));
  }
  // Forward: Δ_f ≥ each chosen stage's compute and transfers.
  const int lagF = continuous();
  for (int i = 0; i < L; ++i) {
    Terms t = {{lagF, 1}};
    for (int k : covering[i]) t.push_back({seg[k].var, -std::max({seg[k].forward, seg[k].out, seg[k].in})});
    m.addConstraint(t, Milp::kAtLeast, 0);
  }
  // Backward, from the top: R_a = the compute and transfers of the stages
  // from a up (and of the boundaries above a), Δ_b^a their lag, and
  // Z ≥ t_b^a + t_s for the stage starting at a (at other a, dominated).
  const int Z = continuous();
  int rAbove = -1, lagAbove = -1;
  for (int a = L - 1; a >= 0; --a) {
    const int r = continuous(), lag = continuous();
    Terms sum = {{r, 1}};
    if (rAbove >= 0) sum.push_back({rAbove, -1});
    for (int k : starting[a]) sum.push_back({seg[k].var, -(seg[k].backward + seg[k].out)});
    for (int k : starting[a + 1]) sum.push_back({seg[k].var, -seg[k].in});
    m.addConstraint(sum, Milp::kEqual, 0);
    if (lagAbove >= 0) m.addConstraint({{lag, 1}, {lagAbove, -1}}, Milp::kAtLeast, 0);
    // The stage covering a (when it starts below a, its terms only make
    // this row larger than the paper's Δ_b^a, and this a's bound on Z is
    // then dominated by its stage's first layer's), and the boundary below
    // a + 1.
    Terms own = {{lag, 1}};
    for (int k : covering[a]) own.push_back({seg[k].var, -std::max(seg[k].backward, seg[k].out)});
    m.addConstraint(own, Milp::kAtLeast, 0);
    if (a + 1 < L) {
      Terms below = {{lag, 1}};
      for (int k : starting[a + 1]) below.push_back({seg[k].var, -seg[k].in});
      m.addConstraint(below, Milp::kAtLeast, 0);
    }
    Terms bound = {{Z, 1}, {r, -1}, {lag, -(mu - 1)}};
    for (int k : starting[a]) bound.push_back({seg[k].var, -seg[k].sync});
    m.addConstraint(bound, Milp::kAtLeast, 0);
    rAbove = r;
    lagAbove = lag;
  }
  // t_iter, the objective.
  const int T = m.addVariable(0, timeCap, 1, false);
  Terms iteration = {{T, 1}, {lagF, -(mu - 1)}, {Z, -1}};
  for (const Segment& s : seg) iteration.push_back({s.var, -(s.forward + s.out + s.in)});
  m.addConstraint(iteration, Milp::kEqual, 0);
  return true;
}

// Why nothing fits: the layer that needs the most on its own, at the degree
// where it needs the least.
std::string whyNothingFits(const FuncPipeProblem& p) {
  const FunctionTier& largest = p.tiers.back();
  int worst = 0;
  double worstNeed = 0;
  int worstD = 1;
  for (int i = 0; i < p.numLayers(); ++i) {
    double best = HUGE_VAL;
    int bestD = 1;
    for (int d : p.data_parallel) {
      if (p.microbatches % d != 0) continue;
      const double need = static_cast<double>(
          stageNeeds(p, d, static_cast<double>(p.activation[i]), static_cast<double>(p.parameters[i])));
      if (need < best) {
        best = need;
        bestD = d;
      }
    }
    if (best > worstNeed) {
      worstNeed = best;
      worst = i;
      worstD = bestD;
    }
  }
  if (worstNeed > static_cast<double>(largest.memory)) {
    return fmt::format("layer {} alone needs {} (its parameters, gradients and state, and the activations of {} "
                       "microbatches at {} replicas), more than the largest function, {}: choose a platform with "
                       "larger functions, or smaller or fewer microbatches per replica",
                       worst, formatBytes(static_cast<Bytes>(worstNeed)), p.microbatches / worstD, worstD,
                       formatBytes(largest.memory));
  }
  return fmt::format("no cut of the {} layers into at most {} stages fits the largest function ({}): allow more "
                     "workers, or a platform with larger functions",
                     p.numLayers(), p.workers > 0 ? std::to_string(p.workers) : std::string("any number of"),
                     formatBytes(largest.memory));
}

// NOTE [The time–memory frontier] at degree d: calls `point` with each
// configuration found, fastest first, while it returns true. The first
// program has no memory cap, each next one a cap just below the last
// point's memory. Returns the programs solved, or an error.
Result<int> walkFrontier(const FuncPipeProblem& p, int d, Seconds limit, Seconds timeCap,
                         const std::function<bool(const FuncPipeSolution&)>& point, int* variables,
                         int* constraints) {
  const int L = p.numLayers();
  // Distinct memory totals differ by at least the tiers' greatest common
  // divisor: a cap of half of it below one total excludes it and no smaller.
  Bytes step = 0;
  for (const FunctionTier& t : p.tiers) step = std::gcd(step, t.memory);
  int programs = 0;
  double cap = -1;  // on one replica's memory; < 0: none
  for (;;) {
    Built b;
    if (!build(p, d, cap, timeCap, b)) break;
    ++programs;
    *variables = std::max(*variables, b.milp.numVariables());
    *constraints = std::max(*constraints, b.milp.numConstraints());
    auto solved = b.milp.solve(limit);
    if (!solved.ok()) {
      if (solved.status().code() == ErrorCode::kInfeasible) break;
      return solved.status();
    }
    FuncPipeConfig c;
    c.data_parallel = d;
    for (int a = 0;;) {  // follow the chosen stages up the chain
      const Segment* next = nullptr;
      for (const Segment& s : b.segments) {
        if (s.first == a && solved->values[s.var] > 0.5) next = &s;
      }
      if (!next) return internalError("the FuncPipe program's stages do not cover the model");
      c.first.push_back(a);
      c.tier.push_back(next->tier);
      a = next->last + 1;
      if (a == L) break;
    }
    FuncPipeSolution s;
    s.config = c;
    s.cost = funcPipeCost(p, c);
    if (!s.cost.fits) return internalError("the FuncPipe program chose a configuration that does not fit");
    if (!point(s)) break;
    cap = static_cast<double>(s.cost.memory / d) - static_cast<double>(step) / 2;
    if (cap < static_cast<double>(leastMemory(p, d)) - static_cast<double>(step) / 2) break;
  }
  return programs;
}

Status checkWeights(const FuncPipeWeights& weights) {
  if (!(weights.cost >= 0) || !(weights.time >= 0) || !std::isfinite(weights.cost) || !std::isfinite(weights.time) ||
      weights.cost + weights.time <= 0) {
    return invalidArgument(fmt::format("the weights of cost and time ({}, {}) must be numbers from 0, not both 0",
                                       weights.cost, weights.time));
  }
  return Status();
}

bool usable(const FuncPipeProblem& p, int d) { return p.microbatches % d == 0 && (p.workers == 0 || d <= p.workers); }

}  // namespace

Result<FuncPipeSolution> solveFuncPipe(const FuncPipeProblem& p, const FuncPipeWeights& weights, Seconds limit) {
  HZ_RETURN_IF_ERROR(validateFuncPipeProblem(p));
  HZ_RETURN_IF_ERROR(checkWeights(weights));
  const bool priced = weights.cost > 0 && p.price_per_gb_second > 0;
  std::optional<FuncPipeSolution> best;
  int programs = 0, variables = 0, constraints = 0;
  for (int d : p.data_parallel) {
    if (!usable(p, d)) continue;
    // What every configuration of degree d costs at least per second of t_iter.
    const double perSecond =
        weights.cost * p.price_per_gb_second * d * static_cast<double>(leastMemory(p, d)) / 1e9 + weights.time;
    // Only a configuration faster than this can beat the best found.
    const Seconds timeCap = best && perSecond > 0 ? best->objective / perSecond * (1 + 1e-9) : HUGE_VAL;
    HZ_ASSIGN_OR_RETURN(const int n, walkFrontier(
                                         p, d, limit, timeCap,
                                         [&](const FuncPipeSolution& found) {
                                           FuncPipeSolution s = found;
                                           s.objective = funcPipeObjective(s.cost, weights);
                                           const Seconds fastest = s.cost.iteration;
                                           if (!best || s.objective < best->objective) best = std::move(s);
                                           // The next point has less memory and no less time; none can
                                           // beat the best once even the least memory at this time does not.
                                           return priced && fastest * perSecond < best->objective;
                                         },
                                         &variables, &constraints));
    programs += n;
  }
  if (!best) return infeasible(whyNothingFits(p));
  best->variables = variables;
  best->constraints = constraints;
  best->programs = programs;
  return *best;
}

Result<std::vector<FuncPipeSolution>> funcPipeFrontier(const FuncPipeProblem& p, Seconds limit, int* programs) {
  HZ_RETURN_IF_ERROR(validateFuncPipeProblem(p));
  std::vector<FuncPipeSolution> found;
  int n = 0, variables = 0, constraints = 0;
  for (auto it = p.data_parallel.rbegin(); it != p.data_parallel.rend(); ++it) {  // many replicas: often cheap
    const int d = *it;
    if (!usable(p, d)) continue;
    const double perGbSecond = p.price_per_gb_second * d * static_cast<double>(leastMemory(p, d)) / 1e9;
    HZ_ASSIGN_OR_RETURN(const int k, walkFrontier(
                                         p, d, limit, HUGE_VAL,
                                         [&](const FuncPipeSolution& s) {
                                           found.push_back(s);
                                           // Every later point takes at least this long and costs at least
                                           // this much: dominated once a point found is as fast and as cheap.
                                           const double least = s.cost.iteration * perGbSecond;
                                           return std::none_of(found.begin(), found.end(), [&](const auto& o) {
                                             return o.cost.iteration <= s.cost.iteration && o.cost.dollars <= least;
                                           });
                                         },
                                         &variables, &constraints));
    n += k;
  }
  if (found.empty()) return infeasible(whyNothingFits(p));
  std::vector<FuncPipeSolution> frontier = fastestFirstFrontier(std::move(found));
  if (programs) *programs = n;
  return frontier;
}

}  // namespace hydrozoa::plan
