#include "sched/policies/lp.h"

#include <algorithm>

namespace hydrozoa::sched {

AllocationLp::AllocationLp(const Problem& p, const std::function<double(int, int)>& cost) : p_(p) {
  const int types = static_cast<int>(p.types.size());
  x_.assign(p.jobs.size(), std::vector<int>(static_cast<size_t>(types), -1));
  for (size_t m = 0; m < p.jobs.size(); ++m) {
    const JobDemand& job = p.jobs[m];
    Terms once;
    for (int j = 0; j < types; ++j) {
      if (!(job.throughput[static_cast<size_t>(j)] > 0) || job.scale_factor > p.types[static_cast<size_t>(j)].count) {
        continue;
      }
      x_[m][static_cast<size_t>(j)] =
          lp_.addVariable(0, 1, cost ? cost(static_cast<int>(m), j) : 0.0, /*integer=*/false);
      once.emplace_back(x_[m][static_cast<size_t>(j)], 1.0);
    }
    if (!once.empty()) lp_.addConstraint(once, plan::Milp::kAtMost, 1);  // (5.2)
  }
  for (int j = 0; j < types; ++j) {  // (5.3)
    Terms workers;
    for (size_t m = 0; m < p.jobs.size(); ++m) {
      if (x_[m][static_cast<size_t>(j)] >= 0) workers.emplace_back(x_[m][static_cast<size_t>(j)], p.jobs[m].scale_factor);
    }
    if (!workers.empty()) lp_.addConstraint(workers, plan::Milp::kAtMost, p.types[static_cast<size_t>(j)].count);
  }
}

AllocationLp::Terms AllocationLp::throughput(int m, double factor) const {
  Terms t;
  for (size_t j = 0; j < p_.types.size(); ++j) {
    const int v = x_[static_cast<size_t>(m)][j];
    if (v >= 0) t.emplace_back(v, p_.jobs[static_cast<size_t>(m)].throughput[j] * factor);
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
    for (size_t j = 0; j < p_.types.size(); ++j) {
      // The solver's rounding: a share below a millionth is none, and none above 1.
      if (x_[m][j] >= 0) x[m][j] = std::clamp(s.values[static_cast<size_t>(x_[m][j])], 0.0, 1.0);
      if (x[m][j] < 1e-9) x[m][j] = 0;
    }
  }
  return x;
}

}  // namespace hydrozoa::sched
