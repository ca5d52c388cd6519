#include "profile/calibrate.h"

#include <fmt/format.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "profile/measure.h"
#include "profile/predict.h"

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

// NOTE [Calibration kernels]
// One global FLOP rate puts a layer's time off by a factor that depends on
// its kind more than on its size: measured here, transformer blocks ran
// 1.4–3.4× their roofline's forward, dense layers 1–3×, a 3×3 convolution
// deep in a network 0.6–1.5× (oneDNN's kernels beat the 512³ product that
// sets the rate) and a convolution over the input's 1–3 channels 5–10×. So
// each kind runs, in the short chains below, at shapes typical of the zoo's
// small and medium variants, at microbatch 4 and 32; per pass and size its
// factor is the geometric mean over its layers of the measured time over the
// roofline's, the fixed per-layer cost taken out of both. That cost is the
// time of a layer too small to compute anything (a 16-wide dense layer at
// microbatch 1). The two sizes give `f + g / m`: a dense layer at microbatch
// 4 took 3.4× its roofline and at 32 1.3× (the product's rows fill the vector
// registers worse), and one factor for both put the MLP's step 45–70% over
// its measurement at 32. Layers of one kind still differ by up to 2× around
// their factor; a measured profile has no such error.
model::Arch imageKernels() {
  model::Arch a;
  a.name = "calibration (image)";
  a.input = {model::InputKind::kImage, {3, 32, 32}, 0};
  a.task = {model::TaskKind::kClassification, 10};
  using model::ConvSpec, model::LinearSpec, model::BasicBlockSpec;
  a.layers = {
      {"conv_first", ConvSpec{3, 32, 3, 1, 1, true, false, true, 2, 2, 0}},  // -> 32x16x16
      {"conv_bn", ConvSpec{32, 64, 3, 1, 1, false, true, true}},             // -> 64x16x16
      {"conv", ConvSpec{64, 64, 3, 1, 1, true, false, true}},
      {"basic", BasicBlockSpec{64, 64, 1}},
      {"basic_down", BasicBlockSpec{64, 128, 2}},                             // -> 128x8x8
      {"conv_pool", ConvSpec{128, 128, 3, 1, 1, true, false, true, 2, 2, 0}}, // -> 128x4x4
      {"fc_flatten", LinearSpec{2048, 1024, true, true, true, 0}},
      {"fc", LinearSpec{1024, 1024, true, true, false, 0}},
      {"fc_out", LinearSpec{1024, 10, true, false, false, 0}},
  };
  return a;
}

model::Arch bottleneckKernels() {
  model::Arch a;
  a.name = "calibration (bottlenecks)";
  a.input = {model::InputKind::kImage, {3, 32, 32}, 0};
  a.task = {model::TaskKind::kClassification, 10};
  using model::ConvSpec, model::LinearSpec, model::BottleneckSpec;
  a.layers = {
      {"stem", ConvSpec{3, 64, 3, 1, 1, false, true, true, 2, 2, 0}},  // -> 64x16x16
      {"bottleneck_widen", BottleneckSpec{64, 32, 128, 1}},
      {"bottleneck", BottleneckSpec{128, 32, 128, 1}},
      {"bottleneck_down", BottleneckSpec{128, 64, 256, 2}},            // -> 256x8x8
      {"fc", LinearSpec{256, 10, true, false, true, 0, 1, 1}},
  };
  return a;
}

model::Arch decoderKernels() {
  model::Arch a;
  a.name = "calibration (decoder)";
  a.input = {model::InputKind::kTokens, {64}, 2048};
  a.task = {model::TaskKind::kLanguageModel, 2048};
  a.layers = {
      {"embeddings", model::EmbeddingSpec{2048, 192, 64, 0, false, 0.1}},
      {"block", model::TransformerSpec{192, 3, 768, true, true, 0.1}},
      {"lm_head", model::LmHeadSpec{192, 2048, true}},
  };
  return a;
}

model::Arch encoderKernels() {
  model::Arch a;
  a.name = "calibration (encoder)";
  a.input = {model::InputKind::kTokens, {64}, 2048};
  a.task = {model::TaskKind::kClassification, 2};
  a.layers = {
      {"embeddings", model::EmbeddingSpec{2048, 192, 64, 2, true, 0.1}},
      {"encoder", model::TransformerSpec{192, 3, 768, false, false, 0.1}},
      {"classifier", model::SequenceClassifierSpec{192, 2, true}},
  };
  return a;
}

// Three 16-wide dense layers: the middle one's times are a layer's fixed cost.
model::Arch tinyKernels() {
  model::Arch a;
  a.name = "calibration (fixed cost)";
  a.input = {model::InputKind::kImage, {1, 4, 4}, 0};
  a.task = {model::TaskKind::kClassification, 2};
  a.layers = {
      {"first", model::LinearSpec{16, 16, true, true, true, 0}},
      {"middle", model::LinearSpec{16, 16, true, true, false, 0}},
      {"last", model::LinearSpec{16, 2, true, false, false, 0}},
  };
  return a;
}

MeasureOptions kernelOptions(int threads, std::vector<std::int64_t> sizes) {
  MeasureOptions mo;
  mo.microbatch_sizes = std::move(sizes);
  mo.warmup = 1;
  mo.repeats = 3;
  mo.min_seconds = 0.1;
  mo.corun = false;  // kernels, not a model the planner plans
  mo.threads = threads;
  mo.optimizer = "sgd";
  return mo;
}

// The two microbatch sizes every kernel runs at: the factors' fit
// `f + g / m` goes through both (NOTE [Calibration kernels]).
constexpr std::int64_t kSmall = 4, kLarge = 32;

struct LogSums {
  double forward = 0, backward = 0;
  int count = 0;
};

