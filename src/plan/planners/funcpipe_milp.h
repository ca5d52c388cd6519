// FuncPipe's co-optimiser of partition, data parallelism and memory per
// stage (seed 001 §3.4, appendix C; docs/functions.md): the model of
// plan/cost/funcpipe.h solved exactly with a MILP solver (COIN-OR CBC,
// plan/solver/milp.h), per data-parallel degree d (FuncPipe's y_k; µ = M/d
// is then a constant).
//
// The program. FuncPipe's x_i (a stage ends after layer i) and z_ij (layer
// i's tier) are written as one binary per possible stage, y_(a,e,j): layers
// a..e on tier j, created only when that stage fits its tier (3b holds by
// construction) and no smaller tier is as fast in both passes with as much
// bandwidth (it would serve every objective as well for less memory); x_e = Σ_(a,j) y_(a,e,j), z_ij = Σ_(a ≤ i ≤ e) y_(a,e,j). The
// chosen stages form a path from layer 0 to the last (flow conservation),
// at most workers/d of them. Every term of the model that depends on one
// stage (its compute, the transfers over its two boundaries at its own
// bandwidth, its sync) is then a constant times its y; the maxima Δ_f and
// Δ_b^a are epigraph variables bounded, per layer, by the sum over the
// stages covering that layer (exactly one is chosen, so the bound is the
// max for integers and tight for fractions); the sums R_a of t_b^a are
// chained from the top. This is the model exactly (tested against
// bestByEnumeration) and its relaxation is strong: the first version, with
// FuncPipe's per-layer hats and big-M products, took 8 s for 12 layers and
// 3 tiers where this takes a tenth of a second.
//
// NOTE [The time–memory frontier]
// The cost c_iter = P·t_iter·d·Σ M_j is a product of the program's two
// quantities, t_iter and the functions' memory; its linearisation by big-M
// (FuncPipe's appendix C) relaxes so weakly that CBC took 30-40 s for 10
// layers and 8 tiers. Every objective α1·c_iter + α2·t_iter grows with both,
// so its optimum is on their Pareto frontier, which is walked exactly: the
// least t_iter with no memory cap; then again with the memory capped just
// below the last point's (half the tiers' greatest common divisor below it:
// no total lies between); until the cap is below what the model needs at
// all, or even the least memory at the last point's time costs more than
// the best found. Each step is the program above plus one row.
#pragma once

#include <vector>

#include "core/status.h"
#include "plan/cost/funcpipe.h"

namespace hydrozoa::plan {

struct FuncPipeSolution {
  FuncPipeConfig config;
  FuncPipeCost cost;       // the model's, for config
  double objective = 0;    // funcPipeObjective(cost, weights)
  int variables = 0, constraints = 0;  // of the largest program solved
  int programs = 0;                    // solved
};

// The configuration with the least α1·c_iter + α2·t_iter whose stages fit.
// Errors: an invalid problem; Infeasible when nothing fits (the message says
// what the smallest stage needs against the largest tier); Unavailable when
// the solver's time limit (`limit` per program) passed.
Result<FuncPipeSolution> solveFuncPipe(const FuncPipeProblem& problem, const FuncPipeWeights& weights,
                                       Seconds limit = 600);

// The cost/time Pareto frontier itself: every configuration that no other
// is both as fast and as cheap as (fastest first), from each degree's
// time–memory frontier, walked until its remaining points are dominated.
// It holds every weighted-sum optimum and the unsupported points between
// them. `programs`: the MILPs solved.
Result<std::vector<FuncPipeSolution>> funcPipeFrontier(const FuncPipeProblem& problem, Seconds limit = 600,
                                                       int* programs = nullptr);

}  // namespace hydrozoa::plan
