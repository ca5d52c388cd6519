// Models as libtorch modules: an ordered chain of layers, each a module with
// one tensor in and one tensor out, so any contiguous range of layers is a
// pipeline stage.
//
// buildModel() realises a zoo Arch (model/arch.h) or imports a TorchScript
// file whose top-level children become the layers. A worker builds only its
// stage's layers (BuildOptions::first/last); each layer is initialised from
// its own seed (seed, layer index), so a stage's weights equal those of the
// same layers in the whole model built with the same seed.
//
// Thread-safety: a Model is used by one thread at a time (libtorch modules).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/arch.h"
#include "model/zoo.h"

namespace hydrozoa::model {

class TensorGroup;  // model/tensor_parallel.h

// Where tensor parallelism cuts a parameter: along dimension `dim`, seen as
// `blocks` equal consecutive blocks (a fused Q, K, V weight: 3), each cut in
// t equal pieces; rank r holds piece r of every block (model/tensor_parallel.h).
struct ShardDim {
  int dim = 0;
  int blocks = 1;
};

// One partitionable layer.
class LayerModule : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
  // How the parameter `name` (as named_parameters() calls it) is cut across
  // a tensor-parallel group; nullopt: every rank holds all of it.
  virtual std::optional<ShardDim> shardDim(const std::string& /*name*/) const { return std::nullopt; }
};

struct Layer {
  std::string name;
  std::string kind;  // arch kind, or "script"
  std::shared_ptr<LayerModule> module;
};

struct Model {
  std::string name;
  Options options;  // resolved
  InputSpec input;
  TaskSpec task;
  std::optional<Arch> arch;  // zoo models only
  int total_layers = 0;      // layers of the whole chain
  int first = 0;             // index of layers[0] in the whole chain
  std::vector<Layer> layers; // the built range
  // Split over a tensor-parallel group (model/tensor_parallel.h); null: whole.
  std::shared_ptr<TensorGroup> tensor;
  // The output is this rank's slice of the vocabulary's logits (a split
  // language-model head): its loss and predictions need the group.
  bool sharded_logits = false;

  // Runs x through the built layers in order.
  torch::Tensor forward(torch::Tensor x);
  std::vector<torch::Tensor> parameters() const;
  std::int64_t parameterCount() const;
  void train(bool on);
  void to(const torch::Device& device);
};

struct BuildOptions {
  std::uint64_t seed = 0;
  int first = 0;   // first layer to build
  int last = -1;   // last layer to build; −1: the last of the chain
  // Split the layers that tensor parallelism splits over this group (its
  // size > 1; model/arch.h checkTensorParallel must pass), the others
  // replicated. Each rank builds every layer whole from the layer's seed and
  // keeps its slice, so the slices are those of the unsplit model's weights.
  std::shared_ptr<TensorGroup> tensor = nullptr;
};

// A zoo model or, when spec.name is a TorchScript file, that file. Errors:
// unknown model or option (zoo), missing/unreadable file or missing
// input_shape option (TorchScript), a layer range outside the chain.
Result<Model> buildModel(const ModelSpec& spec, const BuildOptions& options = {});
// The very layers of `arch` (a zoo model's, or one built by hand, as the
// calibration of predicted profiles does); `arch.name` names the model.
Result<Model> buildFromArch(Arch arch, const BuildOptions& options = {});

// Loss of a model's final output against labels: cross-entropy over classes,
// or over the vocabulary at every position for language models.
torch::Tensor taskLoss(const TaskSpec& task, const torch::Tensor& output, const torch::Tensor& labels);
// The same of `model`'s output: with logits split over the vocabulary, the
// vocabulary-parallel cross-entropy (the same value on every rank).
torch::Tensor modelLoss(const Model& model, const torch::Tensor& output, const torch::Tensor& labels);
// The class (or token) each output row predicts: argmax over the last
// dimension, across the group when the logits are split (the first of equal
// maxima, as argmax).
torch::Tensor modelPredictions(const Model& model, const torch::Tensor& output);

// Random inputs and labels of the right shapes and types for `microbatch`
// samples (profiling, synthetic data).
torch::Tensor syntheticInput(const InputSpec& input, std::int64_t microbatch, torch::Generator gen = {});
torch::Tensor syntheticLabels(const InputSpec& input, const TaskSpec& task, std::int64_t microbatch,
                              torch::Generator gen = {});

}  // namespace hydrozoa::model
