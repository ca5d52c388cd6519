// The data a job trains on, as the coordinator checks it and every worker
// that reads inputs or labels opens it: the job spec's data section, the
// model's sequence length for text, and the model's input and task for
// synthetic data.
#pragma once

#include "cluster/job_spec.h"
#include "data/dataset.h"
#include "model/arch.h"

namespace hydrozoa::runtime {

inline data::DataSpec jobDataSpec(const cluster::JobSpec& job, const model::InputSpec& input, const model::TaskSpec& task) {
  data::DataSpec ds;
  ds.kind = job.dataset;
  ds.path = job.data_path;
  ds.seq_len = input.kind == model::InputKind::kTokens ? input.shape.at(0) : 0;
  ds.synthetic_train = job.synthetic_train;
  ds.synthetic_test = job.synthetic_test;
  ds.synthetic_input = input;
  ds.synthetic_task = task;
  ds.seed = job.seed;
  return ds;
}

}  // namespace hydrozoa::runtime
