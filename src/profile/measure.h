// Measured profiles: runs the model layer by layer on this machine and
// records, per layer and microbatch size, the median forward and backward
// time over repeated runs after warm-up, the output bytes, the bytes kept
// for backward and the transient peak (counted by MemoryTracker), and the
// parameter and optimizer-state bytes.
//
// Each layer runs on a detached copy of its input, as a pipeline stage would
// receive it; the last layer's time includes the loss. Layer 0's input needs
// no gradient, as in training.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/zoo.h"
#include "profile/profile.h"

namespace hydrozoa::profile {

struct MeasureOptions {
  std::vector<std::int64_t> microbatch_sizes = {1, 2, 4, 8};
  int warmup = 1;
  int repeats = 5;            // at least this many timed passes...
  double min_seconds = 1.0;   // ...and at least this long measuring (NOTE [Interleaved repetitions])
  int max_repeats = 200;
  int threads = 1;                       // compute threads, as one worker will use
  // Also time the model's passes with every usable core computing (one
  // thread each), for Profile::corun (NOTE [Compute beside busy cores]).
  bool corun = true;
  std::string optimizer = "sgd_momentum";
  std::uint64_t seed = 0;
  // Where the layers run: this machine's CPU, or one of its GPUs (NOTE
  // [Profiles on a GPU], measure.cc).
  c10::Device on = c10::Device(c10::kCPU);
  std::function<void(const std::string&)> progress;  // one line per step, may be empty
};

Result<Profile> measureProfile(const model::ModelSpec& spec, const MeasureOptions& options);
// The same for an architecture built by hand (the calibration's kernels).
Result<Profile> measureArch(const model::Arch& arch, const MeasureOptions& options);

}  // namespace hydrozoa::profile
