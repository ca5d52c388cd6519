// Max-min fairness (LAS with weights; Gavel §5.4.1): maximise
//   min_m  throughput(m, X) / throughput(m, X_equal) · scale_factor_m / weight_m,
// each job's effective throughput against what equal time on every type
// would give it. Objective: that minimum.
#include "sched/policies/policies.h"

namespace hydrozoa::sched {

Result<Allocation> MaxMinFairness::allocate(const Problem& p) const {
  HZ_RETURN_IF_ERROR(checkProblem(p));
  AllocationLp lp(p);
  const int t = lp.lp().addVariable(0, 1e30, -1.0, false);  // the minimum, maximised
  const std::vector<double> equal = equalShare(p);
  for (size_t m = 0; m < p.jobs.size(); ++m) {
    const JobDemand& job = p.jobs[m];
    const double norm = effectiveThroughput(job, equal);
    auto terms = lp.throughput(static_cast<int>(m), job.scale_factor / (job.weight * norm));
    terms.emplace_back(t, -1.0);
    lp.lp().addConstraint(terms, plan::Milp::kAtLeast, 0);
  }
  HZ_ASSIGN_OR_RETURN(const plan::Milp::Solution s, lp.lp().solve());
  return lp.result(s, s.values[static_cast<size_t>(t)]);
}

}  // namespace hydrozoa::sched
