#include "model/torchscript.h"

#include <fmt/format.h>
#include <torch/script.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace hydrozoa::model {
namespace {

// A TorchScript submodule as a layer. Its parameters are registered on the
// nn::Module side as the same tensors, so optimizers and checkpoints that
// walk parameters() update the script module itself.
class ScriptLayer : public LayerModule {
 public:
  explicit ScriptLayer(torch::jit::Module m) : m_(std::move(m)) {
    for (const auto& p : m_.named_parameters(/*recurse=*/true)) {
      register_parameter(sanitize(p.name), p.value, p.value.requires_grad());
    }
    for (const auto& b : m_.named_buffers(/*recurse=*/true)) register_buffer(sanitize(b.name), b.value);
  }
  torch::Tensor forward(torch::Tensor x) override { return m_.forward({x}).toTensor(); }
  void train(bool on) override {
    torch::nn::Module::train(on);
    m_.train(on);
  }

 private:
  static std::string sanitize(std::string name) {
    for (char& c : name) {
      if (c == '.') c = '_';
    }
    return name;
  }
  torch::jit::Module m_;
};

std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// TorchScript interpreter errors carry a traceback; the cause is the line
// after the last "RuntimeError: " (or the first line when there is none).
std::string cause(const std::string& what) {
  const auto at = what.rfind("RuntimeError: ");
  return firstLine(at == std::string::npos ? what : what.substr(at + 14));
}

Result<Shape> parseShape(const std::string& text) {
  Shape shape;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t x = text.find('x', start);
    const std::string part = text.substr(start, x == std::string::npos ? std::string::npos : x - start);
    char* end = nullptr;
    const long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v <= 0) {
      return invalidArgument(fmt::format("input_shape={} must be positive sizes joined by x, e.g. 1x28x28", text));
    }
    shape.push_back(v);
    if (x == std::string::npos) break;
    start = x + 1;
  }
  return shape;
}

}  // namespace

Result<Model> loadTorchScriptModel(const ModelSpec& spec, const BuildOptions& options) {
  const std::string& path = spec.name;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return notFound(fmt::format("{}: no such TorchScript file (and not a zoo model; see `hydrozoa models`)", path));
  }
  if (!std::ifstream(path).good()) return ioError(fmt::format("{}: cannot be read (check its permissions)", path));

  std::map<std::string, std::string> opts;
  for (const auto& [k, v] : spec.options) opts[k] = v;
  const std::string hint = fmt::format("; a TorchScript model needs -O input_shape=CxHxW (e.g. -O input_shape=1x28x28)");
  for (const auto& [k, v] : opts) {
    if (k != "input_shape" && k != "input_dtype" && k != "vocab" && k != "task" && k != "classes") {
      return invalidArgument(fmt::format("{}: unknown option \"{}\" (TorchScript options: input_shape, input_dtype, "
                                         "vocab, task, classes)",
                                         path, k));
    }
  }
  if (!opts.count("input_shape")) return invalidArgument(path + ": missing option input_shape" + hint);
  Model m;
  m.name = path;
  HZ_ASSIGN_OR_RETURN(m.input.shape, parseShape(opts["input_shape"]));
  const std::string dtype = opts.count("input_dtype") ? opts["input_dtype"] : "float";
  if (dtype == "long") {
    m.input.kind = InputKind::kTokens;
    if (!opts.count("vocab")) return invalidArgument(path + ": input_dtype=long needs vocab=N (the token id range)");
    m.input.vocab = std::atoll(opts["vocab"].c_str());
    if (m.input.vocab < 2) return invalidArgument(path + ": vocab must be at least 2");
  } else if (dtype != "float") {
    return invalidArgument(fmt::format("{}: input_dtype={} must be float or long", path, dtype));
  }
  const std::string task = opts.count("task") ? opts["task"] : "classification";
  if (task == "language_model") {
    m.task.kind = TaskKind::kLanguageModel;
  } else if (task != "classification") {
    return invalidArgument(fmt::format("{}: task={} must be classification or language_model", path, task));
  }

  torch::jit::Module module;
  try {
    module = torch::jit::load(path);
  } catch (const c10::Error& e) {
    return parseError(fmt::format("{}: not a TorchScript module libtorch can load ({}); save one in Python with "
                                  "torch.jit.script(model).save(path)",
                                  path, cause(e.what_without_backtrace())));
  }
  std::vector<std::pair<std::string, torch::jit::Module>> children;
  for (const auto& child : module.named_children()) children.emplace_back(child.name, child.value);
  if (children.empty()) children.emplace_back("module", module);
  m.total_layers = static_cast<int>(children.size());
  const int last = options.last < 0 ? m.total_layers - 1 : options.last;
  if (options.first < 0 || options.first > last || last >= m.total_layers) {
    return invalidArgument(fmt::format("{}: layers {}-{} are outside the model's 0-{}", path, options.first, last,
                                       m.total_layers - 1));
  }
  // Run one sample through the whole chain: a layer that cannot take its
  // predecessor's output is reported now, not in the middle of training.
  {
    torch::NoGradGuard guard;
    torch::Tensor x = syntheticInput(m.input, 1);
    for (auto& [name, child] : children) {
      c10::IValue out;
      try {
        out = child.forward({x});
      } catch (const std::exception& e) {
        return invalidArgument(fmt::format("{}: layer \"{}\" fails on an input of shape {} ({}); check input_shape",
                                           path, name, shapeString(x.sizes().vec()), cause(e.what())));
      }
      if (!out.isTensor()) {
        return invalidArgument(fmt::format("{}: layer \"{}\" returns {}, not one tensor; every top-level child must map "
                                           "one tensor to one tensor",
                                           path, name, out.tagKind()));
      }
      x = out.toTensor();
    }
    const std::int64_t outputs = x.size(-1);
    m.task.classes = opts.count("classes") ? std::atoll(opts["classes"].c_str()) : outputs;
    if (m.task.classes != outputs) {
      return invalidArgument(fmt::format("{}: classes={} but the model outputs {} values per sample", path,
                                         m.task.classes, outputs));
    }
  }
  m.first = options.first;
  for (int i = options.first; i <= last; ++i) {
    m.layers.push_back({children[i].first, "script", std::make_shared<ScriptLayer>(children[i].second)});
  }
  for (const auto& [k, v] : opts) m.options.emplace_back(k, v);
  return m;
}

}  // namespace hydrozoa::model
