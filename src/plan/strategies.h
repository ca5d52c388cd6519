// The strategies the search tries (plan/search.h): Algorithm 1's (A, B) over
// the tensor groups of one tensor-parallel degree t, and the error when the
// pins leave none. Pure C++.
#pragma once

#include <utility>
#include <vector>

#include "core/status.h"
#include "plan/search.h"

namespace hydrozoa::plan {

// Algorithm 1 loops B = 1..W with A = ⌊W/B⌋ over W `groups` (workers / t),
// B up to the model's `layers`; by default only the strategies that use
// every group (A·B = W), unless pins (o.data_parallel, o.stages or
// o.partition's stages) or o.all_strategies say otherwise. Without a pinned
// A, A shrinks until it divides o.global_batch.
std::vector<std::pair<int, int>> strategiesFor(const SearchOptions& o, int groups, int layers);

// The error when strategiesFor left nothing at degree t: the pinned A × B
// (× t) against --workers, with the pin that would fit, or a general line.
Status noStrategyFits(const SearchOptions& o, int t);

}  // namespace hydrozoa::plan
