// Profiler benchmark (issue 2): profiling a tiny zoo model takes seconds, and
// repeated profiles agree per layer. Profiles each model N times in one run
// and prints how long a profile takes and, per band of layer time, the
// largest per-layer spread (max − min) / median of forward+backward time
// across the N profiles, over every microbatch size.
//
//   build/bench/profile_bench [--runs 5] [--model NAME ...]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "profile/measure.h"

using namespace hydrozoa;

namespace {

struct Case {
  std::string name;
  model::Options options;
};

void runCase(const Case& c, int runs) {
  profile::MeasureOptions o;
  o.microbatch_sizes = {1, 2, 4, 8, 16, 32};
  std::vector<profile::Profile> profiles;
  std::vector<double> wall;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    auto p = profile::measureProfile({c.name, c.options}, o);
    if (!p.ok()) {
      fmt::print(stderr, "profile_bench: {}\n", p.status().message());
      std::exit(1);
    }
    wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    profiles.push_back(std::move(*p));
  }
  std::sort(wall.begin(), wall.end());
  std::string label = c.name;
  for (const auto& [k, v] : c.options) label += fmt::format(" {}={}", k, v);
  fmt::print("{} ({} layers, microbatch sizes 1-32): a profile takes {:.2f} s (median of {}; at least {} runs and "
             "{} s of measuring)\n",
             label, profiles[0].numLayers(), wall[wall.size() / 2], runs, o.repeats, o.min_seconds);
  // Bands of a layer's median forward+backward time.
  struct Band {
    const char* name;
    double lo, hi;
    double worst = 0;
    int layers = 0;
    std::string where;
  };
  std::vector<Band> bands = {{"  >= 1 ms", 1, 1e30, 0, 0, ""}, {"0.1-1 ms", 0.1, 1, 0, 0, ""}, {" < 0.1 ms", 0, 0.1, 0, 0, ""}};
  for (std::int64_t m : o.microbatch_sizes) {
    for (size_t i = 0; i < profiles[0].numLayers(); ++i) {
      std::vector<double> t;
      for (const auto& p : profiles) t.push_back(p.at(m)->layers[i].forward_ms + p.at(m)->layers[i].backward_ms);
      std::sort(t.begin(), t.end());
      const double median = t[t.size() / 2], spread = (t.back() - t.front()) / median;
      for (Band& b : bands) {
        if (median < b.lo || median >= b.hi) continue;
        ++b.layers;
        if (spread >= b.worst) {
          b.worst = spread;
          b.where = fmt::format("{} at microbatch {}: {:.3f}-{:.3f} ms", profiles[0].layers[i].name, m, t.front(),
                                t.back());
        }
      }
    }
  }
  for (const Band& b : bands) {
    if (b.layers == 0) continue;
    fmt::print("  layers taking {}: largest spread {:5.1f}% over {:3} (layer, size) pairs; worst: {}\n", b.name,
               100 * b.worst, b.layers, b.where);
  }
  fmt::print("\n");
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5;
  std::vector<Case> cases;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--model")) cases.push_back({argv[++i], {}});
  }
  if (cases.empty()) {
    cases = {{"cnn", {}},
             {"mlp", {}},
             {"resnet18", {{"image_size", "32"}, {"width", "0.25"}, {"classes", "10"}}}};
  }
  fmt::print("Repeated profiles of tiny zoo models, one thread, {} profiles each (target: agree within 10%)\n\n", runs);
  for (const Case& c : cases) runCase(c, runs);
  return 0;
}
