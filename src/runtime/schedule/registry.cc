// The pipeline schedules by name: one line each.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>

#include "runtime/schedule/gpipe.h"
#include "runtime/schedule/interleaved.h"
#include "runtime/schedule/one_f_one_b.h"
#include "runtime/schedule/pipedream.h"
#include "runtime/schedule/two_bw.h"

namespace hydrozoa::runtime {
namespace {

struct Entry {
  const char* name;
  std::function<std::unique_ptr<Schedule>()> make;
};

const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {
      {"gpipe", [] { return std::make_unique<GPipeSchedule>(); }},
      {"1f1b", [] { return std::make_unique<OneFOneBSchedule>(); }},
      {"interleaved", [] { return std::make_unique<InterleavedSchedule>(); }},
      {"2bw", [] { return std::make_unique<TwoBwSchedule>(); }},
      {"pipedream", [] { return std::make_unique<PipeDreamSchedule>(); }},
      {"pipedream-vs", [] { return std::make_unique<PipeDreamSchedule>(/*verticalSync=*/true); }},
  };
  return entries;
}

}  // namespace

std::vector<std::string> scheduleNames() {
  std::vector<std::string> names;
  for (const Entry& e : registry()) names.emplace_back(e.name);
  return names;
}

Result<std::unique_ptr<Schedule>> makeSchedule(const std::string& name) {
  for (const Entry& e : registry()) {
    if (name == e.name) return e.make();
  }
  return invalidArgument(
      fmt::format("unknown pipeline schedule \"{}\"; available: {}", name, fmt::join(scheduleNames(), ", ")));
}

}  // namespace hydrozoa::runtime
