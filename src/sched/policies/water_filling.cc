// Water filling (Gavel §5.4.3) for weighted max-min fairness, single-level
// (max_min_fairness_water_filling: every job its own entity) or
// hierarchical (entities by weight, fairness or FIFO inside each). Each
// iteration solves
//   maximise min over jobs with weight > 0 of (nt(m, X) − t_m) / w_m,
// nt the normalised throughput of max_min_fairness (throughput against
// equal time on every type, times the scale factor), t_m the job's level
// (its weight times each earlier iteration's optimum, summed), every job
// kept at least at its level; then finds the jobs that cannot get faster
// without another falling below its level (NOTE [Bottlenecks]) and sets
// them aside. Their weight goes to the entity's other jobs: split by job
// weight under fairness, all to the earliest under FIFO. Iterations end
// when every job is set aside. Objective: the least normalised throughput.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <numeric>

#include "sched/policies/policies.h"

namespace hydrozoa::sched {

namespace {

// The weight each job has in this iteration (0: set aside, or waiting in a FIFO entity).
std::vector<double> iterationWeights(const Problem& p, const std::vector<bool>& done) {
  std::vector<double> w(p.jobs.size(), 0.0);
  if (p.entities.empty()) {  // single level
    for (size_t m = 0; m < p.jobs.size(); ++m) w[m] = done[m] ? 0 : p.jobs[m].weight;
    return w;
  }
  for (size_t e = 0; e < p.entities.size(); ++e) {
    std::vector<size_t> open;
    double sum = 0;
    for (size_t m = 0; m < p.jobs.size(); ++m) {
      if (p.jobs[m].entity == static_cast<int>(e) && !done[m]) {
        open.push_back(m);
        sum += p.jobs[m].weight;
      }
    }
    if (open.empty()) continue;
    if (p.entities[e].fifo) {
      w[open.front()] = p.entities[e].weight;  // jobs are in arrival order
    } else {
      for (size_t m : open) w[m] = p.entities[e].weight * p.jobs[m].weight / sum;
    }
  }
  return w;
}

// NOTE [Bottlenecks]
// After an iteration's LP, a job is a bottleneck when it cannot get faster
// without another job falling below its level. Gavel (§5.4.3) finds them
// all with one MILP: a binary z_m per open job, z_m = 1 only if job m is
// faster than its level with every job kept at its level, Σ z_m maximised;
// the jobs with z_m = 0 are stuck. "Faster" needs a margin above the
// solver's rounding: z_m = 1 asks nt(m, X) ≥ level·(1 + ε) (from nothing:
// ε of an equal share). The jobs that can each get faster alone can all get
// faster at once (the average of their k allocations raises each by at
// least 1/k of its own rise: allocations form a convex set), so the MILP
// sets aside only jobs that cannot rise by kε of their level: a loss of
// less than that. The reference (Bottlenecks::kLinearPrograms) asks each
// job's most with an LP of its own; a test compares the two.
//
// ε: a relative margin above the solver's rounding, which lets every job
// sit 1e-7 below its level and so lends any one job up to k·1e-7.
constexpr double kMargin = 1e-5;

Result<std::vector<bool>> bottlenecksByMilp(const Problem& q, const std::vector<double>& norm,
                                            const std::vector<double>& level, const std::vector<bool>& done,
                                            const std::function<void(AllocationLp&, size_t)>& keepLevels) {
  const size_t jobs = q.jobs.size();
  AllocationLp milp(q);
  keepLevels(milp, jobs);
  std::vector<int> z(jobs, -1);
  for (size_t m = 0; m < jobs; ++m) {
    if (done[m]) continue;
    z[m] = milp.lp().addVariable(0, 1, -1.0, /*integer=*/true);  // minimised: −Σ z
    const double scale = level[m] > 0 ? 1 / level[m] : 1.0;      // rows of like magnitude
    auto terms = milp.throughput(static_cast<int>(m), norm[m] * scale);
    terms.emplace_back(z[m], -kMargin);
    milp.lp().addConstraint(terms, plan::Milp::kAtLeast, level[m] > 0 ? 1 - 1e-7 : 0.0);  // as keepLevels
  }
  HZ_ASSIGN_OR_RETURN(const plan::Milp::Solution s, milp.lp().solve());
  std::vector<bool> stuck(jobs, false);
  for (size_t m = 0; m < jobs; ++m) stuck[m] = z[m] >= 0 && s.values[static_cast<size_t>(z[m])] < 0.5;
  return stuck;
}

}  // namespace

Result<Allocation> WaterFilling::allocate(const Problem& p) const {
  HZ_RETURN_IF_ERROR(checkProblem(p));
  HZ_RETURN_IF_ERROR(noSpaceSharing(p, hierarchical_ ? "hierarchical" : "max_min_fairness_water_filling"));
  if (hierarchical_) {
    if (p.entities.empty()) {
      return invalidArgument("policy hierarchical needs entities (--entities product=2:fairness:0-9,research=1:fifo:10-19)");
    }
    for (size_t m = 0; m < p.jobs.size(); ++m) {
      if (p.jobs[m].entity < 0 || p.jobs[m].entity >= static_cast<int>(p.entities.size())) {
        return invalidArgument(fmt::format("job {} ({}) belongs to no entity; give every job one in --entities", m,
                                           p.jobs[m].type));
      }
    }
  }
  Problem q = p;
  if (!hierarchical_) q.entities.clear();
  const size_t jobs = q.jobs.size();
  const std::vector<double> equal = equalShare(q);
  std::vector<double> norm(jobs);  // nt(m, X) = throughput(m, X) · norm[m]
  for (size_t m = 0; m < jobs; ++m) norm[m] = q.jobs[m].scale_factor / effectiveThroughput(q.jobs[m], equal);
  std::vector<double> level(jobs, 0.0);
  std::vector<bool> done(jobs, false);
  std::vector<std::vector<double>> x(jobs, std::vector<double>(q.types.size(), 0.0));
  // Each job kept at least at its level: throughput(m, X) · norm ≥ level (scaled rows).
  auto keepLevels = [&](AllocationLp& lp, size_t except) {
    for (size_t m = 0; m < jobs; ++m) {
      if (m == except || level[m] <= 0) continue;
      lp.lp().addConstraint(lp.throughput(static_cast<int>(m), norm[m] / level[m]), plan::Milp::kAtLeast,
                            1 - 1e-7);  // the solver's rounding
    }
  };
  for (size_t iteration = 0; iteration <= jobs && std::count(done.begin(), done.end(), false) > 0; ++iteration) {
    const std::vector<double> w = iterationWeights(q, done);
    if (std::none_of(w.begin(), w.end(), [](double v) { return v > 0; })) break;
    AllocationLp lp(q);
    const int t = lp.lp().addVariable(0, 1e30, -1.0, false);
    keepLevels(lp, jobs);
    for (size_t m = 0; m < jobs; ++m) {
      if (!(w[m] > 0)) continue;
      // (nt − level) / w ≥ t
      auto terms = lp.throughput(static_cast<int>(m), norm[m] / w[m]);
      terms.emplace_back(t, -1.0);
      lp.lp().addConstraint(terms, plan::Milp::kAtLeast, level[m] / w[m]);
    }
    HZ_ASSIGN_OR_RETURN(const plan::Milp::Solution s, lp.lp().solve());
    x = lp.allocation(s);
    // Every job rises by its weight times the iteration's level, and no
    // more: an optimum that happens to give some job more (the LP has many)
    // would otherwise hold that surplus from the jobs of later iterations.
    const double rise = s.values[static_cast<size_t>(t)];
    for (size_t m = 0; m < jobs; ++m) level[m] += w[m] * rise;
    if (how_ == Bottlenecks::kMilp) {
      HZ_ASSIGN_OR_RETURN(const std::vector<bool> stuck, bottlenecksByMilp(q, norm, level, done, keepLevels));
      for (size_t m = 0; m < jobs; ++m) done[m] = done[m] || stuck[m];
      continue;
    }
    // Faster than its level by the margin the MILP asks.
    auto rises = [&](size_t m, double nt) { return nt > (level[m] > 0 ? level[m] * (1 + kMargin) : kMargin); };
    // The reference: one LP first, every open job pulling up at once: those
    // it speeds up are not bottlenecks; each of the rest is tried alone (the
    // most nt(m, X) with every other job kept at its level).
    AllocationLp all(q, [&](int k, int j) {
      const size_t m = static_cast<size_t>(k);
      return done[m] ? 0.0 : -q.jobs[m].throughput[static_cast<size_t>(j)] * norm[m] / std::max(level[m], 1e-9);
    });
    keepLevels(all, jobs);
    HZ_ASSIGN_OR_RETURN(const plan::Milp::Solution up, all.lp().solve());
    const std::vector<std::vector<double>> raised = all.allocation(up);
    for (size_t m = 0; m < jobs; ++m) {
      if (done[m] || rises(m, effectiveThroughput(q.jobs[m], raised[m]) * norm[m])) continue;
      AllocationLp most(q, [&](int k, int j) {
        return k == static_cast<int>(m) ? -q.jobs[m].throughput[static_cast<size_t>(j)] * norm[m] : 0.0;
      });
      keepLevels(most, m);
      HZ_ASSIGN_OR_RETURN(const plan::Milp::Solution b, most.lp().solve());
      if (!rises(m, -b.objective)) done[m] = true;
    }
  }
  double least = 1e300;
  for (size_t m = 0; m < jobs; ++m) least = std::min(least, effectiveThroughput(q.jobs[m], x[m]) * norm[m]);
  return Allocation{x, least};
}

}  // namespace hydrozoa::sched
