// The single-process reference: one process, the whole model, gradient
// accumulation over exactly the microbatches the pipeline runs (same data
// order, same sizes, same loss weights, same dropout seeds; NOTE
// [Equivalence with one process] in stage.h). The correctness tests compare
// every hybrid run against it, step by step.
#pragma once

#include <cstdint>
#include <vector>

#include "cluster/job_spec.h"
#include "core/status.h"
#include "model/model.h"

namespace hydrozoa::runtime {

struct ReferenceOptions {
  cluster::JobSpec job;
  int replicas = 1;                  // A: how the steps' samples are split
  std::int64_t microbatch_size = 1;  // m
  std::int64_t steps = 1;            // global steps to run
};

struct ReferenceRun {
  std::vector<double> losses;  // mean loss of each step
  model::Model model;          // the final weights
};

Result<ReferenceRun> trainReference(const ReferenceOptions& options);

}  // namespace hydrozoa::runtime
