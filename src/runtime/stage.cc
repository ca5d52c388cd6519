#include "runtime/stage.h"

#include "core/status.h"

namespace hydrozoa::runtime {

std::uint64_t layerSeed(std::uint64_t seed, std::int64_t step, std::int64_t microbatch, int layer) {
  // splitmix64 over the four values: well mixed, cheap, the same everywhere.
  std::uint64_t x = seed;
  for (std::uint64_t v : {static_cast<std::uint64_t>(step), static_cast<std::uint64_t>(microbatch),
                          static_cast<std::uint64_t>(layer)}) {
    x += 0x9e3779b97f4a7c15ULL + v;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
  }
  return x >> 1;  // torch seeds are taken as int64 in places
}

StageExecutor::StageExecutor(model::Model model, bool lastStage, std::uint64_t seed, TraceRecorder& trace)
    : model_(std::move(model)), last_(lastStage), seed_(seed), trace_(trace) {
  model_.train(true);
}

torch::Tensor StageExecutor::forward(int mb, const torch::Tensor& input, std::int64_t step,
                                     std::int64_t stepMicrobatch, const torch::Tensor& labels, double weight,
                                     double* loss) {
  Cached c;
  torch::Tensor out;
  if (recompute_) {
    torch::NoGradGuard guard;
    out = forwardGraph(input, step, stepMicrobatch, labels, weight, loss, &c);
    c = Cached();
    c.recompute = true;
    c.input = input;
    c.labels = labels;
    c.step = step;
    c.stepMicrobatch = stepMicrobatch;
    c.weight = weight;
  } else {
    out = forwardGraph(input, step, stepMicrobatch, labels, weight, loss, &c);
  }
  cache_[mb] = std::move(c);
  return out;
}

torch::Tensor StageExecutor::forwardGraph(const torch::Tensor& input, std::int64_t step, std::int64_t stepMicrobatch,
                                          const torch::Tensor& labels, double weight, double* loss, Cached* cached) {
  Cached& c = *cached;
  const Autocast autocast(autocast_, autocastDevice_);
  torch::Tensor x = input;
  const int L = static_cast<int>(model_.layers.size());
  for (int i = 0; i < L; ++i) {
    torch::Tensor in = x.detach();
    // Layer 0 of the model reads data, which needs no gradient; every other
    // layer's input gradient goes to the layer (or stage) before it.
    if ((model_.first + i) > 0 && in.is_floating_point()) in.requires_grad_(true);
    torch::manual_seed(layerSeed(seed_, step, stepMicrobatch, model_.first + i));
    torch::Tensor y = model_.layers[i].module->forward(in);
    c.inputs.push_back(in);
    c.outputs.push_back(y);
    x = y;
  }
  if (last_) {
    HZ_CHECK_MSG(labels.defined(), "the last stage needs labels");
    const torch::Tensor mean = model::modelLoss(model_, x, labels);
    if (loss) *loss = mean.item<double>();
    c.loss = mean * weight;
  }
  return x.detach();
}

torch::Tensor StageExecutor::backward(int mb, const torch::Tensor& gradOutput,
                                      const std::function<void(int)>& onLayerDone) {
  auto it = cache_.find(mb);
  HZ_CHECK_MSG(it != cache_.end(), "backward of a microbatch that was not run forward");
  Cached c = std::move(it->second);
  cache_.erase(it);
  // Recomputed: the forward again, with autograd (NOTE [Recomputation]).
  // The buffers it updates (BatchNorm's running statistics) are put back
  // once the backward pass is done: autograd holds them until then.
  std::vector<torch::Tensor> buffers, kept;
  if (c.recompute) {
    for (const auto& layer : model_.layers) {
      for (const torch::Tensor& b : layer.module->buffers()) {
        buffers.push_back(b);
        kept.push_back(b.clone());
      }
    }
    Cached again;
    forwardGraph(c.input, c.step, c.stepMicrobatch, c.labels, c.weight, nullptr, &again);
    c = std::move(again);
  }
  const int L = static_cast<int>(model_.layers.size());
  torch::Tensor grad = gradOutput;
  for (int i = L - 1; i >= 0; --i) {
    if (i == L - 1 && last_) {
      (lossScale_ == 1 ? c.loss : c.loss * lossScale_).backward();
    } else if (c.outputs[i].requires_grad()) {
      c.outputs[i].backward(grad);
    }
    grad = c.inputs[i].requires_grad() ? c.inputs[i].grad() : torch::Tensor();
    c.inputs[i] = torch::Tensor();
    c.outputs[i] = torch::Tensor();
    if (onLayerDone) onLayerDone(i);
  }
  torch::NoGradGuard guard;
  for (size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(kept[i]);
  return grad;
}

torch::Tensor StageExecutor::evaluate(const torch::Tensor& input) {
  torch::NoGradGuard guard;
  const Autocast autocast(autocast_, autocastDevice_);
  model_.train(false);
  torch::Tensor y = model_.forward(input);
  model_.train(true);
  return y;
}

std::vector<std::vector<torch::Tensor>> StageExecutor::layerParameters() const {
  std::vector<std::vector<torch::Tensor>> out;
  for (const auto& layer : model_.layers) out.push_back(layer.module->parameters());
  return out;
}

}  // namespace hydrozoa::runtime
