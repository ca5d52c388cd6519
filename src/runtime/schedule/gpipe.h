// GPipe (Huang et al. 2019) and Hydrozoa's schedule (Hydrozoa §3.2, Figure
// 2): all forward passes of the step's microbatches in order, then all
// backward passes in reverse order, so the last stage starts backward on the
// microbatch whose activations are freshest; then the flush. A stage holds
// the activations of all M microbatches at its peak.
#pragma once

#include "runtime/schedule/schedule.h"

namespace hydrozoa::runtime {

class GPipeSchedule final : public Schedule {
 public:
  const char* name() const override { return "gpipe"; }
  std::vector<Action> computeOrder(const PipelineShape& shape) const override;
  // GPipe holds every microbatch's activations anyway: its receives are all
  // posted at the step's start, 5% faster on the CNN 1×2 than two ahead
  // (docs/schedules.md, "How it works").
  int receiveWindow() const override { return 0; }
};

}  // namespace hydrozoa::runtime
