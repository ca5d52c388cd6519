// Minimise cost (Gavel ch. 6 §6.4.2): maximise each job's throughput per
// dollar, Σ_m Σ_j X[m][j] · e[m][j], with e[m][j] = (T[m][j] / (price_j ·
// scale_m)) / max_j' of the same — the time given to a job weighted by how
// cost-efficient its type is for it (1 on its most efficient type).
// min_cost_slo adds each job's SLO (§6.4.3): throughput(m, X) ≥ its steps
// left / the seconds to its deadline. Objective: that sum.
#include <fmt/format.h>

#include <algorithm>

#include "sched/policies/policies.h"

namespace hydrozoa::sched {

Status needPrices(const Problem& p, const char* policy) {
  if (p.price.size() != p.types.size()) {
    return invalidArgument(fmt::format("policy {} needs a price per worker type (--prices v100=3.06,k80=0.9)", policy));
  }
  return Status();
}

Result<Allocation> MinCost::allocate(const Problem& p) const {
  HZ_RETURN_IF_ERROR(checkProblem(p));
  HZ_RETURN_IF_ERROR(needPrices(p, slo_ ? "min_cost_slo" : "min_cost"));
  HZ_RETURN_IF_ERROR(noSpaceSharing(p, slo_ ? "min_cost_slo" : "min_cost"));
  std::vector<double> best(p.jobs.size(), 0);
  for (size_t m = 0; m < p.jobs.size(); ++m) {
    for (size_t j = 0; j < p.types.size(); ++j) {
      best[m] = std::max(best[m], p.jobs[m].throughput[j] / (p.price[j] * p.jobs[m].scale_factor));
    }
  }
  AllocationLp lp(p, [&](int m, int j) {
    const JobDemand& job = p.jobs[static_cast<size_t>(m)];
    return -job.throughput[static_cast<size_t>(j)] / (p.price[static_cast<size_t>(j)] * job.scale_factor) /
           best[static_cast<size_t>(m)];
  });
  if (slo_) {
    for (size_t m = 0; m < p.jobs.size(); ++m) {
      const JobDemand& job = p.jobs[m];
      if (job.slo_left < 0 || !(job.steps_remaining > 0)) continue;
      const double fastest = fastestThroughput(job);
      const double needed = job.slo_left > 0 ? job.steps_remaining / job.slo_left : 1e300;
      if (needed > fastest) {
        return infeasible(fmt::format("job {} ({}) cannot meet its SLO: {:.0f} steps left in {:.0f} s need {:.3g} "
                                      "steps/s, and it runs at most {:.3g} steps/s",
                                      m, job.type, job.steps_remaining, job.slo_left, needed, fastest));
      }
      lp.lp().addConstraint(lp.throughput(static_cast<int>(m), 1.0 / needed), plan::Milp::kAtLeast, 1);
    }
  }
  auto s = lp.lp().solve();
  if (!s.ok() && s.status().code() == ErrorCode::kInfeasible) {
    return infeasible("the jobs' SLOs cannot all be met together on this cluster (each alone can): give it more "
                      "workers or the jobs later deadlines");
  }
  HZ_RETURN_IF_ERROR(s.status());
  return Allocation{lp.allocation(*s), -s->objective};
}

}  // namespace hydrozoa::sched
