// Hydrozoa's schedule (Hydrozoa §3.2, Figure 2; GPipe): all forward passes
// of the iteration's microbatches in order, then all backward passes in
// reverse order, so the last stage starts backward on the microbatch whose
// activations are freshest.
#pragma once

#include "runtime/schedule/schedule.h"

namespace hydrozoa::runtime {

class GPipeSchedule final : public Schedule {
 public:
  const char* name() const override { return "gpipe"; }
  std::vector<Action> actions(int stage, int stages, int microbatches) const override;
};

}  // namespace hydrozoa::runtime
