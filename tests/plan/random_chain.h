// Random chains for partitioner tests: layer times, activation sizes and
// memory drawn from a seeded generator, so failures reproduce.
#pragma once

#include <cstdint>
#include <random>
#include <utility>

#include "plan/partition/partitioner.h"

namespace hydrozoa::plan::testing {

// p balanced stages of one layer each (forward 1, backward 2, free cuts)
// and the partition with one layer per stage.
inline std::pair<ChainCosts, Partition> balancedChain(int p) {
  ChainCosts c;
  Partition part;
  for (int s = 0; s < p; ++s) {
    c.forward.push_back(1);
    c.backward.push_back(2);
    if (s + 1 < p) c.cut.push_back(0);
    part.first.push_back(s);
  }
  return {c, part};
}

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

// A random pipeline for the flow-shop tests: up to 8 layers with forward,
// backward and (unless the trial is a multiple of 3) transfer times of 0-3,
// a random split into stages and 1 to maxMicrobatches microbatches.
struct RandomPipeline {
  ChainCosts costs;
  Partition partition;
  std::int64_t microbatches = 1;
};

inline RandomPipeline randomPipeline(std::mt19937& rng, int trial, int maxMicrobatches) {
  std::uniform_real_distribution<double> time(0.0, 3.0);
  RandomPipeline r;
  const int L = 1 + static_cast<int>(rng() % 8);
  for (int i = 0; i < L; ++i) {
    r.costs.forward.push_back(time(rng));
    r.costs.backward.push_back(time(rng));
    if (i + 1 < L) r.costs.cut.push_back(trial % 3 == 0 ? 0.0 : time(rng));
  }
  r.partition.first = {0};
  for (int i = 1; i < L; ++i) {
    if (rng() % 2) r.partition.first.push_back(i);
  }
  r.microbatches = 1 + static_cast<std::int64_t>(rng() % static_cast<unsigned>(maxMicrobatches));
  return r;
}

}  // namespace hydrozoa::plan::testing
