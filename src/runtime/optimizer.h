// Optimizers and learning-rate schedules for a stage's parameters.
//
// The optimizers are libtorch's (SGD with momentum, Nesterov and weight
// decay; Adam), so a stage that owns some parameters updates them exactly as
// one process owning all of them would: both are elementwise.
// Checkpoints store each parameter's optimizer state on its own
// (optimizerStateOf), so a checkpoint does not depend on the partition.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cluster/job_spec.h"

namespace hydrozoa::runtime {

std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const cluster::OptimizerSpec& spec,
                                                       std::vector<torch::Tensor> params);

// The learning rate for 0-based global step `step`, in 0-based `epoch`, of a
// run of `totalSteps` (linear warm-up, then constant, step decay per epochs,
// or cosine to min_lr). The epoch is given, not derived: a job whose
// replicas change has epochs of different lengths (cluster/scaling/epochs.h).
double scheduledLearningRate(const cluster::OptimizerSpec& optimizer, const cluster::LrScheduleSpec& schedule,
                             std::int64_t step, std::int64_t epoch, std::int64_t totalSteps);

void setLearningRate(torch::optim::Optimizer& optimizer, double lr);

// Named state tensors of one parameter ("momentum_buffer"; "step",
// "exp_avg", "exp_avg_sq"); empty before its first step.
using ParamState = std::vector<std::pair<std::string, torch::Tensor>>;
ParamState optimizerStateOf(torch::optim::Optimizer& optimizer, const torch::Tensor& param);
void setOptimizerStateOf(torch::optim::Optimizer& optimizer, const torch::Tensor& param, const ParamState& state);
// Drops `param`'s state (the optimizer starts it afresh at its next step).
void clearOptimizerStateOf(torch::optim::Optimizer& optimizer, const torch::Tensor& param);

}  // namespace hydrozoa::runtime
