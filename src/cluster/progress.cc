#include "cluster/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace hydrozoa::cluster {

std::string formatClock(Seconds s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const auto total = static_cast<std::int64_t>(std::llround(s));
  const auto h = total / 3600, m = total / 60 % 60, sec = total % 60;
  return h > 0 ? fmt::format("{}:{:02d}:{:02d}", h, m, sec) : fmt::format("{}:{:02d}", m, sec);
}

Progress::Progress(bool enabled, Seconds interval)
    : enabled_(enabled), tty_(::isatty(STDERR_FILENO) == 1), interval_(interval) {}

Progress::~Progress() { finish(); }

std::string Progress::render(const ProgressState& s) const {
  const double rate = s.elapsed > 0 ? static_cast<double>(s.step) / s.elapsed : 0;
  const double eta = rate > 0 ? static_cast<double>(s.steps - s.step) / rate : NAN;
  return fmt::format("epoch {}/{} · step {}/{} · loss {:.4f} · {} samples/s · {} · ETA {} · {}", s.epoch, s.epochs,
                     s.step, s.steps, s.loss, formatCount(s.samples_per_second), formatClock(s.elapsed),
                     formatClock(eta), formatUsd(s.cost));
}

void Progress::update(const ProgressState& s) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_).count();
  if (tty_) {
    if (since < 0.25 && s.step < s.steps) return;
    std::fprintf(stderr, "\r\033[K%s", render(s).c_str());
    open_ = true;
  } else {
    if (since < interval_ && s.step < s.steps) return;
    std::fprintf(stderr, "%s\n", render(s).c_str());
  }
  std::fflush(stderr);
  last_ = now;
}

void Progress::note(const std::string& line) {
  if (open_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  open_ = false;
  last_ = {};  // redraw the progress line at the next update
}

void Progress::finish() {
  if (open_) std::fprintf(stderr, "\n");
  open_ = false;
}

}  // namespace hydrozoa::cluster
