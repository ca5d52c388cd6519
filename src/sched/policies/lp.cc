#include "sched/policies/lp.h"

#include <fmt/format.h>

#include <algorithm>

namespace hydrozoa::sched {

namespace {

// The solver's rounding: a share below a billionth is none, and none above 1.
double share(const plan::Milp::Solution& s, int variable) {
  if (variable < 0) return 0;
  const double x = std::clamp(s.values[static_cast<size_t>(variable)], 0.0, 1.0);
  return x < 1e-9 ? 0 : x;
}

}  // namespace

AllocationLp::AllocationLp(const Problem& p, const std::function<double(int, int)>& cost,
                           const std::function<double(int, int)>& pairCost)
    : p_(p) {
  const int types = static_cast<int>(p.types.size());
  x_.assign(p.jobs.size(), std::vector<int>(static_cast<size_t>(types), -1));
  pair_.assign(p.pairs.size(), std::vector<int>(static_cast<size_t>(types), -1));
  const auto fits = [&](int scale, int j) { return scale <= p.types[static_cast<size_t>(j)].count; };
  std::vector<Terms> once(p.jobs.size());  // (5.2): each job's time, alone and in pairs
  for (size_t m = 0; m < p.jobs.size(); ++m) {
    const JobDemand& job = p.jobs[m];
    for (int j = 0; j < types; ++j) {
      if (!(job.throughput[static_cast<size_t>(j)] > 0) || !fits(job.scale_factor, j)) continue;
      x_[m][static_cast<size_t>(j)] =
          lp_.addVariable(0, 1, cost ? cost(static_cast<int>(m), j) : 0.0, /*integer=*/false);
      once[m].emplace_back(x_[m][static_cast<size_t>(j)], 1.0);
    }
  }
  for (size_t c = 0; c < p.pairs.size(); ++c) {
    const JobPair& pair = p.pairs[c];
    for (int j = 0; j < types; ++j) {
      const auto jj = static_cast<size_t>(j);
      if (!(pair.throughput_a[jj] > 0) || !(pair.throughput_b[jj] > 0) ||
          !fits(p.jobs[static_cast<size_t>(pair.a)].scale_factor, j)) {
        continue;
      }
      pair_[c][jj] = lp_.addVariable(0, 1, pairCost ? pairCost(static_cast<int>(c), j) : 0.0, /*integer=*/false);
      once[static_cast<size_t>(pair.a)].emplace_back(pair_[c][jj], 1.0);
      once[static_cast<size_t>(pair.b)].emplace_back(pair_[c][jj], 1.0);
    }
  }
  for (const Terms& t : once) {
    if (!t.empty()) lp_.addConstraint(t, plan::Milp::kAtMost, 1);
  }
  for (int j = 0; j < types; ++j) {  // (5.3)
    const auto jj = static_cast<size_t>(j);
    Terms workers;
    for (size_t m = 0; m < p.jobs.size(); ++m) {
      if (x_[m][jj] >= 0) workers.emplace_back(x_[m][jj], p.jobs[m].scale_factor);
    }
    for (size_t c = 0; c < p.pairs.size(); ++c) {
      if (pair_[c][jj] >= 0) workers.emplace_back(pair_[c][jj], p.jobs[static_cast<size_t>(p.pairs[c].a)].scale_factor);
    }
    if (!workers.empty()) lp_.addConstraint(workers, plan::Milp::kAtMost, p.types[jj].count);
  }
}

AllocationLp::Terms AllocationLp::throughput(int m, double factor) const {
  Terms t;
  const auto mm = static_cast<size_t>(m);
  for (size_t j = 0; j < p_.types.size(); ++j) {
    const int v = x_[mm][j];
    if (v >= 0) t.emplace_back(v, p_.jobs[mm].throughput[j] * factor);
  }
  for (size_t c = 0; c < p_.pairs.size(); ++c) {
    const JobPair& pair = p_.pairs[c];
    if (pair.a != m && pair.b != m) continue;
    for (size_t j = 0; j < p_.types.size(); ++j) {
      const int v = pair_[c][j];
      if (v >= 0) t.emplace_back(v, (pair.a == m ? pair.throughput_a[j] : pair.throughput_b[j]) * factor);
    }
  }
  return t;
}

AllocationLp::Terms AllocationLp::terms(const std::function<double(int, int)>& coefficient) const {
  Terms t;
  for (size_t m = 0; m < x_.size(); ++m) {
    for (size_t j = 0; j < x_[m].size(); ++j) {
      if (x_[m][j] >= 0) t.emplace_back(x_[m][j], coefficient(static_cast<int>(m), static_cast<int>(j)));
    }
  }
  return t;
}

std::vector<std::vector<double>> AllocationLp::allocation(const plan::Milp::Solution& s) const {
  std::vector<std::vector<double>> x(p_.jobs.size(), std::vector<double>(p_.types.size(), 0.0));
  for (size_t m = 0; m < x.size(); ++m) {
    for (size_t j = 0; j < p_.types.size(); ++j) x[m][j] = share(s, x_[m][j]);
  }
  return x;
}

Allocation AllocationLp::result(const plan::Milp::Solution& s, double objective, bool capped) const {
  Allocation a{allocation(s), objective, capped};
  if (p_.pairs.empty()) return a;
  a.pairs.assign(p_.pairs.size(), std::vector<double>(p_.types.size(), 0.0));
  for (size_t c = 0; c < p_.pairs.size(); ++c) {
    for (size_t j = 0; j < p_.types.size(); ++j) a.pairs[c][j] = share(s, pair_[c][j]);
  }
  return a;
}

Status noSpaceSharing(const Problem& p, const char* policy) {
  if (p.pairs.empty()) return Status();
  return invalidArgument(fmt::format("policy {} does not space-share; drop --space-sharing (max_min_fairness, "
                                     "finish_time_fairness, min_makespan, max_total_throughput, fifo and "
                                     "shortest_job_first do)",
                                     policy));
}

}  // namespace hydrozoa::sched
