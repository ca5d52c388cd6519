// Finish-time fairness (Themis; Gavel §5.4.2): minimise max_m ρ_m with
//   ρ_m = (t_m + steps_m / throughput(m, X)) / (t_m^iso + steps_m / throughput(m, X_iso)),
// X_iso 1/n of the cluster (isolatedThroughput). ρ is not linear in X, but
// for a given ρ the condition ρ_m ≤ ρ is: throughput(m, X) ≥ steps_m /
// (ρ·D_m − t_m), with D_m the denominator, linear; the least feasible ρ is
// found by bisection over those feasibility LPs, to a relative 1e-6.
// Objective: that ρ (1: as fast as on 1/n of the cluster; below: faster).
#include <cmath>

#include "sched/policies/policies.h"

namespace hydrozoa::sched {

namespace {

// An allocation with every ρ_m ≤ rho, or nothing.
Result<std::optional<Allocation>> within(const Problem& p, const std::vector<double>& denominators, double rho) {
  AllocationLp lp(p);
  for (size_t m = 0; m < p.jobs.size(); ++m) {
    const JobDemand& job = p.jobs[m];
    if (!(job.steps_remaining > 0)) continue;
    const double left = rho * denominators[m] - job.elapsed;  // seconds it may still take
    if (!(left > 0)) return std::optional<Allocation>();
    // throughput(m, X) ≥ needed, divided by it (rows of like scale: steps
    // and rates span orders of magnitude); past the job's fastest type, no.
    const double needed = job.steps_remaining / left;
    if (needed > fastestThroughput(job)) return std::optional<Allocation>();
    lp.lp().addConstraint(lp.throughput(static_cast<int>(m), 1.0 / needed), plan::Milp::kAtLeast, 1);
  }
  auto s = lp.lp().solve();
  if (!s.ok()) {
    if (s.status().code() == ErrorCode::kInfeasible) return std::optional<Allocation>();
    return s.status();
  }
  return std::optional<Allocation>(lp.result(*s, rho));
}

}  // namespace

Result<Allocation> FinishTimeFairness::allocate(const Problem& p) const {
  HZ_RETURN_IF_ERROR(checkProblem(p));
  std::vector<double> denominators;
  for (size_t m = 0; m < p.jobs.size(); ++m) {
    const JobDemand& job = p.jobs[m];
    denominators.push_back(job.isolated_elapsed + job.steps_remaining / isolatedThroughput(p, static_cast<int>(m)));
  }
  double hi = 1;
  std::optional<Allocation> best;
  for (int tries = 0; tries < 80; ++tries, hi *= 2) {
    HZ_ASSIGN_OR_RETURN(best, within(p, denominators, hi));
    if (best) break;
  }
  if (!best) return infeasible("no allocation finishes every job (finish-time fairness found no bound)");
  double lo = 0;
  while (hi - lo > 1e-6 * hi) {
    const double mid = (lo + hi) / 2;
    HZ_ASSIGN_OR_RETURN(std::optional<Allocation> a, within(p, denominators, mid));
    if (a) {
      hi = mid;
      best = std::move(a);
    } else {
      lo = mid;
    }
  }
  return *best;
}

}  // namespace hydrozoa::sched
