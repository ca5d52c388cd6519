#include "plan/cost/schedules.h"

#include <fmt/format.h>

#include <algorithm>

#include "plan/cost/interleaved.h"
#include "plan/cost/one_f_one_b.h"
#include "plan/cost/two_bw.h"

namespace hydrozoa::plan {

const std::vector<ScheduleKind>& allSchedules() {
  static const std::vector<ScheduleKind> all = {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB,
                                                ScheduleKind::kInterleaved, ScheduleKind::kTwoBW,
                                                ScheduleKind::kPipeDream, ScheduleKind::kPipeDreamVerticalSync};
  return all;
}

const char* scheduleName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe:
      return "gpipe";
    case ScheduleKind::kOneFOneB:
      return "1f1b";
    case ScheduleKind::kInterleaved:
      return "interleaved";
    case ScheduleKind::kTwoBW:
      return "2bw";
    case ScheduleKind::kPipeDream:
      return "pipedream";
    case ScheduleKind::kPipeDreamVerticalSync:
      return "pipedream-vs";
  }
  return "?";
}

bool asynchronous(ScheduleKind kind) { return kind == ScheduleKind::kTwoBW || updatePerMicrobatch(kind); }
bool updatePerMicrobatch(ScheduleKind kind) {
  return kind == ScheduleKind::kPipeDream || kind == ScheduleKind::kPipeDreamVerticalSync;
}
int weightVersions(ScheduleKind kind, int stage, int stages) {
  if (kind == ScheduleKind::kTwoBW) return 2;
  if (kind == ScheduleKind::kPipeDream) return std::max(1, stages - stage);
  if (kind == ScheduleKind::kPipeDreamVerticalSync) return std::max(1, stages);
  return 1;
}
int staleness(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kTwoBW:
      return 1;
    case ScheduleKind::kPipeDream:
      return kPerStage;
    case ScheduleKind::kPipeDreamVerticalSync:
      return kStagesLess1;
    default:
      return 0;
  }
}

Result<ScheduleKind> parseSchedule(const std::string& name, const std::string& field) {
  std::string names;
  for (ScheduleKind k : allSchedules()) {
    if (name == scheduleName(k)) return k;
    names += std::string(names.empty() ? "" : ", ") + scheduleName(k);
  }
  return invalidArgument(fmt::format("{}: unknown pipeline schedule \"{}\"; available: {}", field, name, names));
}

std::vector<Pass> gpipeOrder(std::int64_t microbatches) {
  std::vector<Pass> order;
  order.reserve(2 * static_cast<size_t>(microbatches));
  for (std::int64_t mb = 0; mb < microbatches; ++mb) order.push_back({false, static_cast<int>(mb)});
  for (std::int64_t mb = microbatches - 1; mb >= 0; --mb) order.push_back({true, static_cast<int>(mb)});
  return order;
}

int chunksOf(ScheduleKind kind, int chunks) { return kind == ScheduleKind::kInterleaved ? chunks : 1; }

std::vector<Pass> passOrder(ScheduleKind kind, int stage, int stages, std::int64_t microbatches, int chunks) {
  switch (kind) {
    case ScheduleKind::kGPipe:
      return gpipeOrder(microbatches);
    case ScheduleKind::kOneFOneB:
      return oneFOneBOrder(stage, stages, microbatches);
    case ScheduleKind::kInterleaved:
      return interleavedOrder(stage, stages, chunks, microbatches);
    case ScheduleKind::kTwoBW:
    case ScheduleKind::kPipeDream:  // the same stream; its updates differ
    case ScheduleKind::kPipeDreamVerticalSync:
      return twoBwOrder(stage, stages, microbatches);
  }
  return {};
}

std::vector<std::int64_t> stashPeaks(const std::vector<Pass>& order, int chunks) {
  std::vector<std::int64_t> now(static_cast<size_t>(chunks), 0), peak(static_cast<size_t>(chunks), 0);
  for (const Pass& p : order) {
    const auto c = static_cast<size_t>(p.chunk);
    if (p.backward) {
      --now[c];
    } else {
      peak[c] = std::max(peak[c], ++now[c]);
    }
  }
  return peak;
}

std::int64_t stashedMicrobatches(ScheduleKind kind, int stage, int stages, std::int64_t microbatches, int chunks) {
  switch (kind) {
    case ScheduleKind::kGPipe:
      return microbatches;
    case ScheduleKind::kOneFOneB:
    case ScheduleKind::kTwoBW:  // 1F1B's in flight, across steps
    case ScheduleKind::kPipeDream:
    case ScheduleKind::kPipeDreamVerticalSync:
      return oneFOneBStashed(stage, stages, microbatches);
    case ScheduleKind::kInterleaved: {
      const auto peaks = stashPeaks(interleavedOrder(stage, stages, chunks, microbatches), chunks);
      return peaks.empty() ? 0 : *std::max_element(peaks.begin(), peaks.end());
    }
  }
  return microbatches;
}

std::vector<std::int64_t> chunkStashPeaks(ScheduleKind kind, int stage, int stages, std::int64_t microbatches,
                                          int chunks) {
  if (kind == ScheduleKind::kInterleaved) return stashPeaks(interleavedOrder(stage, stages, chunks, microbatches), chunks);
  return {stashedMicrobatches(kind, stage, stages, microbatches, chunks)};
}

}  // namespace hydrozoa::plan
