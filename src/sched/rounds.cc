#include "sched/rounds.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

namespace hydrozoa::sched {

void RoundMechanism::reset(size_t jobs, size_t types) {
  time_.assign(jobs, std::vector<double>(types, 0.0));
  credit_.assign(types, 0.0);
}

void RoundMechanism::record(int job, int type, Seconds seconds) {
  time_.at(static_cast<size_t>(job)).at(static_cast<size_t>(type)) += seconds;
}

std::vector<int> RoundMechanism::place(const Problem& p, const Allocation& a, const std::vector<int>& previous) {
  const size_t types = p.types.size();
  std::vector<double> typeTime(types, 0.0);
  for (const auto& row : time_) {
    for (size_t j = 0; j < types && j < row.size(); ++j) typeTime[j] += row[j];
  }
  struct Pair {
    double priority, share;
    int job, type;
    bool moves;  // not where the job ran the round before
  };
  std::vector<Pair> pairs;
  for (size_t m = 0; m < p.jobs.size(); ++m) {
    for (size_t j = 0; j < types; ++j) {
      const double x = a.x[m][j];
      if (!(x > 1e-9)) continue;
      const double t = m < time_.size() ? time_[m][j] : 0.0;
      const double f = typeTime[j] > 0 ? t / typeTime[j] : 0.0;
      const bool stays = m < previous.size() && previous[m] == static_cast<int>(j);
      pairs.push_back({f > 0 ? x / f : std::numeric_limits<double>::infinity(), x, static_cast<int>(m),
                       static_cast<int>(j), !stays});
    }
  }
  std::sort(pairs.begin(), pairs.end(), [](const Pair& l, const Pair& r) {
    return std::make_tuple(-l.priority, -l.share, l.moves, l.job, l.type) <
           std::make_tuple(-r.priority, -r.share, r.moves, r.job, r.type);
  });
  std::vector<int> placed(p.jobs.size(), -1);
  std::vector<int> free;
  std::vector<double> want(types, 0.0);
  for (size_t j = 0; j < types; ++j) {
    for (size_t m = 0; m < p.jobs.size(); ++m) want[j] += a.x[m][j] * p.jobs[m].scale_factor;
    const int cap = a.capped ? static_cast<int>(std::floor(credit_[j] + want[j] + 1e-9)) : p.types[j].count;
    free.push_back(std::clamp(cap, 0, p.types[j].count));
  }
  const std::vector<int> offered = free;
  for (const Pair& pair : pairs) {
    const int need = p.jobs[static_cast<size_t>(pair.job)].scale_factor;
    if (placed[static_cast<size_t>(pair.job)] >= 0 || free[static_cast<size_t>(pair.type)] < need) continue;
    placed[static_cast<size_t>(pair.job)] = pair.type;
    free[static_cast<size_t>(pair.type)] -= need;
  }
  if (a.capped) {
    for (size_t j = 0; j < types; ++j) {
      const double used = offered[j] - free[j];
      credit_[j] = std::clamp(credit_[j] + want[j] - used, -1.0 * p.types[j].count, 1.0 * p.types[j].count);
    }
  }
  return placed;
}

}  // namespace hydrozoa::sched
