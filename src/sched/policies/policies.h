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
  Result<Allocation> allocate(const Problem& problem) const override;
};

}  // namespace hydrozoa::sched
