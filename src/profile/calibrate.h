// "This CPU" as a device spec for predicted profiles, calibrated by a short
// measurement: the FLOP rate of a matrix product and of a convolution (their
// geometric mean is the achieved rate), the bandwidth of a large copy, and
// the fixed cost of a tiny operation.
#pragma once

#include "core/status.h"
#include "profile/device.h"

namespace hydrozoa::profile {

struct CalibrateOptions {
  int threads = 1;  // compute threads per worker
};

Result<DeviceSpec> calibrateCpu(const CalibrateOptions& options);

}  // namespace hydrozoa::profile
