#include "plan/nothing_fits.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "plan/cost/memory.h"
#include "plan/cost/schedules.h"

namespace hydrozoa::plan {
namespace {

// Fewest stages that fit layers in `limit` (greedy packing is optimal
// because memory only grows with a stage); numLayers+1 when a layer alone
// does not fit.
int fewestStages(const MemoryCosts& mem, std::int64_t M, Bytes limit) {
  const int L = mem.numLayers();
  int stages = 0, first = 0;
  while (first < L) {
    if (stageMemory(mem, first, first, M) > limit) return L + 1;
    int last = first;
    while (last + 1 < L && stageMemory(mem, first, last + 1, M) <= limit) ++last;
    ++stages;
    first = last + 1;
  }
  return stages;
}

// The least per-worker memory with which `stages` stages fit.
Bytes leastMemory(const MemoryCosts& mem, std::int64_t M, int stages) {
  Bytes lo = 0, hi = stageMemory(mem, 0, mem.numLayers() - 1, M);
  while (hi - lo > 1) {
    const Bytes mid = lo + (hi - lo) / 2;
    if (fewestStages(mem, M, mid) <= stages) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

// The least per-worker memory over `strategies` at the smallest microbatch
// each allows, and which plan needs it. `pinned`: keep the user's pinned
// microbatch count and size; otherwise only the global batch constrains.
struct LeastPlan {
  Bytes memory = -1;
  std::string how;
};
LeastPlan leastPlan(const profile::Profile& profile, const SearchOptions& o,
                    const std::vector<std::pair<int, int>>& strategies, bool pinned) {
  LeastPlan least;
  const int L = static_cast<int>(profile.numLayers());
  for (const auto& [A, B] : strategies) {
    for (const auto& meas : profile.measurements) {
      if (pinned && o.microbatch_size && meas.microbatch_size != *o.microbatch_size) continue;
      std::int64_t M = 1;
      if (o.global_batch) {
        if ((*o.global_batch / A) % meas.microbatch_size != 0) continue;
        M = *o.global_batch / A / meas.microbatch_size;
      }
      if (pinned && o.microbatches) {
        if (o.global_batch && M != *o.microbatches) continue;
        M = *o.microbatches;
      }
      const MemoryCosts mem =
          memoryCosts(profile, meas, o.recovery_copies && A > 1 && B > 1, o.data_bytes, o.shared_memory && A > 1);
      const Bytes need = leastMemory(mem, stashedMicrobatches(o.schedule, 0, std::min(B, L), M), std::min(B, L));
      if (least.memory < 0 || need < least.memory) {
        least.memory = need;
        least.how = fmt::format("{}×{} with {} microbatch{} of {}", A, B, M, M == 1 ? "" : "es", meas.microbatch_size);
      }
      break;  // the smallest size that applies
    }
  }
  return least;
}

}  // namespace

Status nothingFits(const profile::Profile& profile, const SearchOptions& o, const std::optional<Bytes>& limit,
                   const std::vector<Candidate>& rows, const std::vector<std::pair<int, int>>& strategies) {
  // Memory is the obstacle only if some row ran out of it; otherwise say what was.
  const bool memoryBound = std::any_of(rows.begin(), rows.end(), [](const Candidate& c) { return c.memory_bound; });
  if (!limit || !memoryBound) {
    const Candidate& first = rows.front();
    return infeasible(fmt::format("no strategy is feasible; {}×{}: {}", first.data_parallel, first.stages, first.reason));
  }
  const int L = static_cast<int>(profile.numLayers());
  const LeastPlan least = leastPlan(profile, o, strategies, true);
  const std::string within =
      fmt::format("in {} per worker{}", formatBytes(*limit),
                  o.global_batch ? fmt::format(" with global batch {}", *o.global_batch) : "");
  // A pinned microbatch count or size that is what makes nothing fit says so.
  if (o.microbatches || o.microbatch_size) {
    const LeastPlan free = leastPlan(profile, o, strategies, false);
    if (free.memory >= 0 && free.memory <= *limit) {
      std::string pins;
      if (o.microbatches) pins += fmt::format("--microbatches {}", *o.microbatches);
      if (o.microbatch_size) pins += fmt::format("{}--microbatch-size {}", pins.empty() ? "" : " and ", *o.microbatch_size);
      return infeasible(fmt::format(
          "nothing fits {} with {}: the smallest plan with {} ({}) needs {} per worker. Fix: pin fewer or smaller "
          "microbatches or drop the pin ({} fits, needing {}), or give each worker at least {} (--memory {}MB)",
          within, pins, pins.find(" and ") == std::string::npos ? "it" : "them", least.how,
          least.memory >= 0 ? formatBytes(least.memory) : "?", free.how, formatBytes(free.memory),
          least.memory >= 0 ? formatBytes(least.memory) : "?", (least.memory + 999999) / 1000000));
    }
  }
  std::string fixes;
  if (least.memory > 0) {
    fixes += fmt::format("give each worker at least {} (--memory {}MB)", formatBytes(least.memory),
                         (least.memory + 999999) / 1000000);
  }
  {
    const auto& meas = profile.measurements.front();
    const std::int64_t M = o.global_batch ? std::max<std::int64_t>(1, *o.global_batch / meas.microbatch_size) : 1;
    const int stages = fewestStages(memoryCosts(profile, meas, false, o.data_bytes), M, *limit);
    if (stages <= L && stages > o.workers) {
      fixes += fmt::format("{}use at least {} workers (--workers {})", fixes.empty() ? "" : ", or ", stages, stages);
    }
  }
  if (o.global_batch) fixes += fmt::format("{}a smaller --global-batch", fixes.empty() ? "" : ", or ");
  fixes += fmt::format("{}profile smaller microbatch sizes", fixes.empty() ? "" : ", or ");
  return infeasible(fmt::format("nothing fits {}: the smallest plan ({}) needs {} per worker. Fix: {}", within,
                                least.how, least.memory > 0 ? formatBytes(least.memory) : "?", fixes));
}

}  // namespace hydrozoa::plan
