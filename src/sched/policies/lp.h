// The linear program every policy starts from (sched/policy.h): a variable
// X[m][j] per job and type it can run on, with Gavel's constraints (5.1-5.3);
// with space sharing, also a variable per pair of Problem::pairs and type
// they can share, counted in both jobs' time (5.2) and once in the type's
// workers (5.3), and in each job's throughput at its rate in the pair.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "plan/solver/milp.h"
#include "sched/problem.h"

namespace hydrozoa::sched {

class AllocationLp {
 public:
  using Terms = std::vector<std::pair<int, double>>;

  // `cost(m, j)`: X[m][j]'s coefficient in the minimised objective (none: 0);
  // `pairCost(c, j)`: that of pair c sharing type j (none: 0).
  explicit AllocationLp(const Problem& problem, const std::function<double(int, int)>& cost = nullptr,
                        const std::function<double(int, int)>& pairCost = nullptr);

  plan::Milp& lp() { return lp_; }
  // throughput(m, X) · factor, as terms over X (its pairs' included).
  Terms throughput(int m, double factor) const;
  // Σ coefficient(m, j) · X[m][j] over every job's variable (not the pairs').
  Terms terms(const std::function<double(int, int)>& coefficient) const;
  // X from a solution.
  std::vector<std::vector<double>> allocation(const plan::Milp::Solution& s) const;
  // The whole allocation: X and the pairs' shares.
  Allocation result(const plan::Milp::Solution& s, double objective, bool capped = false) const;

 private:
  const Problem& p_;
  plan::Milp lp_;
  std::vector<std::vector<int>> x_;     // variable of (m, j); -1: none
  std::vector<std::vector<int>> pair_;  // variable of (pair, j); -1: none
};

// An error naming `policy` when the problem has pairs (space sharing) that
// the policy does not weigh.
Status noSpaceSharing(const Problem& problem, const char* policy);

}  // namespace hydrozoa::sched
