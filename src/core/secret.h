// Secrets shared with peers: job and service tokens.
#pragma once

#include <string>
#include <string_view>

namespace hydrozoa {

// 32 hex digits (128 bits) from the OS's randomness.
std::string newToken();

// Whether `given` is `secret`, compared in time that does not depend on
// where they differ (a peer learns nothing from how long a refusal takes);
// an empty secret matches nothing.
bool sameSecret(std::string_view given, std::string_view secret);

}  // namespace hydrozoa
