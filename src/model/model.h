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

// One partitionable layer.
class LayerModule : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
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

// Random inputs and labels of the right shapes and types for `microbatch`
// samples (profiling, synthetic data).
torch::Tensor syntheticInput(const InputSpec& input, std::int64_t microbatch, torch::Generator gen = {});
torch::Tensor syntheticLabels(const InputSpec& input, const TaskSpec& task, std::int64_t microbatch,
                              torch::Generator gen = {});

}  // namespace hydrozoa::model
