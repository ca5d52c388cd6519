// `hydrozoa simulate --bidbrain` (cli/cmd_bidbrain.cc; docs/spot.md).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace hydrozoa::cli {

struct BidBrainArgs {
  std::string spot_trace, write_spot_trace, job, tiers = "reliable=1,transient=8", on_demand, start;
  double synthetic_days = 0, work_hours = 0, samples_per_s = 100;
  int starts = 8;
  std::uint64_t seed = 0;
  bool json = false;
};

Status runBidBrain(const BidBrainArgs& a);

}  // namespace hydrozoa::cli
