// A synthetic measured profile for search tests: L layers with seeded random
// costs at microbatch sizes 1, 2, 4, 8 (times and activations scale with m).
#pragma once

#include <random>

#include "plan/search.h"
#include "profile/profile.h"

namespace hydrozoa::plan::testing {

inline profile::Profile toyProfile(int layers, std::uint32_t seed = 1, Bytes paramScale = 4 * kMB) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> ms(0.5, 5.0), ratio(1.5, 2.5), frac(0.1, 1.0);
  profile::Profile p;
  p.model = "toy";
  p.source = "measured";
  p.device = "cpu";
  p.device_kind = "cpu";
  p.runtime_bytes = 100 * kMB;
  std::vector<double> f, r, act, params;
  for (int i = 0; i < layers; ++i) {
    const Bytes w = static_cast<Bytes>(frac(rng) * paramScale);
    p.layers.push_back({"layer" + std::to_string(i), "linear", w, w});
    f.push_back(ms(rng));
    r.push_back(ratio(rng));
    act.push_back(frac(rng) * kMB);
  }
  for (std::int64_t m : {1, 2, 4, 8}) {
    profile::Measurement meas;
    meas.microbatch_size = m;
    meas.input_bytes = kMB * m;
    for (int i = 0; i < layers; ++i) {
      const Bytes out = static_cast<Bytes>(act[i] * m);
      meas.layers.push_back({f[i] * m, f[i] * r[i] * m, out, 2 * out, out / 2});
    }
    p.measurements.push_back(meas);
  }
  return p;
}

// Search options pinning one pipeline of two stages on two workers, 1 GB/s,
// global batch 16.
inline SearchOptions twoStagePipeline() {
  SearchOptions o;
  o.workers = 2;
  o.stages = 2;
  o.data_parallel = 1;
  o.bandwidth = 1e9;
  o.global_batch = 16;
  return o;
}

}  // namespace hydrozoa::plan::testing
