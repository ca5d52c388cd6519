// Import of PipeDream profiles (graph.txt, as written by PipeDream's
// profiler), so users who already profiled with PipeDream plan directly.
//
// Node lines:  "<id> -- <description> -- forward_compute_time=<ms>,
//               backward_compute_time=<ms>, activation_size=<bytes>,
//               parameter_size=<bytes>[ -- stage_id=<n>]"
//   where activation_size may be a list "[a; b; ...]" (summed).
// Edge lines:  a tab, then "<src id> -- <dst id>".
//
// The chain is the nodes in topological order (ties keep file order). Graph
// inputs (sources described "Input...", or without compute or parameters)
// are the data batch: dropped from the chain, their activations counted as
// stage 0's input. A stage
// boundary after position u sends the activations of every node at or before
// u that has a consumer after u, so skip connections are accounted for.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "profile/profile.h"

namespace hydrozoa::profile {

struct PipeDreamNode {
  std::string id, description;
  double forward_ms = 0, backward_ms = 0, activation_bytes = 0, parameter_bytes = 0;
  size_t line = 0;
};

// graph.txt as written: its nodes in file order, each node's successors
// (indices into nodes), and a topological order (stable in file order).
struct PipeDreamGraph {
  std::vector<PipeDreamNode> nodes;
  std::vector<std::vector<size_t>> successors;
  std::vector<size_t> order;
};

// Parses graph.txt into its DAG; errors name `origin`, the line and the fix
// (a bad line, a number out of range, an unknown node, a cycle).
Result<PipeDreamGraph> parsePipeDreamGraph(const std::string& text, const std::string& origin);

// True when `text` starts like a graph.txt node line.
bool looksLikePipeDreamGraph(const std::string& text);

// Parses graph.txt. Errors name `origin`, the line number and the fix.
// `batchSize` is the microbatch size the times were measured at.
Result<Profile> importPipeDreamGraph(const std::string& text, const std::string& origin, std::int64_t batchSize);

}  // namespace hydrozoa::profile
