// The pipeline runtime model of Hydrozoa (Hydrozoa §3.3, appendix A.1;
// docs/plan.md): the time of one minibatch of M microbatches through shards
// p_1..p_k under the GPipe schedule (all forwards, then all backwards):
//
//   R = Σ_i (f_{p_i} + b_{p_i}) + 2 Σ_{i≥2} c_{p_i} + (M − 1)(t_k + r_1)
//   t_k = max(max_j f_{p_j}, max_{j≥2} c_{p_j})
//   r_1 = max(max_j b_{p_j}, max_{j≥2} c_{p_j})
//
// where c_{p_i} = a_{last(p_{i−1})} / D is the transfer into shard i.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/units.h"

namespace hydrozoa::plan {

// Per-layer costs of a chain at one microbatch size, in seconds.
struct ChainCosts {
  std::vector<Seconds> forward;   // f_i
  std::vector<Seconds> backward;  // b_i
  std::vector<Seconds> cut;       // cut[u]: transfer time if a boundary follows layer u (a_u / D); size L−1

  int numLayers() const { return static_cast<int>(forward.size()); }
};

// A partition of layers 0..L−1 into consecutive stages: stage s covers
// layers [first[s], first[s+1]) (the last one to the end).
struct Partition {
  std::vector<int> first;  // first[0] == 0, strictly ascending

  int numStages() const { return static_cast<int>(first.size()); }
  int lastLayer(int stage, int numLayers) const {
    return stage + 1 < numStages() ? first[stage + 1] - 1 : numLayers - 1;
  }
  std::string toString(int numLayers) const;  // "0-3,4-9,10-17"
  bool operator==(const Partition& o) const { return first == o.first; }
};

// The terms of R for one partition.
struct PipelineTime {
  Seconds total = 0;         // R
  Seconds compute = 0;       // Σ (f + b)
  Seconds communication = 0; // 2 Σ c
  Seconds t_k = 0;           // forward interval between microbatches at the last stage
  Seconds r_1 = 0;           // backward interval at the first stage
  Seconds max_forward = 0, max_backward = 0, max_cut = 0;
};

// R for `partition` with `microbatches` microbatches. REQUIRES: the
// partition is valid for `costs` and microbatches >= 1.
PipelineTime pipelineTime(const ChainCosts& costs, const Partition& partition, std::int64_t microbatches);

// Fraction of the k stages' time spent not computing: 1 − M·Σ(f+b) / (k·R).
double bubbleFraction(const PipelineTime& time, int stages, std::int64_t microbatches);

}  // namespace hydrozoa::plan
