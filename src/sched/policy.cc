#include "sched/policy.h"

#include <algorithm>

namespace hydrozoa::sched {

std::vector<double> equalShare(const Problem& p) {
  double total = 0;
  for (const WorkerType& t : p.types) total += t.count;
  std::vector<double> x;
  for (const WorkerType& t : p.types) x.push_back(t.count / total);
  return x;
}

double isolatedThroughput(const Problem& p, int job) {
  double total = 0;
  for (const WorkerType& t : p.types) total += t.count;
  const JobDemand& d = p.jobs[static_cast<size_t>(job)];
  const double share = std::min(1.0, total / static_cast<double>(p.jobs.size()) / d.scale_factor);
  return effectiveThroughput(d, equalShare(p)) * share;
}

}  // namespace hydrozoa::sched
