// The coordinator's live progress line on stderr:
//   epoch 2/5 · step 812/2345 · loss 0.431 · 2,512 samples/s · 0:41 · ETA 1:18 · $0.0091
// On a terminal it is rewritten in place (at most four times a second);
// otherwise a line is printed every `interval` seconds; disabled, none.
// note() prints a line of its own (evaluations, checkpoints), always,
// without breaking the display.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/units.h"

namespace hydrozoa::cluster {

struct ProgressState {
  std::int64_t epoch = 0, epochs = 1;  // epoch is 1-based for display
  std::int64_t step = 0, steps = 0;    // global steps done, of all
  double loss = 0;
  double samples_per_second = 0;
  Seconds elapsed = 0;
  Usd cost = 0;
};

class Progress {
 public:
  explicit Progress(bool enabled, Seconds interval = 10);
  ~Progress();

  void update(const ProgressState& s);
  void note(const std::string& line);
  void finish();  // ends the in-place line

 private:
  std::string render(const ProgressState& s) const;

  bool enabled_, tty_;
  Seconds interval_;
  std::chrono::steady_clock::time_point last_{};
  bool open_ = false;
};

// "1:05:03" or "4:07".
std::string formatClock(Seconds s);

}  // namespace hydrozoa::cluster
