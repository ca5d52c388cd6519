// Random chains for partitioner tests: layer times, activation sizes and
// memory drawn from a seeded generator, so failures reproduce.
#pragma once

#include <cstdint>
#include <random>

#include "plan/partition/partitioner.h"

namespace hydrozoa::plan::testing {

struct ChainShape {
  int layers = 12;
  std::int64_t microbatches = 4;
  double commScale = 1.0;  // cut costs relative to compute
  bool memory = false;     // add a memory limit that binds
};

inline PartitionProblem randomProblem(std::uint32_t seed, const ChainShape& shape) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> time(0.1, 10.0), ratio(1.5, 2.5), comm(0.0, 3.0);
  PartitionProblem p;
  p.microbatches = shape.microbatches;
  for (int i = 0; i < shape.layers; ++i) {
    const double f = time(rng);
    p.costs.forward.push_back(f);
    p.costs.backward.push_back(f * ratio(rng));
    if (i + 1 < shape.layers) p.costs.cut.push_back(comm(rng) * shape.commScale);
  }
  if (shape.memory) {
    std::uniform_int_distribution<Bytes> params(0, 1000), act(1, 300);
    MemoryCosts m;
    m.runtime = 100;
    Bytes total = 0;
    for (int i = 0; i < shape.layers; ++i) {
      const Bytes out = act(rng);
      m.fixed.push_back(params(rng));
      m.stashed.push_back(out + act(rng));
      m.workspace.push_back(act(rng));
      m.input.push_back(i == 0 ? act(rng) : m.stashed[i - 1] - act(rng) / 2);  // <= previous stash
      if (m.input.back() < 0) m.input.back() = 0;
      total += m.fixed.back() + shape.microbatches * m.stashed.back();
    }
    p.memory = m;
    p.memory_limit = m.runtime + total / 3;  // tight enough to rule out 1-2 stages
  }
  return p;
}

}  // namespace hydrozoa::plan::testing
