#include "cluster/straggler_driver.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <random>

namespace hydrozoa::cluster {
namespace {

constexpr double kPausePeriod = 0.020;        // a paused straggler: stopped (1 − 1/s) of every 20 ms
constexpr std::int64_t kQuotaPeriodUs = 100000;  // the container launcher's CFS period

bool writeQuota(const WorkerHandle& w, double cpus) {
  const std::string quota = cpus > 0 ? std::to_string(std::max<std::int64_t>(
                                           1000, std::llround(cpus * static_cast<double>(kQuotaPeriodUs))))
                                     : (w.cgroup_v2 ? "max" : "-1");
  std::ofstream out(w.quota_file);
  out << (w.cgroup_v2 ? fmt::format("{} {}", quota, kQuotaPeriodUs) : quota);
  out.close();
  return static_cast<bool>(out);
}

}  // namespace

Result<std::string> StragglerDriver::modeFor(const StragglerSpec& spec, bool quotas) {
  if (spec.pause > 0) return std::string("pause");
  if (spec.mode == "auto") return std::string(quotas ? "quota" : "pause");
  if (spec.mode == "quota" && !quotas) {
    return invalidArgument(fmt::format("cluster.stragglers: worker {}: mode quota cuts a container's CPU quota, but "
                                       "this launcher gives its workers none: use launcher container (as root), or "
                                       "mode pause or sleep",
                                       spec.worker));
  }
  return spec.mode;
}

StragglerDriver::StragglerDriver(std::vector<Target> targets, double elapsed, std::uint64_t seed)
    : targets_(std::move(targets)), elapsed_(elapsed), seed_(seed) {
  for (const Target& t : targets_) {
    if (t.worker.pid <= 0) {
      spdlog::warn("stragglers: {} has no process on this machine to slow down; ignored", t.name);
      continue;
    }
    threads_.emplace_back([this, &t] { drive(t); });
  }
}

StragglerDriver::~StragglerDriver() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

bool StragglerDriver::sleepFor(double seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, std::chrono::duration<double>(std::max(0.0, seconds)), [&] { return stop_; });
}

void StragglerDriver::drive(const Target& t) {
  const StragglerSpec& s = t.spec;
  const auto mode = modeFor(s, !t.worker.quota_file.empty());
  if (!mode.ok() || *mode == "sleep") return;
  // The pattern's window, from this generation's start.
  if (!sleepFor(s.start - elapsed_)) return;
  const auto t0 = std::chrono::steady_clock::now();
  const double window = s.duration > 0 ? s.start + s.duration - std::max(elapsed_, s.start) : -1;
  if (s.duration > 0 && window <= 0) return;
  auto inWindow = [&] {
    return window < 0 || std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < window;
  };
  const pid_t pid = t.worker.pid;
  if (*mode == "quota") {
    const double base = t.worker.cpus > 0 ? t.worker.cpus : 1.0;
    if (!writeQuota(t.worker, base / s.slowdown)) {
      spdlog::warn("stragglers: cannot cut {}'s CPU quota in {}", t.name, t.worker.quota_file);
      return;
    }
    spdlog::info("stragglers: {} CPU quota cut to {:.3g} vCPUs ({}x slower){}", t.name, base / s.slowdown, s.slowdown,
                 window < 0 ? "" : fmt::format(" for {:.3g} s", window));
    while (inWindow() && sleepFor(window < 0 ? 3600 : 0.05)) {
    }
    writeQuota(t.worker, t.worker.cpus);
    return;
  }
  std::mt19937_64 rng(seed_ ^ (0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(s.worker + 1)));
  std::exponential_distribution<double> gap(s.every > 0 ? 1.0 / s.every : 1.0);
  spdlog::info("stragglers: pausing {} ({}){}", t.name,
               s.pause > 0 ? fmt::format("{:.3g} s every {:.3g} s on average", s.pause, s.every)
                           : fmt::format("{}x slower: stopped {:.0f}% of every {:.0f} ms", s.slowdown,
                                         100 * (1 - 1 / s.slowdown), 1000 * kPausePeriod),
               window < 0 ? "" : fmt::format(" for {:.3g} s", window));
  while (inWindow()) {
    const double stopped = s.pause > 0 ? s.pause : kPausePeriod * (1 - 1 / s.slowdown);
    const double running = s.pause > 0 ? gap(rng) : kPausePeriod / s.slowdown;
    if (s.pause > 0 && !sleepFor(running)) break;
    if (::kill(pid, SIGSTOP) != 0) break;  // gone
    ++pauses_;
    const bool go = sleepFor(stopped);
    ::kill(pid, SIGCONT);
    if (!go) break;
    if (s.pause <= 0 && !sleepFor(running)) break;
  }
}

}  // namespace hydrozoa::cluster
