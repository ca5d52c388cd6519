// This process's memory as the kernel counts it (what a container's memory
// limit is checked against): resident now, and the most it has been.
#pragma once

#include "core/units.h"

namespace hydrozoa {

Bytes residentBytes();      // /proc/self/statm
Bytes peakResidentBytes();  // VmHWM in /proc/self/status; 0 when unknown

}  // namespace hydrozoa
