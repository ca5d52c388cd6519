#include "plan/strategies.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>

namespace hydrozoa::plan {
namespace {

int pinnedStages(const SearchOptions& o) { return o.partition ? o.partition->numStages() : o.stages.value_or(0); }

}  // namespace

std::vector<std::pair<int, int>> strategiesFor(const SearchOptions& o, int groups, int layers) {
  const int W = groups, pinnedB = pinnedStages(o);
  std::vector<std::pair<int, int>> strategies;
  for (int B = 1; B <= std::min(W, layers); ++B) {
    if (pinnedB && B != pinnedB) continue;
    int A = o.data_parallel.value_or(W / B);
    if (o.data_parallel) {
      if (std::int64_t{A} * B > W) continue;
    } else {
      if (!o.all_strategies && !pinnedB && W % B != 0) continue;
      if (o.global_batch) {
        while (A > 1 && *o.global_batch % A != 0) --A;  // replicas must split the batch evenly
      }
    }
    if (A >= 1) strategies.emplace_back(A, B);
  }
  return strategies;
}

Status noStrategyFits(const SearchOptions& o, int t) {
  const int pinnedB = pinnedStages(o);
  if (o.data_parallel && pinnedB) {
    const std::int64_t needed = std::int64_t{*o.data_parallel} * pinnedB * t;
    if (t > 1) {
      const int W = o.workers;
      const std::string fix = W % (t * pinnedB) == 0 ? fmt::format("--data-parallel {}", W / (t * pinnedB))
                              : W % (t * *o.data_parallel) == 0
                                  ? fmt::format("--stages {}", W / (t * *o.data_parallel))
                                  : fmt::format("--tensor-parallel 1 and --data-parallel × --stages = {}", W);
      return invalidArgument(fmt::format("--tensor-parallel {} × --stages {} × --data-parallel {} needs {} workers "
                                         "but --workers is {}: use {}",
                                         t, pinnedB, *o.data_parallel, needed, W, fix));
    }
    return invalidArgument(fmt::format("--data-parallel {} × --stages {} needs {} workers but --workers is {}",
                                       *o.data_parallel, pinnedB, needed, o.workers));
  }
  return invalidArgument(fmt::format("no strategy fits {} workers with these pins", o.workers));
}

}  // namespace hydrozoa::plan
