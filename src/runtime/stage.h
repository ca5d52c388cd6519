// A pipeline stage's layers, run one microbatch at a time.
//
// Forward runs every layer on a detached copy of its input, so each layer
// has its own autograd graph: backward then proceeds layer by layer, and the
// moment a layer's backward of the step's final microbatch returns, its
// gradients are final (GradientSync starts their allreduce). What backward
// needs (each layer's input and output) is cached per microbatch and freed
// by its backward.
//
// NOTE [Equivalence with one process]
// The runtime must be the same training as one process doing gradient
// accumulation over the same microbatches. Three choices make it so:
//  - the loss of a microbatch of n samples is its mean loss times n / N,
//    with N the samples of the whole step (all replicas), so gradients
//    summed over microbatches and replicas are those of the step's mean loss,
//    short last steps included;
//  - before each layer's forward, the RNG is seeded from (seed, step,
//    microbatch of the step, layer), so dropout draws the same masks however
//    the layers are split into stages;
//  - layers are initialised from per-layer seeds (model/model.h).
// runtime/reference.h is that one process; the tests compare the two.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "model/model.h"
#include "runtime/precision.h"
#include "runtime/trace.h"

namespace hydrozoa::runtime {

// The RNG seed of layer `layer` (global index) for microbatch `microbatch`
// (its index within the whole step) of global step `step`.
std::uint64_t layerSeed(std::uint64_t seed, std::int64_t step, std::int64_t microbatch, int layer);

class StageExecutor {
 public:
  StageExecutor(model::Model model, bool lastStage, std::uint64_t seed, TraceRecorder& trace);

  model::Model& model() { return model_; }
  bool lastStage() const { return last_; }

  // NOTE [Recomputation]
  // With recompute on, forward keeps only the stage's input (and the last
  // stage's labels) of a microbatch, running without autograd; its backward
  // runs the forward again with autograd first. The layers are re-seeded as
  // before (the same dropout masks) and the stage's buffers (BatchNorm's
  // running statistics) restored after the second forward, so the training
  // is the same, with one microbatch's activations held at a time instead of
  // every stashed microbatch's.
  void setRecompute(bool on) { recompute_ = on; }

  // NOTE [Mixed precision] (runtime/precision.h): the passes under autocast
  // to `type` on `device` (nullopt: fp32).
  void setPrecision(std::optional<at::ScalarType> type, c10::DeviceType device) {
    autocast_ = type;
    autocastDevice_ = device;
  }

  // NOTE [Loss scaling] (runtime/loss_scale.h): the last stage's backward
  // starts from its weighted loss times `scale` (fp16; 1 otherwise).
  void setLossScale(double scale) { lossScale_ = scale; }

  // Forward of microbatch `mb`. A non-last stage returns its output (to send
  // on). The last stage computes the loss against `labels`, weighted by
  // `weight` (n / N, see the NOTE), keeps it for backward, returns the
  // output, and stores the unweighted mean loss in *loss.
  torch::Tensor forward(int mb, const torch::Tensor& input, std::int64_t step, std::int64_t stepMicrobatch,
                        const torch::Tensor& labels = {}, double weight = 1.0, double* loss = nullptr);

  // Backward of microbatch `mb` from the gradient of its output (ignored on
  // the last stage). Returns the gradient of its input (undefined when the
  // input needs none, e.g. data). `onLayerDone(i)` is called after each
  // stage-local layer i, last layer first.
  torch::Tensor backward(int mb, const torch::Tensor& gradOutput,
                         const std::function<void(int)>& onLayerDone = nullptr);

  // Forward without autograd, in evaluation mode (dropout off, BatchNorm's
  // running statistics).
  torch::Tensor evaluate(const torch::Tensor& input);

  std::vector<std::vector<torch::Tensor>> layerParameters() const;
  size_t cachedMicrobatches() const { return cache_.size(); }

 private:
  struct Cached {
    std::vector<torch::Tensor> inputs, outputs;
    torch::Tensor loss;
    // Recomputed: what runs the forward again.
    bool recompute = false;
    torch::Tensor input, labels;
    std::int64_t step = 0, stepMicrobatch = 0;
    double weight = 1;
  };
  // The forward pass with autograd, its graph in *c; returns the output.
  torch::Tensor forwardGraph(const torch::Tensor& input, std::int64_t step, std::int64_t stepMicrobatch,
                             const torch::Tensor& labels, double weight, double* loss, Cached* c);
  model::Model model_;
  bool last_;
  std::uint64_t seed_;
  TraceRecorder& trace_;
  std::map<int, Cached> cache_;
  bool recompute_ = false;
  std::optional<at::ScalarType> autocast_;
  c10::DeviceType autocastDevice_ = c10::DeviceType::CPU;
  double lossScale_ = 1;
};

}  // namespace hydrozoa::runtime
