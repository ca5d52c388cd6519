// Multi-job scheduling policies (Gavel, seed 003 §5.4; docs/cluster.md):
// each decides an allocation X[job][type] from the jobs' throughputs on the
// worker types, as a linear program (or a sequence of them) solved exactly
// by COIN-OR CBC/CLP. Every allocation keeps Gavel's constraints: 0 ≤ X ≤ 1,
// Σ_type X[m] ≤ 1 (a job is in one place at a time), Σ_job X·scale_factor ≤
// the type's workers; X is 0 where a job has no throughput or needs more
// workers than the type has.
//
// Each policy is heterogeneity-aware; "<name>_agnostic" is the same policy
// deciding as if every type were as fast as any other (every throughput 1
// where the job runs), the baseline Gavel compares against.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "sched/problem.h"

namespace hydrozoa::sched {

class Policy {
 public:
  virtual ~Policy() = default;
  virtual Result<Allocation> allocate(const Problem& problem) const = 0;
};

struct PolicyInfo {
  std::string name, objective;
  // What it needs beyond throughputs: Problem::price, ::budget, ::entities.
  bool prices = false, budget = false, entities = false;
  // It takes a problem with Problem::pairs (space sharing): weighs them, or
  // for the agnostic forms drops them; the others refuse them.
  bool pairs = false;
};

// Every policy's name, what its objective value is and what it needs,
// aware then agnostic.
std::vector<PolicyInfo> policyList();
Result<std::unique_ptr<Policy>> makePolicy(const std::string& name);

// The allocation of equal time on every type, by their counts
// (X_equal of §5.4.1): count_j / Σ counts.
std::vector<double> equalShare(const Problem& problem);
// Steps/s on 1/n of the cluster (n jobs): the equal share, scaled by the
// workers 1/n of the cluster gives the job against those it needs (at most 1).
double isolatedThroughput(const Problem& problem, int job);

}  // namespace hydrozoa::sched
