// SHARP's units as a run records them (<run>/timeline.csv, one line a unit:
// worker, task, unit, kind, shard, step, load_begin, compute_begin, end,
// seconds since the selection began). Pure C++.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hydrozoa::select {

struct TimelineUnit {
  int worker = 0, task = 0, shard = 0;
  std::int64_t unit = 0, step = 0;
  std::string kind;  // forward | last | backward | evaluate
  double load_begin = 0, compute_begin = 0, end = 0;
};

std::string timelineHeader();  // the file's first line, with its newline
std::string timelineLine(const TimelineUnit& u);

// The file's units; lines that do not read as one are left out.
std::vector<TimelineUnit> readTimeline(const std::string& path);

}  // namespace hydrozoa::select
