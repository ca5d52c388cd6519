// PipeDream's optimizer (seed 003 §2.4.1, seed 002 ch. 5): the hierarchical
// dynamic program over a machine hierarchy that splits a model into
// pipeline stages, each replicated over some machines (data parallelism
// within the stage), so that the slowest stage is as fast as it can be.
//
// Level k (1 = the lowest) has m_k components of level k − 1 joined by links
// of bandwidth B_k; a level-0 component is one machine. With N the layers,
//
//   T^k(i→j, m) = (A^{k−1}(i→j, m_{k−1}) + 4(m − 1)|w_{i..j}| / (B_k · m) / m_{k−1}) / m
//   A^k(i→j, m) = min_{i≤s<j, 1≤m'<m} max(A^k(i→s, m − m'), T^k(s+1→j, m')
//                                         [, 2a_s / (B_k m') / r, 2a_j / (B_k m') / r])
//
// A^0(i→j, 1) = Σ compute of layers i..j (forward + backward), A^k(i→j, 1) =
// A^{k−1}(i→j, m_{k−1}); the single-stage A^k(i→j, m) is T^k(i→j, m). The
// activation transfers (the bracketed terms, ÷ the compression ratio r) count
// only with an activation compression ratio, and the memory constraint
// (a stage of m' replicas with m machines left before it stashes
// ⌈(m_k − m)/m'⌉ microbatches of its activations and parameters) only with a
// memory limit: both as PipeDream's published optimizer does
// (optimizer/optimizer_graph_hierarchical.py), whose predictions this
// reproduces. The places to cut are the states: for a chain of layers, the
// boundary after each layer; for PipeDream's graph.txt, as PipeDream has
// them, the antichains of the graph reachable from its first source
// (pipeDreamStates), with every state's compute, activations and
// parameters those of all nodes before it.
//
// Time O(N³ m_k²) per level; pure C++.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "profile/pipedream.h"
#include "profile/profile.h"

namespace hydrozoa::plan {

struct PipeDreamLevel {
  int machines = 1;             // m_k: components of the level below
  BytesPerSecond bandwidth = 0; // B_k between them
};

struct PipeDreamOptions {
  std::vector<PipeDreamLevel> levels;  // the lowest first
  bool straight = false;               // no replication: one machine per stage
  std::optional<Bytes> memory_limit;   // per machine (the memory constraint)
  std::optional<double> activation_compression;  // counts activation transfers, ÷ this
  bool fewer_machines = false;         // a level may leave machines unused when that is faster
};

// The states the DP cuts at, in a topological order: per state, the seconds
// of forward + backward compute, the bytes of activations and of parameters
// of every node before the cut (it included), and the bytes crossing it.
// A stage from after state i−1 through state j holds the differences.
struct PipeDreamStates {
  std::vector<double> compute, activation, parameters;  // up to and including the state
  std::vector<double> forward;  // the forward part of compute (empty: not known)
  std::vector<double> boundary;
  // Per state, the states before it (transitively, ascending); empty for a
  // chain, where they are all earlier states.
  std::vector<std::vector<int>> predecessors;
  std::vector<std::string> names;  // of each state, for display
  int size() const { return static_cast<int>(compute.size()); }
};

// A chain: per layer, its compute, activations, parameters and the bytes
// crossing a boundary after it.
PipeDreamStates chainStates(const std::vector<double>& compute, const std::vector<double>& activation,
                            const std::vector<double>& parameters, const std::vector<double>& boundary,
                            std::vector<std::string> names = {}, const std::vector<double>& forward = {});

// A profile's first measurement as a chain of its layers.
// At the profile's measurement of `microbatch_size` (0: its first).
// REQUIRES: the profile has that measurement.
PipeDreamStates pipeDreamChain(const profile::Profile& profile, std::int64_t microbatch_size = 0);

// graph.txt's cuts as PipeDream's optimizer has them: inputs ("Input..."
// sources) and "__getitem__" sinks removed, the antichain DAG from the first
// source, each state's augmented antichain (the nodes whose outputs cross
// it) giving the bytes crossing it.
Result<PipeDreamStates> pipeDreamStates(const profile::PipeDreamGraph& graph);

struct PipeDreamStage {
  int first_layer = 0, last_layer = 0;  // states (a chain's layers)
  int replicas = 1;       // components of the level below
  Seconds compute = 0;    // its layers' compute (forward + backward, one microbatch)
};

struct PipeDreamResult {
  // Per level, the highest first: the stages it splits each component of
  // the level above into (at the top, the whole model).
  std::vector<std::vector<PipeDreamStage>> levels;
  Seconds time_per_stage = 0;    // A^L(0→N, m_L): the slowest stage's time per microbatch
  Seconds single_machine = 0;    // Σ compute
  Seconds data_parallel = 0;     // every machine a data-parallel replica, per microbatch
};

// REQUIRES: options.levels non-empty, every machines >= 1 and bandwidth > 0.
Result<PipeDreamResult> planPipeDream(const PipeDreamStates& states, const PipeDreamOptions& options);

// The result as `hydrozoa plan --planner pipedream` prints it.
std::string renderPipeDream(const PipeDreamResult& result, const PipeDreamOptions& options,
                            const PipeDreamStates& states);

}  // namespace hydrozoa::plan
