// Minimise makespan within a budget (Gavel ch. 6 §6.4.3): the makespan
// policy with the cost of the jobs' remaining steps at most B. With u =
// 1/makespan, that cost — the allocation's dollars per second, Σ X·scale·
// price / 3600, times the makespan — is at most B exactly when the rate is at
// most B·u: one LP, no search. Objective: the makespan, seconds.
#include <fmt/format.h>

#include "sched/policies/policies.h"

namespace hydrozoa::sched {

Result<Allocation> MinMakespanBudget::allocate(const Problem& p) const {
  HZ_RETURN_IF_ERROR(checkProblem(p));
  HZ_RETURN_IF_ERROR(needPrices(p, "min_makespan_budget"));
  HZ_RETURN_IF_ERROR(noSpaceSharing(p, "min_makespan_budget"));
  if (!(p.budget > 0)) return invalidArgument("policy min_makespan_budget needs a budget in dollars (--budget 500)");
  AllocationLp lp(p);
  const int u = addMakespanRows(lp, p);
  if (u < 0) return nothingToDo(p);
  // Dollars per second ≤ B · u.
  auto spend = lp.terms([&](int m, int j) {
    return p.jobs[static_cast<size_t>(m)].scale_factor * p.price[static_cast<size_t>(j)] / 3600;
  });
  spend.emplace_back(u, -p.budget);
  lp.lp().addConstraint(spend, plan::Milp::kAtMost, 0);
  HZ_ASSIGN_OR_RETURN(const plan::Milp::Solution s, lp.lp().solve());
  const double rate = s.values[static_cast<size_t>(u)];
  if (!(rate > 0)) return infeasible(fmt::format("no allocation finishes the jobs within ${:g}", p.budget));
  return Allocation{lp.allocation(s), 1 / rate, /*capped=*/true};
}

}  // namespace hydrozoa::sched
