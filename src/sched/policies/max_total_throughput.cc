// Maximise total throughput (Gavel §5.3.1's example policy): maximise
//   Σ_m throughput(m, X) / T_m,fastest,
// each job's steps/s against its own best type's, so that jobs whose steps
// differ in length count alike. Objective: that sum (a job that runs on its
// fastest type all the time adds 1).
#include "sched/policies/policies.h"

namespace hydrozoa::sched {

Result<Allocation> MaxTotalThroughput::allocate(const Problem& p) const {
  HZ_RETURN_IF_ERROR(checkProblem(p));
  AllocationLp lp(p, [&](int m, int j) {
    const JobDemand& job = p.jobs[static_cast<size_t>(m)];
    return -job.throughput[static_cast<size_t>(j)] / fastestThroughput(job);
  });
  HZ_ASSIGN_OR_RETURN(const plan::Milp::Solution s, lp.lp().solve());
  return Allocation{lp.allocation(s), -s.objective};
}

}  // namespace hydrozoa::sched
