// The linear program every policy starts from (sched/policy.h): a variable
// X[m][j] per job and type it can run on, with Gavel's constraints (5.1-5.3).
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

  // `cost(m, j)`: X[m][j]'s coefficient in the minimised objective (none: 0).
  explicit AllocationLp(const Problem& problem, const std::function<double(int, int)>& cost = nullptr);

  plan::Milp& lp() { return lp_; }
  // throughput(m, X) · factor, as terms over X.
  Terms throughput(int m, double factor) const;
  // Σ coefficient(m, j) · X[m][j] over every variable.
  Terms terms(const std::function<double(int, int)>& coefficient) const;
  // X from a solution.
  std::vector<std::vector<double>> allocation(const plan::Milp::Solution& s) const;

 private:
  const Problem& p_;
  plan::Milp lp_;
  std::vector<std::vector<int>> x_;  // variable of (m, j); -1: none
};

}  // namespace hydrozoa::sched
