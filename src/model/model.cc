#include "model/model.h"

#include <fmt/format.h>

#include "model/layers.h"
#include "model/tensor_parallel.h"
#include "model/torchscript.h"

namespace hydrozoa::model {

torch::Tensor Model::forward(torch::Tensor x) {
  for (auto& layer : layers) x = layer.module->forward(x);
  return x;
}

std::vector<torch::Tensor> Model::parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& layer : layers) {
    for (const auto& p : layer.module->parameters()) out.push_back(p);
  }
  return out;
}

std::int64_t Model::parameterCount() const {
  std::int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

void Model::train(bool on) {
  for (auto& layer : layers) layer.module->train(on);
}

void Model::to(const torch::Device& device) {
  for (auto& layer : layers) layer.module->to(device);
}

namespace {

Status checkRange(const BuildOptions& o, int total, int* last) {
  *last = o.last < 0 ? total - 1 : o.last;
  if (o.first < 0 || o.first > *last || *last >= total) {
    return invalidArgument(fmt::format("layers {}-{} are outside the model's 0-{}", o.first, *last, total - 1));
  }
  return Status();
}

}  // namespace

Result<Model> buildModel(const ModelSpec& spec, const BuildOptions& options) {
  if (isTorchScriptPath(spec.name)) {
    if (options.tensor && options.tensor->size() > 1) {
      return invalidArgument(fmt::format("tensor parallelism {} needs a zoo transformer, and {} is a TorchScript "
                                         "file: use tensor parallelism 1",
                                         options.tensor->size(), spec.name));
    }
    return loadTorchScriptModel(spec, options);
  }
  HZ_ASSIGN_OR_RETURN(Arch arch, buildArch(spec));
  return buildFromArch(std::move(arch), options);
}

Result<Model> buildFromArch(Arch arch, const BuildOptions& options) {
  Model m;
  m.name = arch.name;
  m.options = arch.options;
  m.input = arch.input;
  m.task = arch.task;
  m.total_layers = static_cast<int>(arch.layers.size());
  int last = 0;
  HZ_RETURN_IF_ERROR(checkRange(options, m.total_layers, &last));
  const bool split = options.tensor && options.tensor->size() > 1;
  if (split) HZ_RETURN_IF_ERROR(checkTensorParallel(arch, options.tensor->size()));
  m.first = options.first;
  m.tensor = options.tensor;
  for (int i = options.first; i <= last; ++i) {
    // Each layer from its own seed: a stage's weights do not depend on which
    // other layers were built.
    torch::manual_seed(options.seed * 1000003ULL + static_cast<std::uint64_t>(i) * 7919ULL + 17);
    const LayerSpec& spec = arch.layers[i];
    std::shared_ptr<LayerModule> module = makeLayer(spec);
    if (split) module = splitLayer(spec, module, options.tensor);
    m.layers.push_back({spec.name, kindName(spec.params), std::move(module)});
  }
  m.sharded_logits = split && m.layers.back().kind == "lm_head";
  m.arch = std::move(arch);
  return m;
}

torch::Tensor taskLoss(const TaskSpec& task, const torch::Tensor& output, const torch::Tensor& labels) {
  if (task.kind == TaskKind::kLanguageModel) {
    return torch::nn::functional::cross_entropy(output.reshape({-1, output.size(-1)}), labels.reshape({-1}));
  }
  return torch::nn::functional::cross_entropy(output, labels);
}

torch::Tensor modelLoss(const Model& model, const torch::Tensor& output, const torch::Tensor& labels) {
  if (model.sharded_logits) return vocabParallelCrossEntropy(output, labels, *model.tensor);
  return taskLoss(model.task, output, labels);
}

torch::Tensor modelPredictions(const Model& model, const torch::Tensor& output) {
  if (model.sharded_logits) return vocabParallelArgmax(output, *model.tensor);
  return output.argmax(-1);
}

torch::Tensor syntheticInput(const InputSpec& input, std::int64_t microbatch, torch::Generator gen) {
  std::vector<std::int64_t> shape = {microbatch};
  shape.insert(shape.end(), input.shape.begin(), input.shape.end());
  if (input.kind == InputKind::kTokens) return torch::randint(0, input.vocab, shape, gen, torch::kLong);
  return torch::randn(shape, gen);
}

torch::Tensor syntheticLabels(const InputSpec& input, const TaskSpec& task, std::int64_t microbatch,
                              torch::Generator gen) {
  if (task.kind == TaskKind::kLanguageModel) {
    return torch::randint(0, task.classes, {microbatch, input.shape.at(0)}, gen, torch::kLong);
  }
  return torch::randint(0, task.classes, {microbatch}, gen, torch::kLong);
}

}  // namespace hydrozoa::model
