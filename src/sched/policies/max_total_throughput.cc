// Maximise total throughput (Gavel §5.3.1's example policy): maximise
//   Σ_m throughput(m, X) / T_m,fastest,
// each job's steps/s against its own best type's, so that jobs whose steps
// differ in length count alike. Objective: that sum (a job that runs on its
// fastest type all the time adds 1).
#include "sched/policies/policies.h"

namespace hydrozoa::sched {

Result<Allocation> MaxTotalThroughput::allocate(const Problem& p) const {
  HZ_RETURN_IF_ERROR(checkProblem(p));
  const auto fastest = [&](int m) { return fastestThroughput(p.jobs[static_cast<size_t>(m)]); };
  AllocationLp lp(
      p, [&](int m, int j) { return -p.jobs[static_cast<size_t>(m)].throughput[static_cast<size_t>(j)] / fastest(m); },
      [&](int c, int j) {  // both jobs' steps while they share
        const JobPair& pair = p.pairs[static_cast<size_t>(c)];
        const auto jj = static_cast<size_t>(j);
        return -pair.throughput_a[jj] / fastest(pair.a) - pair.throughput_b[jj] / fastest(pair.b);
      });
  HZ_ASSIGN_OR_RETURN(const plan::Milp::Solution s, lp.lp().solve());
  return lp.result(s, -s.objective);
}

}  // namespace hydrozoa::sched
