// The policies of sched/policy.h, one file each (sched/policies/*.cc).
#pragma once

#include <optional>

#include "sched/policies/lp.h"
#include "sched/policy.h"

namespace hydrozoa::sched {

class MaxMinFairness : public Policy {
 public:
  Result<Allocation> allocate(const Problem& problem) const override;
};
class MaxTotalThroughput : public Policy {
 public:
  Result<Allocation> allocate(const Problem& problem) const override;
};
class MinMakespan : public Policy {
 public:
  Result<Allocation> allocate(const Problem& problem) const override;
};
class FinishTimeFairness : public Policy {
 public:
  Result<Allocation> allocate(const Problem& problem) const override;
};
class Fifo : public Policy {
 public:
  explicit Fifo(bool shortestFirst = false) : shortest_(shortestFirst) {}
  Result<Allocation> allocate(const Problem& problem) const override;

 private:
  bool shortest_;
};
class MinCost : public Policy {
 public:
  explicit MinCost(bool slo) : slo_(slo) {}
  Result<Allocation> allocate(const Problem& problem) const override;

 private:
  bool slo_;
};
class WaterFilling : public Policy {
 public:
  // How each iteration finds the jobs that cannot get faster: Gavel's MILP
  // (one program, a binary per job), or a linear program per job (the
  // reference the MILP is tested against; exact, and slower when many jobs
  // are stuck).
  enum class Bottlenecks { kMilp, kLinearPrograms };
  explicit WaterFilling(bool hierarchical, Bottlenecks how = Bottlenecks::kMilp)
      : hierarchical_(hierarchical), how_(how) {}
  Result<Allocation> allocate(const Problem& problem) const override;

 private:
  bool hierarchical_;
  Bottlenecks how_;
};
class MinMakespanBudget : public Policy {
 public:
  Result<Allocation> allocate(const Problem& problem) const override;
};

// An error naming `policy` unless the problem has a price per type.
Status needPrices(const Problem& problem, const char* policy);
// The makespan rows (min_makespan.cc): u = 1/makespan, maximised, with
// throughput(m, X) / steps_m ≥ u for every job with steps left; -1 when none has.
int addMakespanRows(AllocationLp& lp, const Problem& problem);
// Every X 0: no job has steps left.
Allocation nothingToDo(const Problem& problem);

}  // namespace hydrozoa::sched
