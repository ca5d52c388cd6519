// Gavel's round-based mechanism (seed 003 §5.5, Algorithm 2): it makes a
// policy's allocation X real over time. t[m][j] is the time job m has run
// on type j since X was last decided; f[m][j] = t[m][j] / Σ_m' t[m'][j] is
// its share of that type's time, and priority X[m][j] / f[m][j] (infinite
// for a share not yet received). Each round, (job, type) pairs are taken in
// decreasing priority (ties: the larger X, then where the job ran the round
// before, so that it keeps its workers, then the earlier job); a pair is
// placed when the job is not placed yet and the type has as many free
// workers as the job needs. A job that did not run gains priority, one that
// ran loses it, so over rounds each job's time tends to X. With space
// sharing, a pair of jobs is one more candidate with its own X and times,
// placed when neither of its jobs is placed yet (Gavel's Algorithm 2).
#pragma once

#include <vector>

#include "core/units.h"
#include "sched/problem.h"

namespace hydrozoa::sched {

class RoundMechanism {
 public:
  // A new allocation for these jobs (and pairs) and types: the times start again.
  void reset(size_t jobs, size_t types, size_t pairs = 0);
  // Each job's type for the next round (-1: it waits). A capped allocation
  // gets, per type, the workers Σ_m X·scale asks for, the fractions carried
  // from round to round.
  // `previous`: each job's type in the round before (-1: none), or empty.
  std::vector<int> place(const Problem& problem, const Allocation& allocation, const std::vector<int>& previous = {});
  // Job `job` ran `seconds` on `type`.
  void record(int job, int type, Seconds seconds);
  // Pair `pair` (of Problem::pairs) shared `type` for `seconds`.
  void recordPair(int pair, int type, Seconds seconds);
  // Each job's pair in the last place() (an index of Problem::pairs; -1: alone or not placed).
  const std::vector<int>& pairOf() const { return pairOf_; }
  // Work conservation (as Gavel's own implementation): after the
  // allocation's placements, workers still free take the jobs still
  // waiting that run there, type by type in the problem's order, the
  // earlier job first, also where the allocation gives them no time. Not
  // for a capped allocation (a budget).
  void fillIdle(bool on) { fillIdle_ = on; }

 private:
  std::vector<std::vector<double>> time_;  // t[m][j]; the pairs' after the jobs'
  size_t jobs_ = 0;
  std::vector<int> pairOf_;
  std::vector<double> credit_;             // capped: workers of each type owed from earlier rounds
  bool fillIdle_ = false;
};

}  // namespace hydrozoa::sched
