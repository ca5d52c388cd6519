// Predicted profiles: per-layer costs from an architecture's FLOP and byte
// counts (model/arch.h) and a device spec, so users can plan for hardware
// they do not have (a roofline: each pass takes the longer of its compute at
// the achieved FLOP rate and its memory traffic at the achieved bandwidth,
// plus a fixed per-layer overhead; backward does about twice forward's work).
// Memory figures are the architecture's estimates; measured profiles are
// exact.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/arch.h"
#include "profile/device.h"
#include "profile/profile.h"

namespace hydrozoa::profile {

Result<Profile> predictProfile(const model::Arch& arch, const DeviceSpec& device,
                               const std::vector<std::int64_t>& microbatchSizes, const std::string& optimizer);

}  // namespace hydrozoa::profile
