// The `cpu` device's predictions against measured profiles (issue 9): each
// model is measured here (hydrozoa profile) and predicted from a calibration
// of this CPU made in the same run, twice: with one global FLOP rate and
// bandwidth (what `--device cpu` predicted before per-kind factors) and with
// the calibration's per-kind factors and fresh-page bandwidth. Prints, per
// model and microbatch size, the whole model's forward+backward time
// measured, each prediction's error, and the per-layer errors.
//
//   build/bench/predict_bench [--model NAME [-O key=value ...]] ...
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/zoo.h"
#include "profile/calibrate.h"
#include "profile/measure.h"
#include "profile/predict.h"

using namespace hydrozoa;

namespace {

struct Case {
  std::string name;
  model::Options options;
};

struct Errors {
  double whole = 0;                   // (predicted − measured) / measured, whole model
  double median_layer = 0, worst_layer = 0;  // |error| per layer (forward+backward)
};

Errors compare(const profile::Measurement& measured, const profile::Measurement& predicted) {
  double m = 0, p = 0;
  std::vector<double> layers;
  double worst = 0;
  for (size_t i = 0; i < measured.layers.size(); ++i) {
    const double lm = measured.layers[i].forward_ms + measured.layers[i].backward_ms;
    const double lp = predicted.layers[i].forward_ms + predicted.layers[i].backward_ms;
    m += lm;
    p += lp;
    layers.push_back(std::abs(lp / lm - 1));
    if (std::abs(lp / lm - 1) > std::abs(worst)) worst = lp / lm - 1;
  }
  std::sort(layers.begin(), layers.end());
  return {p / m - 1, layers[layers.size() / 2], worst};
}

std::string label(const Case& c) {
  std::string s = c.name;
  for (const auto& [k, v] : c.options) s += fmt::format(" {}={}", k, v);
  return s;
}

template <class T>
T orExit(Result<T> r, const std::string& what) {
  if (!r.ok()) {
    fmt::print(stderr, "predict_bench: {}: {}\n", what, r.status().message());
    std::exit(1);
  }
  return std::move(*r);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Case> cases;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--model")) cases.push_back({argv[++i], {}});
    if (!std::strcmp(argv[i], "-O") && !cases.empty()) {
      cases.back().options.push_back(orExit(model::parseOption(argv[++i]), "-O"));
    }
  }
  if (cases.empty()) {  // the fidelity matrix's models (bench/fidelity_bench.sh), then larger ones
    cases = {{"mlp", {{"hidden", "1024"}, {"depth", "4"}}},
             {"cnn", {}},
             {"vgg11", {{"image_size", "32"}, {"width", "0.25"}}},
             {"resnet18", {{"image_size", "32"}, {"width", "0.25"}}},
             {"gpt", {{"layers", "4"}, {"hidden", "128"}, {"heads", "4"}, {"vocab", "1024"}, {"seq_len", "64"}}},
             {"resnet50", {{"image_size", "64"}, {"width", "0.5"}}},
             {"bert", {{"layers", "2"}, {"hidden", "256"}, {"heads", "4"}, {"seq_len", "128"}, {"vocab", "8192"}}},
             {"vgg11", {{"image_size", "64"}, {"width", "0.5"}}}};
  }
  const profile::DeviceSpec calibrated = orExit(profile::calibrateCpu({1}), "calibrating");
  profile::DeviceSpec global = calibrated;
  global.kinds.clear();
  global.fresh_memory_bandwidth = 0;
  fmt::print("The `cpu` device's predictions against measured profiles, one thread\n");
  fmt::print("calibration: {:.1f} GFLOP/s x {:.2f}, copy {:.1f} GB/s, fresh pages {:.2f} GB/s, per-kind factors "
             "(forward / backward): {}\n\n",
             calibrated.peak_flops / 1e9, calibrated.compute_efficiency, calibrated.memory_bandwidth / 1e9,
             calibrated.fresh_memory_bandwidth / 1e9, profile::describeKindFactors(calibrated));
  fmt::print("| model | microbatch | measured | one rate: error | layers median / worst | per kind: error | layers "
             "median / worst |\n|---|---|---|---|---|---|---|\n");
  std::vector<double> before, after;
  for (const Case& c : cases) {
    profile::MeasureOptions mo;
    mo.microbatch_sizes = {8, 32};
    mo.min_seconds = 0.5;
    mo.optimizer = "sgd";
    const profile::Profile measured = orExit(profile::measureProfile({c.name, c.options}, mo), label(c));
    const model::Arch arch = orExit(model::buildArch({c.name, c.options}), label(c));
    const profile::Profile one = orExit(profile::predictProfile(arch, global, mo.microbatch_sizes, "sgd"), "predict");
    const profile::Profile kinds =
        orExit(profile::predictProfile(arch, calibrated, mo.microbatch_sizes, "sgd"), "predict");
    for (size_t s = 0; s < measured.measurements.size(); ++s) {
      const auto& m = measured.measurements[s];
      double total = 0;
      for (const auto& l : m.layers) total += l.forward_ms + l.backward_ms;
      const Errors b = compare(m, one.measurements[s]), a = compare(m, kinds.measurements[s]);
      before.push_back(std::abs(b.whole));
      after.push_back(std::abs(a.whole));
      fmt::print("| {} | {} | {:.1f} ms | {:+.0f}% | {:.0f}% / {:+.0f}% | {:+.0f}% | {:.0f}% / {:+.0f}% |\n", label(c),
                 m.microbatch_size, total, 100 * b.whole, 100 * b.median_layer, 100 * b.worst_layer, 100 * a.whole,
                 100 * a.median_layer, 100 * a.worst_layer);
    }
  }
  std::sort(before.begin(), before.end());
  std::sort(after.begin(), after.end());
  fmt::print("\nwhole-model |error|: one rate median {:.0f}%, worst {:.0f}%; per kind median {:.0f}%, worst {:.0f}%\n",
             100 * before[before.size() / 2], 100 * before.back(), 100 * after[after.size() / 2], 100 * after.back());
  return 0;
}
