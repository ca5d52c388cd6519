#include "sched/rounds.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

namespace hydrozoa::sched {

void RoundMechanism::reset(size_t jobs, size_t types, size_t pairs) {
  time_.assign(jobs + pairs, std::vector<double>(types, 0.0));
  jobs_ = jobs;
  credit_.assign(types, 0.0);
}

void RoundMechanism::record(int job, int type, Seconds seconds) {
  time_.at(static_cast<size_t>(job)).at(static_cast<size_t>(type)) += seconds;
}

void RoundMechanism::recordPair(int pair, int type, Seconds seconds) {
  time_.at(jobs_ + static_cast<size_t>(pair)).at(static_cast<size_t>(type)) += seconds;
}

std::vector<int> RoundMechanism::place(const Problem& p, const Allocation& a, const std::vector<int>& previous) {
  const size_t types = p.types.size();
  std::vector<double> typeTime(types, 0.0);
  for (const auto& row : time_) {
    for (size_t j = 0; j < types && j < row.size(); ++j) typeTime[j] += row[j];
  }
  // Candidates: (job or pair, type); index k < jobs is job k, else pair k − jobs.
  const size_t jobs = p.jobs.size();
  const size_t pairs = std::min(a.pairs.size(), p.pairs.size());
  struct Candidate {
    double priority, share;
    int k, type;
    bool moves;  // not where its jobs ran the round before
  };
  const auto member = [&](size_t k, int which) {
    return k < jobs ? static_cast<int>(k) : which == 0 ? p.pairs[k - jobs].a : p.pairs[k - jobs].b;
  };
  const auto ranBefore = [&](int m, size_t j) {
    return static_cast<size_t>(m) < previous.size() && previous[static_cast<size_t>(m)] == static_cast<int>(j);
  };
  std::vector<Candidate> candidates;
  for (size_t k = 0; k < jobs + pairs; ++k) {
    for (size_t j = 0; j < types; ++j) {
      const double x = k < jobs ? a.x[k][j] : a.pairs[k - jobs][j];
      if (!(x > 1e-9)) continue;
      const double t = k < time_.size() ? time_[k][j] : 0.0;
      const double f = typeTime[j] > 0 ? t / typeTime[j] : 0.0;
      const bool stays = ranBefore(member(k, 0), j) && ranBefore(member(k, 1), j);
      candidates.push_back({f > 0 ? x / f : std::numeric_limits<double>::infinity(), x, static_cast<int>(k),
                            static_cast<int>(j), !stays});
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& l, const Candidate& r) {
    return std::make_tuple(-l.priority, -l.share, l.moves, l.k, l.type) <
           std::make_tuple(-r.priority, -r.share, r.moves, r.k, r.type);
  });
  std::vector<int> placed(jobs, -1);
  pairOf_.assign(jobs, -1);
  std::vector<int> free;
  std::vector<double> want(types, 0.0);
  for (size_t j = 0; j < types; ++j) {
    for (size_t m = 0; m < jobs; ++m) want[j] += a.x[m][j] * p.jobs[m].scale_factor;
    for (size_t c = 0; c < pairs; ++c) want[j] += a.pairs[c][j] * p.jobs[static_cast<size_t>(p.pairs[c].a)].scale_factor;
    const int cap = a.capped ? static_cast<int>(std::floor(credit_[j] + want[j] + 1e-9)) : p.types[j].count;
    free.push_back(std::clamp(cap, 0, p.types[j].count));
  }
  const std::vector<int> offered = free;
  for (const Candidate& c : candidates) {
    const auto k = static_cast<size_t>(c.k);
    const auto first = static_cast<size_t>(member(k, 0)), second = static_cast<size_t>(member(k, 1));
    const int need = p.jobs[first].scale_factor;
    if (placed[first] >= 0 || placed[second] >= 0 || free[static_cast<size_t>(c.type)] < need) continue;
    placed[first] = placed[second] = c.type;
    if (k >= jobs) pairOf_[first] = pairOf_[second] = static_cast<int>(k - jobs);
    free[static_cast<size_t>(c.type)] -= need;
  }
  if (fillIdle_ && !a.capped) {
    for (size_t j = 0; j < types; ++j) {
      for (size_t m = 0; m < jobs && free[j] > 0; ++m) {
        if (placed[m] >= 0 || !(p.jobs[m].throughput[j] > 0) || free[j] < p.jobs[m].scale_factor) continue;
        placed[m] = static_cast<int>(j);
        free[j] -= p.jobs[m].scale_factor;
      }
    }
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
