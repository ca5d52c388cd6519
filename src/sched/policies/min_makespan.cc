// Minimise makespan (Gavel §5.4.2): minimise max_m steps_m / throughput(m, X),
// solved as maximising u = 1/makespan with throughput(m, X) ≥ steps_m · u.
// Objective: the makespan, seconds.
#include "sched/policies/policies.h"

namespace hydrozoa::sched {

int addMakespanRows(AllocationLp& lp, const Problem& p) {
  int u = -1;
  for (size_t m = 0; m < p.jobs.size(); ++m) {
    if (!(p.jobs[m].steps_remaining > 0)) continue;
    if (u < 0) u = lp.lp().addVariable(0, 1e30, -1.0, false);
    // throughput(m, X) / steps_m ≥ u: rows of like scale.
    auto terms = lp.throughput(static_cast<int>(m), 1.0 / p.jobs[m].steps_remaining);
    terms.emplace_back(u, -1.0);
    lp.lp().addConstraint(terms, plan::Milp::kAtLeast, 0);
  }
  return u;
}

Allocation nothingToDo(const Problem& p) {
  return Allocation{std::vector<std::vector<double>>(p.jobs.size(), std::vector<double>(p.types.size())), 0};
}

Result<Allocation> MinMakespan::allocate(const Problem& p) const {
  HZ_RETURN_IF_ERROR(checkProblem(p));
  AllocationLp lp(p);
  const int u = addMakespanRows(lp, p);
  if (u < 0) return nothingToDo(p);
  HZ_ASSIGN_OR_RETURN(const plan::Milp::Solution s, lp.lp().solve());
  const double rate = s.values[static_cast<size_t>(u)];
  return lp.result(s, rate > 0 ? 1 / rate : 1e30);
}

}  // namespace hydrozoa::sched
