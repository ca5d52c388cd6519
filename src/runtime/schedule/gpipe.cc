#include "runtime/schedule/gpipe.h"

#include <fmt/format.h>

namespace hydrozoa::runtime {

std::vector<Action> GPipeSchedule::actions(int /*stage*/, int /*stages*/, int microbatches) const {
  std::vector<Action> a;
  a.reserve(2 * static_cast<size_t>(microbatches));
  for (int mb = 0; mb < microbatches; ++mb) a.push_back({ActionKind::kForward, mb});
  for (int mb = microbatches - 1; mb >= 0; --mb) a.push_back({ActionKind::kBackward, mb});
  return a;
}

Result<std::unique_ptr<Schedule>> makeSchedule(const std::string& name) {
  if (name == "gpipe") return std::unique_ptr<Schedule>(new GPipeSchedule());
  return invalidArgument(fmt::format("unknown pipeline schedule \"{}\"; available: gpipe", name));
}

int lastBackward(const std::vector<Action>& actions) {
  for (int i = static_cast<int>(actions.size()) - 1; i >= 0; --i) {
    if (actions[i].kind == ActionKind::kBackward) return i;
  }
  return -1;
}

}  // namespace hydrozoa::runtime
