#include "runtime/optimizer.h"

#include <cmath>

namespace hydrozoa::runtime {
namespace {

// libtorch keys an optimizer's per-parameter state by the parameter's
// TensorImpl (a string of its address before 2.0).
void* key(const torch::Tensor& p) { return p.unsafeGetTensorImpl(); }

const torch::Tensor* find(const ParamState& s, const std::string& name) {
  for (const auto& [n, t] : s) {
    if (n == name) return &t;
  }
  return nullptr;
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const cluster::OptimizerSpec& s,
                                                       std::vector<torch::Tensor> params) {
  if (s.name == "adam") {
    return std::make_unique<torch::optim::Adam>(
        params,
        torch::optim::AdamOptions(s.lr).betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(s.weight_decay));
  }
  return std::make_unique<torch::optim::SGD>(
      params,
      torch::optim::SGDOptions(s.lr).momentum(s.momentum).nesterov(s.nesterov).weight_decay(s.weight_decay));
}

double scheduledLearningRate(const cluster::OptimizerSpec& o, const cluster::LrScheduleSpec& s, std::int64_t step,
                             std::int64_t epoch, std::int64_t totalSteps) {
  if (s.warmup_steps > 0 && step < s.warmup_steps) return o.lr * static_cast<double>(step + 1) / s.warmup_steps;
  if (s.name == "step") {
    return o.lr * std::pow(s.gamma, static_cast<double>(epoch / std::max<std::int64_t>(1, s.step_epochs)));
  }
  if (s.name == "cosine") {
    const double span = std::max<std::int64_t>(1, totalSteps - s.warmup_steps);
    const double progress = std::min(1.0, static_cast<double>(step - s.warmup_steps) / span);
    return s.min_lr + (o.lr - s.min_lr) * 0.5 * (1 + std::cos(M_PI * progress));
  }
  return o.lr;
}

void setLearningRate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) {
    if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&group.options())) sgd->lr(lr);
    if (auto* adam = dynamic_cast<torch::optim::AdamOptions*>(&group.options())) adam->lr(lr);
  }
}

ParamState optimizerStateOf(torch::optim::Optimizer& optimizer, const torch::Tensor& param) {
  ParamState out;
  auto it = optimizer.state().find(key(param));
  if (it == optimizer.state().end()) return out;
  if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(it->second.get())) {
    if (sgd->momentum_buffer().defined()) out.emplace_back("momentum_buffer", sgd->momentum_buffer());
  } else if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(it->second.get())) {
    out.emplace_back("step", torch::tensor(adam->step(), torch::kLong));
    out.emplace_back("exp_avg", adam->exp_avg());
    out.emplace_back("exp_avg_sq", adam->exp_avg_sq());
  }
  return out;
}

void clearOptimizerStateOf(torch::optim::Optimizer& optimizer, const torch::Tensor& param) {
  optimizer.state().erase(key(param));
}

void setOptimizerStateOf(torch::optim::Optimizer& optimizer, const torch::Tensor& param, const ParamState& state) {
  if (state.empty()) return;
  if (dynamic_cast<torch::optim::SGD*>(&optimizer)) {
    auto s = std::make_unique<torch::optim::SGDParamState>();
    if (const auto* m = find(state, "momentum_buffer")) s->momentum_buffer(m->clone());
    optimizer.state()[key(param)] = std::move(s);
  } else if (dynamic_cast<torch::optim::Adam*>(&optimizer)) {
    auto s = std::make_unique<torch::optim::AdamParamState>();
    if (const auto* t = find(state, "step")) s->step(t->item<std::int64_t>());
    if (const auto* t = find(state, "exp_avg")) s->exp_avg(t->clone());
    if (const auto* t = find(state, "exp_avg_sq")) s->exp_avg_sq(t->clone());
    optimizer.state()[key(param)] = std::move(s);
  }
}

}  // namespace hydrozoa::runtime
