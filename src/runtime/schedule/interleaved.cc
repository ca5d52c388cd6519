#include "runtime/schedule/interleaved.h"

#include <fmt/format.h>

#include <algorithm>

#include "plan/cost/interleaved.h"
#include "runtime/exec/tags.h"

namespace hydrozoa::runtime {

Status InterleavedSchedule::check(const PipelineShape& shape) const {
  if (shape.chunks < 2 || shape.chunks > kMaxChunks) {
    return invalidArgument(fmt::format("the interleaved schedule needs 2 to {} model chunks per stage, not {}: pass "
                                       "--chunks 2 (or more)",
                                       kMaxChunks, shape.chunks));
  }
  if (shape.roundRobin()) {
    return invalidArgument("the interleaved schedule needs every stage replicated alike; use --schedule 1f1b or "
                           "pipedream for stages with their own replicas");
  }
  if (shape.stages < 2) {
    return invalidArgument("the interleaved schedule needs at least 2 pipeline stages: pass --stages 2 (or more), "
                           "or use --schedule 1f1b");
  }
  if (shape.microbatches % shape.stages != 0) {
    return invalidArgument(fmt::format("the interleaved schedule needs the microbatches per step to be a multiple of "
                                       "the {} stages, not {}: pass --microbatches {} (or {})",
                                       shape.stages, shape.microbatches,
                                       (shape.microbatches / shape.stages + 1) * shape.stages,
                                       std::max(1, shape.microbatches / shape.stages) * shape.stages));
  }
  return Status();
}

std::vector<Action> InterleavedSchedule::computeOrder(const PipelineShape& shape) const {
  return fromPasses(plan::interleavedOrder(shape.stage, shape.stages, shape.chunks, shape.microbatches));
}

}  // namespace hydrozoa::runtime
