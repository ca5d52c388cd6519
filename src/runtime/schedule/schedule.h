// Pipeline schedules (GPipe, Huang et al. 2019; docs/train.md): the order in which a stage runs the
// forward and backward passes of an iteration's microbatches. The worker
// interprets the actions (where inputs come from, where outputs go), so a
// schedule is only an order; GPipe first, 1F1B and others later, without
// touching the transport.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace hydrozoa::runtime {

enum class ActionKind { kForward, kBackward };

struct Action {
  ActionKind kind;
  int microbatch;
  bool operator==(const Action& o) const { return kind == o.kind && microbatch == o.microbatch; }
};

class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual const char* name() const = 0;
  // The actions of `stage` (0-based, of `stages`) for one iteration of
  // `microbatches` microbatches. Every microbatch appears once forward and
  // once backward, its forward first.
  virtual std::vector<Action> actions(int stage, int stages, int microbatches) const = 0;
};

// "gpipe" (the default).
Result<std::unique_ptr<Schedule>> makeSchedule(const std::string& name);

// Index of the last backward action (its microbatch's gradients finish the
// step's gradients, so the allreduce buckets start during it); −1 if none.
int lastBackward(const std::vector<Action>& actions);

}  // namespace hydrozoa::runtime
