// FIFO (Gavel §5.4.2): jobs in arrival order, each on the fastest types
// free: maximise Σ_m throughput(m, X) / T_m,fastest · (M − m). Objective:
// that sum.
#include <algorithm>

#include "sched/policies/policies.h"

namespace hydrozoa::sched {

Result<Allocation> Fifo::allocate(const Problem& p) const {
  HZ_RETURN_IF_ERROR(checkProblem(p));
  const double jobs = static_cast<double>(p.jobs.size());
  AllocationLp lp(p, [&](int m, int j) {
    const JobDemand& job = p.jobs[static_cast<size_t>(m)];
    const double fastest = *std::max_element(job.throughput.begin(), job.throughput.end());
    return -job.throughput[static_cast<size_t>(j)] / fastest * (jobs - m);
  });
  HZ_ASSIGN_OR_RETURN(const plan::Milp::Solution s, lp.lp().solve());
  return Allocation{lp.allocation(s), -s.objective};
}

}  // namespace hydrozoa::sched
