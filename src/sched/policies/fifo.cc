// FIFO (Gavel §5.4.2): jobs in arrival order, each on the fastest types
// free: maximise Σ_m throughput(m, X) / T_m,fastest · (M − rank_m), rank_m
// the job's place in arrival order. Shortest job first is the same with
// jobs ranked by the time they have left on their fastest type (shortest
// first: the thesis's "minimise the time of the shortest job", kept linear).
// Objective: that sum.
#include <algorithm>
#include <numeric>

#include "sched/policies/policies.h"

namespace hydrozoa::sched {

Result<Allocation> Fifo::allocate(const Problem& p) const {
  HZ_RETURN_IF_ERROR(checkProblem(p));
  const double jobs = static_cast<double>(p.jobs.size());
  auto fastest = [&](size_t m) { return fastestThroughput(p.jobs[m]); };
  std::vector<size_t> order(p.jobs.size());
  std::iota(order.begin(), order.end(), 0);
  if (shortest_) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return p.jobs[a].steps_remaining / fastest(a) < p.jobs[b].steps_remaining / fastest(b);
    });
  }
  std::vector<double> rank(p.jobs.size());
  for (size_t r = 0; r < order.size(); ++r) rank[order[r]] = static_cast<double>(r);
  // X's coefficient: the job's throughput there against its fastest, by its rank.
  const auto value = [&](int m, double throughput) {
    const auto k = static_cast<size_t>(m);
    return -throughput / fastest(k) * (jobs - rank[k]);
  };
  AllocationLp lp(
      p, [&](int m, int j) { return value(m, p.jobs[static_cast<size_t>(m)].throughput[static_cast<size_t>(j)]); },
      [&](int c, int j) {  // both jobs' steps while they share
        const JobPair& pair = p.pairs[static_cast<size_t>(c)];
        return value(pair.a, pair.throughput_a[static_cast<size_t>(j)]) +
               value(pair.b, pair.throughput_b[static_cast<size_t>(j)]);
      });
  HZ_ASSIGN_OR_RETURN(const plan::Milp::Solution s, lp.lp().solve());
  return lp.result(s, -s.objective);
}

}  // namespace hydrozoa::sched
