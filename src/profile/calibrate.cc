#include "profile/calibrate.h"

#include <fmt/format.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <vector>

namespace hydrozoa::profile {
namespace {

// Best of several timed runs of `fn`, in seconds.
double bestSeconds(const std::function<void()>& fn, int runs) {
  fn();  // warm-up
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

Result<DeviceSpec> calibrateCpu(const CalibrateOptions& o) {
  if (o.threads > 0) torch::set_num_threads(o.threads);
  torch::NoGradGuard guard;
  const auto a = torch::randn({512, 512}), b = torch::randn({512, 512});
  const double gemm = 2.0 * 512 * 512 * 512 / bestSeconds([&] { (void)torch::mm(a, b); }, 5);
  const auto image = torch::randn({8, 64, 28, 28}), weight = torch::randn({64, 64, 3, 3});
  const double convFlops = 2.0 * 8 * 64 * 28 * 28 * 64 * 9;
  const double conv = convFlops / bestSeconds([&] { (void)torch::conv2d(image, weight, {}, 1, 1); }, 5);
  const auto big = torch::randn({16 * 1024 * 1024});  // 64 MB
  auto copy = torch::empty_like(big);
  const double bandwidth = 2.0 * 64 * 1024 * 1024 / bestSeconds([&] { copy.copy_(big); }, 5);
  const auto tiny = torch::randn({16});
  const double overhead = bestSeconds([&] { (void)torch::relu(tiny); }, 20);

  DeviceSpec d;
  d.name = "cpu";
  d.kind = "cpu";
  d.description = fmt::format("this CPU, {} thread{} (calibrated)", torch::get_num_threads(),
                              torch::get_num_threads() == 1 ? "" : "s");
  d.peak_flops = gemm;
  d.compute_efficiency = std::min(1.0, std::sqrt(gemm * conv) / gemm);
  d.memory_bandwidth = bandwidth;
  d.memory_efficiency = 1.0;
  d.layer_overhead = 4 * overhead;  // a layer is a handful of operations
  d.memory = static_cast<Bytes>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE);
  d.runtime_memory = 200 * kMB;
  return d;
}

}  // namespace hydrozoa::profile
