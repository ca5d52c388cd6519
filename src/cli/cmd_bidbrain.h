// `hydrozoa simulate --bidbrain` (cli/cmd_bidbrain.cc; docs/spot.md).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace hydrozoa::cli {

struct BidBrainArgs {
  std::string spot_trace, write_spot_trace, job, tiers = "reliable=1,transient=8", on_demand, start;
  std::string work_rate;                 // ν: TYPE=N,... (else the aws-vm catalog's vCPUs)
  std::string learn = "7d";              // history before the first start (at most half of it)
  std::string change_overhead = "1min";  // σ
  std::string eviction_overhead = "1min";  // λ
  double scaling = 1;                    // φ
  double checkpoint_overhead = 0;        // checkpoint-restart's time spent writing checkpoints
  double synthetic_days = 0, work_hours = 0, samples_per_s = 100;
  int starts = 8;
  std::uint64_t seed = 0;
  bool json = false;
};

Status runBidBrain(const BidBrainArgs& a);

}  // namespace hydrozoa::cli
