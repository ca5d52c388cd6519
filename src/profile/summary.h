// A profile as a table for the terminal (`hydrozoa profile`, `hydrozoa show`).
#pragma once

#include <string>

#include "profile/profile.h"

namespace hydrozoa::profile {

// One row per layer at the largest profiled microbatch size, and a line of
// totals per size.
std::string renderProfileTable(const Profile& profile);

}  // namespace hydrozoa::profile