// Per factor kind, at kSmall and kLarge.
using KindSums = std::map<std::string, std::array<LogSums, 2>>;

// Adds each layer's log(measured / roofline) per pass to its kind's sums,
// the fixed cost taken out of both. No tensor of these kernels reaches
// kMmapThreshold: none pays for fresh pages.
Status addKernels(const model::Arch& arch, const DeviceSpec& roofline, int threads, KindSums* sums) {
  const MeasureOptions mo = kernelOptions(threads, {kSmall, kLarge});
  HZ_ASSIGN_OR_RETURN(Profile measured, measureArch(arch, mo));
  HZ_ASSIGN_OR_RETURN(Profile predicted, predictProfile(arch, roofline, mo.microbatch_sizes, mo.optimizer));
  const std::vector<model::LayerAnalysis> layers = model::analyze(arch);
  const double fixed = 1e3 * roofline.layer_overhead;
  // A kernel measured at its fixed cost or below says nothing about its rate.
  const auto ratio = [](double measured, double roof) { return std::log(std::max(measured, 0.1 * roof) / roof); };
  const size_t L = layers.size();
  for (size_t s = 0; s < 2; ++s) {
    for (size_t i = 0; i < L; ++i) {
      // The last layer's time includes the loss: it stands for its kind only
      // where that kind is a head, always last.
      const std::string& kind = layers[i].kind;
      if (i + 1 == L && kind != "lm_head" && kind != "sequence_classifier") continue;
      const LayerCost& m = measured.measurements[s].layers[i];
      const LayerCost& p = predicted.measurements[s].layers[i];
      LogSums& k = (*sums)[factorKind(layers[i])][s];
      k.forward += ratio(m.forward_ms - fixed, p.forward_ms - fixed);
      k.backward += ratio(m.backward_ms - 2 * fixed, p.backward_ms - 2 * fixed);
      ++k.count;
    }
  }
  return Status();
}

// `f + g / m` through the geometric-mean factors at kSmall and kLarge; where
// the larger microbatch runs relatively slower (g would be negative), one
// factor for both.
std::pair<double, double> fitFactor(double logSmall, double logLarge) {
  const double small = std::exp(logSmall), large = std::exp(logLarge);
  double g = (small - large) / (1.0 / kSmall - 1.0 / kLarge);
  double f = large - g / kLarge;
  if (g <= 0 || f < 1e-2) {
    f = std::exp((logSmall + logLarge) / 2);
    g = 0;
  }
  // Two decimals: the measurement's noise is larger, and a saved file reads better.
  const auto round = [](double x) { return std::round(100 * x) / 100; };
  return {round(std::clamp(f, 1e-2, 1e2)), round(std::clamp(g, 0.0, 1e3))};
}

}  // namespace

Result<DeviceSpec> calibrateCpu(const CalibrateOptions& o) {
  if (o.threads > 0) torch::set_num_threads(o.threads);
  configureAllocatorForTraining();  // as the workers run (NOTE [Fresh pages])
  DeviceSpec d;
  {
    torch::NoGradGuard guard;
    const auto a = torch::randn({512, 512}), b = torch::randn({512, 512});
    const double gemm = 2.0 * 512 * 512 * 512 / bestSeconds([&] { (void)torch::mm(a, b); }, 5);
    const auto image = torch::randn({8, 64, 28, 28}), weight = torch::randn({64, 64, 3, 3});
    const double convFlops = 2.0 * 8 * 64 * 28 * 28 * 64 * 9;
    const double conv = convFlops / bestSeconds([&] { (void)torch::conv2d(image, weight, {}, 1, 1); }, 5);
    const std::int64_t elements = 2 * kMmapThreshold / 4;  // fresh pages on every allocation
    const auto big = torch::randn({elements});
    auto copy = torch::empty_like(big);
    const double copySeconds = bestSeconds([&] { copy.copy_(big); }, 5);
    const double bytes = 4.0 * static_cast<double>(elements);
    const double freshSeconds = bestSeconds([&] { (void)torch::empty({elements}).copy_(big); }, 5);

    d.name = "cpu";
    d.kind = "cpu";
    d.description = fmt::format("this CPU, {} thread{} (calibrated)", torch::get_num_threads(),
                                torch::get_num_threads() == 1 ? "" : "s");
    d.peak_flops = gemm;
    d.compute_efficiency = std::min(1.0, std::sqrt(gemm * conv) / gemm);
    d.memory_bandwidth = 2 * bytes / copySeconds;
    d.memory_efficiency = 1.0;
    d.memory = static_cast<Bytes>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE);
    d.runtime_memory = 200 * kMB;
    // The copy into fresh pages less the same copy into touched ones.
    d.fresh_memory_bandwidth = bytes / std::max(freshSeconds - copySeconds, 1e-3 * copySeconds);
  }
  {
    HZ_ASSIGN_OR_RETURN(Profile tiny, measureArch(tinyKernels(), kernelOptions(o.threads, {1})));
    const LayerCost& middle = tiny.measurements[0].layers[1];
    d.layer_overhead = 1e-3 * std::min(middle.forward_ms, middle.backward_ms / 2);
  }
  KindSums sums;
  for (const model::Arch& arch : {imageKernels(), bottleneckKernels(), decoderKernels(), encoderKernels()}) {
    HZ_RETURN_IF_ERROR(addKernels(arch, d, o.threads, &sums));
  }
  for (const auto& [kind, s] : sums) {
    KindFactors& f = d.kinds[kind];
    std::tie(f.forward, f.forward_small) = fitFactor(s[0].forward / s[0].count, s[1].forward / s[1].count);
    std::tie(f.backward, f.backward_small) = fitFactor(s[0].backward / s[0].count, s[1].backward / s[1].count);
  }
  return d;
}

}  // namespace hydrozoa::profile
