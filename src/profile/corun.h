// NOTE [Compute beside busy cores] (plan/cost/pipeline.cc): how much a
// model's pass slows down while copies of it compute on the host's other
// cores, for Profile::corun (the profiler's part of it, measure.cc).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "model/model.h"
#include "profile/profile.h"

namespace hydrozoa::profile {

// `m`'s whole pass at `microbatch` (input, labels) timed on the calling
// (pinned) thread alone and while a copy of the model (from `build`)
// computes on every other of `cpus`; nullopt where that cannot be measured
// (see corun.cc). `modelBytes`: the model's parameters; `memory`: the host's.
std::optional<CorunProfile> measureCorun(const std::function<Result<model::Model>()>& build, model::Model& m,
                                         Bytes modelBytes, Bytes memory, const std::vector<int>& cpus,
                                         std::int64_t microbatch, const torch::Tensor& input,
                                         const torch::Tensor& labels, double seconds);

}  // namespace hydrozoa::profile
