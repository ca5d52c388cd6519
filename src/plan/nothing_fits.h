// Why no strategy is feasible, as one error that names the fix: the least
// memory per worker any plan needs, the pins that stand in the way, the
// workers it would take (searchPlan's last word when nothing fits).
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "core/status.h"
#include "plan/search.h"

namespace hydrozoa::plan {

Status nothingFits(const profile::Profile& profile, const SearchOptions& o, const std::optional<Bytes>& limit,
                   const std::vector<Candidate>& rows, const std::vector<std::pair<int, int>>& strategies);

}  // namespace hydrozoa::plan
