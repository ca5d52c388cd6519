#include "model/zoo.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

namespace hydrozoa::model {
namespace {

// Reads a model's options with defaults; remembers which were used so that
// finish() can reject misspelt ones.
class OptionReader {
 public:
  OptionReader(std::string model, const Options& given) : model_(std::move(model)) {
    for (const auto& [k, v] : given) {
      if (given_.count(k)) fail(fmt::format("option {} is given twice", k));
      given_[k] = v;
    }
  }

  std::int64_t integer(const std::string& key, std::int64_t def, std::int64_t min = 1) {
    known_.push_back(key);
    std::int64_t v = def;
    if (auto it = given_.find(key); it != given_.end()) {
      char* end = nullptr;
      v = std::strtoll(it->second.c_str(), &end, 10);
      if (it->second.empty() || *end != '\0') {
        fail(fmt::format("option {}={} is not a whole number", key, it->second));
        return def;
      }
      if (v < min) {
        fail(fmt::format("option {}={} must be at least {}", key, it->second, min));
        return def;
      }
    }
    resolved_.emplace_back(key, std::to_string(v));
    return v;
  }

  double real(const std::string& key, double def, double min, double max) {
    known_.push_back(key);
    double v = def;
    if (auto it = given_.find(key); it != given_.end()) {
      char* end = nullptr;
      v = std::strtod(it->second.c_str(), &end);
      if (it->second.empty() || *end != '\0' || !std::isfinite(v)) {
        fail(fmt::format("option {}={} is not a number", key, it->second));
        return def;
      }
      if (v < min || v > max) {
        fail(fmt::format("option {}={} must be between {} and {}", key, it->second, min, max));
        return def;
      }
    }
    resolved_.emplace_back(key, fmt::format("{}", v));
    return v;
  }

  bool flag(const std::string& key, bool def) {
    known_.push_back(key);
    bool v = def;
    if (auto it = given_.find(key); it != given_.end()) {
      const std::string& s = it->second;
      if (s == "true" || s == "1" || s == "yes") {
        v = true;
      } else if (s == "false" || s == "0" || s == "no") {
        v = false;
      } else {
        fail(fmt::format("option {}={} must be true or false", key, s));
      }
    }
    resolved_.emplace_back(key, v ? "true" : "false");
    return v;
  }

  void fail(const std::string& message) {
    if (status_.ok()) status_ = invalidArgument(fmt::format("model {}: {}", model_, message));
  }

  Status finish() {
    for (const auto& [k, v] : given_) {
      if (std::find(known_.begin(), known_.end(), k) == known_.end()) {
        std::string known;
        for (const auto& n : known_) known += (known.empty() ? "" : ", ") + n;
        fail(fmt::format("unknown option \"{}\" (options of {}: {})", k, model_, known));
      }
    }
    return status_;
  }

  const std::vector<std::string>& known() const { return known_; }
  Options resolved() const { return resolved_; }

 private:
  std::string model_;
  std::map<std::string, std::string> given_;
  std::vector<std::string> known_;
  Options resolved_;
  Status status_;
};

std::int64_t scaled(std::int64_t channels, double width) {
  return std::max<std::int64_t>(1, std::llround(static_cast<double>(channels) * width));
}

void imageInput(OptionReader& o, Arch* arch, std::int64_t size, std::int64_t channels, std::int64_t classes) {
  const std::int64_t s = o.integer("image_size", size);
  const std::int64_t c = o.integer("channels", channels);
  arch->input = {InputKind::kImage, {c, s, s}, 0};
  arch->task = {TaskKind::kClassification, o.integer("classes", classes, 2)};
}

void buildMlp(OptionReader& o, Arch* a) {
  imageInput(o, a, 28, 1, 10);
  const std::int64_t hidden = o.integer("hidden", 256);
  const std::int64_t depth = o.integer("depth", 3);
  const double dropout = o.real("dropout", 0, 0, 0.9);
  std::int64_t in = numel(a->input.shape);
  for (std::int64_t i = 0; i < depth; ++i) {
    LinearSpec l{in, hidden, true, true, i == 0, i == 0 ? 0 : dropout};
    a->layers.push_back({fmt::format("fc{}", i + 1), l});
    in = hidden;
  }
  a->layers.push_back({"out", LinearSpec{in, a->task.classes, true, false, depth == 0, dropout}});
}

// The Fashion-MNIST CNN: two conv+pool layers and two dense layers.
void buildCnn(OptionReader& o, Arch* a) {
  imageInput(o, a, 28, 1, 10);
  const double width = o.real("width", 1.0, 0.01, 64);
  const std::int64_t hidden = o.integer("hidden", 128);
  const double dropout = o.real("dropout", 0, 0, 0.9);
  const std::int64_t c1 = scaled(32, width), c2 = scaled(64, width);
  const std::int64_t c = a->input.shape[0], side = a->input.shape[1] / 4;
  if (side < 1) o.fail("image_size must be at least 4");
  a->layers.push_back({"conv1", ConvSpec{c, c1, 3, 1, 1, true, false, true, 2, 2, 0}});
  a->layers.push_back({"conv2", ConvSpec{c1, c2, 3, 1, 1, true, false, true, 2, 2, 0}});
  a->layers.push_back({"fc1", LinearSpec{c2 * side * side, hidden, true, true, true, 0}});
  a->layers.push_back({"fc2", LinearSpec{hidden, a->task.classes, true, false, false, dropout}});
}

// torchvision's AlexNet (the one-GPU variant, no LRN).
void buildAlexNet(OptionReader& o, Arch* a) {
  imageInput(o, a, 224, 3, 1000);
  const double width = o.real("width", 1.0, 0.01, 64);
  const std::int64_t hidden = o.integer("hidden", 4096);
  const double dropout = o.real("dropout", 0.5, 0, 0.9);
  const std::int64_t c = a->input.shape[0];
  const std::int64_t w1 = scaled(64, width), w2 = scaled(192, width), w3 = scaled(384, width), w4 = scaled(256, width);
  a->layers.push_back({"conv1", ConvSpec{c, w1, 11, 4, 2, true, false, true, 3, 2, 0}});
  a->layers.push_back({"conv2", ConvSpec{w1, w2, 5, 1, 2, true, false, true, 3, 2, 0}});
  a->layers.push_back({"conv3", ConvSpec{w2, w3, 3, 1, 1, true, false, true}});
  a->layers.push_back({"conv4", ConvSpec{w3, w4, 3, 1, 1, true, false, true}});
  a->layers.push_back({"conv5", ConvSpec{w4, w4, 3, 1, 1, true, false, true, 3, 2, 0}});
  LinearSpec fc6{w4 * 36, hidden, true, true, true, dropout, 6, 6};
  a->layers.push_back({"fc6", fc6});
  a->layers.push_back({"fc7", LinearSpec{hidden, hidden, true, true, false, dropout}});
  a->layers.push_back({"fc8", LinearSpec{hidden, a->task.classes, true, false, false, 0}});
}

void buildVgg(const std::vector<int>& cfg, OptionReader& o, Arch* a) {
  imageInput(o, a, 224, 3, 1000);
  const double width = o.real("width", 1.0, 0.01, 64);
  const std::int64_t hidden = o.integer("hidden", 4096);
  const double dropout = o.real("dropout", 0.5, 0, 0.9);
  const bool bn = o.flag("batch_norm", false);
  std::int64_t in = a->input.shape[0];
  int n = 0;
  for (size_t i = 0; i < cfg.size(); ++i) {
    if (cfg[i] == 0) {  // 'M': fold the max-pool into the conv before it
      std::get<ConvSpec>(a->layers.back().params).pool_kernel = 2;
      std::get<ConvSpec>(a->layers.back().params).pool_stride = 2;
      continue;
    }
    const std::int64_t out = scaled(cfg[i], width);
    a->layers.push_back({fmt::format("conv{}", ++n), ConvSpec{in, out, 3, 1, 1, true, bn, true}});
    in = out;
  }
  a->layers.push_back({"fc1", LinearSpec{in * 49, hidden, true, true, true, 0, 7, 7}});
  a->layers.push_back({"fc2", LinearSpec{hidden, hidden, true, true, false, dropout}});
  a->layers.push_back({"fc3", LinearSpec{hidden, a->task.classes, true, false, false, dropout}});
}

void buildResNet(const std::vector<int>& blocks, bool bottleneck, OptionReader& o, Arch* a) {
  imageInput(o, a, 224, 3, 1000);
  const double width = o.real("width", 1.0, 0.01, 64);
  const bool small = o.flag("small_stem", a->input.shape[1] < 100);
  const std::int64_t base = scaled(64, width);
  if (small) {
    a->layers.push_back({"stem", ConvSpec{a->input.shape[0], base, 3, 1, 1, false, true, true}});
  } else {
    a->layers.push_back({"stem", ConvSpec{a->input.shape[0], base, 7, 2, 3, false, true, true, 3, 2, 1}});
  }
  std::int64_t in = base;
  for (size_t stage = 0; stage < blocks.size(); ++stage) {
    const std::int64_t planes = base << stage;
    for (int b = 0; b < blocks[stage]; ++b) {
      const std::int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      const std::string name = fmt::format("layer{}.{}", stage + 1, b);
      if (bottleneck) {
        a->layers.push_back({name, BottleneckSpec{in, planes, planes * 4, stride}});
        in = planes * 4;
      } else {
        a->layers.push_back({name, BasicBlockSpec{in, planes, stride}});
        in = planes;
      }
    }
  }
  a->layers.push_back({"fc", LinearSpec{in, a->task.classes, true, false, true, 0, 1, 1}});
}

// Sizes shared by the transformer models, read and checked together.
struct TransformerSizes {
  std::int64_t layers, hidden, heads, ffn, vocab, seq, max_positions;
  double dropout;
};

TransformerSizes transformerSizes(OptionReader& o, std::int64_t layers, std::int64_t hidden, std::int64_t heads,
                                  std::int64_t vocab, std::int64_t seq, std::int64_t minPositions) {
  TransformerSizes t{};
  t.layers = o.integer("layers", layers);
  t.hidden = o.integer("hidden", hidden);
  t.heads = o.integer("heads", heads);
  t.ffn = o.integer("ffn", 4 * t.hidden);
  t.vocab = o.integer("vocab", vocab, 2);
  t.seq = o.integer("seq_len", seq);
  t.max_positions = o.integer("max_positions", std::max(minPositions, t.seq));
  t.dropout = o.real("dropout", 0.1, 0, 0.9);
  if (t.hidden % t.heads != 0) o.fail(fmt::format("hidden={} must be a multiple of heads={}", t.hidden, t.heads));
  if (t.seq > t.max_positions) o.fail(fmt::format("seq_len={} exceeds max_positions={}", t.seq, t.max_positions));
  return t;
}

void buildBert(std::int64_t layers, std::int64_t hidden, std::int64_t heads, OptionReader& o, Arch* a) {
  const TransformerSizes t = transformerSizes(o, layers, hidden, heads, 30522, 384, 512);
  const std::int64_t classes = o.integer("classes", 2, 2);
  a->input = {InputKind::kTokens, {t.seq}, t.vocab};
  a->task = {TaskKind::kClassification, classes};
  a->layers.push_back({"embeddings", EmbeddingSpec{t.vocab, t.hidden, t.max_positions, 2, true, t.dropout}});
  for (std::int64_t i = 0; i < t.layers; ++i) {
    a->layers.push_back(
        {fmt::format("encoder{}", i + 1), TransformerSpec{t.hidden, t.heads, t.ffn, false, false, t.dropout}});
  }
  a->layers.push_back({"classifier", SequenceClassifierSpec{t.hidden, classes, true}});
}

void buildGpt(OptionReader& o, Arch* a) {
  const TransformerSizes t = transformerSizes(o, 12, 768, 12, 50257, 1024, 0);
  a->input = {InputKind::kTokens, {t.seq}, t.vocab};
  a->task = {TaskKind::kLanguageModel, t.vocab};
  a->layers.push_back({"embeddings", EmbeddingSpec{t.vocab, t.hidden, t.max_positions, 0, false, t.dropout}});
  for (std::int64_t i = 0; i < t.layers; ++i) {
    a->layers.push_back({fmt::format("block{}", i + 1), TransformerSpec{t.hidden, t.heads, t.ffn, true, true, t.dropout}});
  }
  a->layers.push_back({"lm_head", LmHeadSpec{t.hidden, t.vocab, true}});
}

// VGG configurations (0 marks a max-pool), from Simonyan & Zisserman Table 1.
const std::vector<int> kVgg11 = {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
const std::vector<int> kVgg13 = {64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
const std::vector<int> kVgg16 = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
const std::vector<int> kVgg19 = {64,  64,  0,   128, 128, 0,   256, 256, 256, 256, 0,
                                 512, 512, 512, 512, 0,   512, 512, 512, 512, 0};

using Builder = std::function<void(OptionReader&, Arch*)>;

struct Entry {
  ZooEntry info;
  Builder build;
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> kEntries = [] {
    std::vector<Entry> e;
    e.push_back({{"mlp", {}, "multi-layer perceptron (default: 3x256 hidden, 28x28x1 input)", {}}, buildMlp});
    e.push_back({{"cnn", {"fashion_cnn"}, "small CNN for 28x28 Fashion-MNIST: 2 conv+pool, 2 dense", {}}, buildCnn});
    e.push_back({{"alexnet", {}, "AlexNet (torchvision), 224x224", {}}, buildAlexNet});
    e.push_back({{"vgg11", {}, "VGG-11, 224x224", {}}, [](auto& o, auto* a) { buildVgg(kVgg11, o, a); }});
    e.push_back({{"vgg13", {}, "VGG-13, 224x224", {}}, [](auto& o, auto* a) { buildVgg(kVgg13, o, a); }});
    e.push_back({{"vgg16", {}, "VGG-16, 224x224", {}}, [](auto& o, auto* a) { buildVgg(kVgg16, o, a); }});
    e.push_back({{"vgg19", {}, "VGG-19, 224x224", {}}, [](auto& o, auto* a) { buildVgg(kVgg19, o, a); }});
    e.push_back({{"resnet18", {}, "ResNet-18 (basic blocks; a block is one layer)", {}},
                 [](auto& o, auto* a) { buildResNet({2, 2, 2, 2}, false, o, a); }});
    e.push_back({{"resnet34", {}, "ResNet-34 (basic blocks)", {}},
                 [](auto& o, auto* a) { buildResNet({3, 4, 6, 3}, false, o, a); }});
    e.push_back({{"resnet50", {}, "ResNet-50 (bottleneck blocks)", {}},
                 [](auto& o, auto* a) { buildResNet({3, 4, 6, 3}, true, o, a); }});
    e.push_back({{"resnet101", {}, "ResNet-101 (bottleneck blocks)", {}},
                 [](auto& o, auto* a) { buildResNet({3, 4, 23, 3}, true, o, a); }});
    e.push_back({{"resnet152", {}, "ResNet-152 (bottleneck blocks)", {}},
                 [](auto& o, auto* a) { buildResNet({3, 8, 36, 3}, true, o, a); }});
    e.push_back({{"bert", {"bert12", "bert-base"}, "BERT-base encoder, sequence classification, seq 384", {}},
                 [](auto& o, auto* a) { buildBert(12, 768, 12, o, a); }});
    e.push_back({{"bert24", {"bert-large"}, "BERT-large encoder, sequence classification, seq 384", {}},
                 [](auto& o, auto* a) { buildBert(24, 1024, 16, o, a); }});
    e.push_back({{"gpt", {"gpt2"}, "GPT-2 small decoder language model, context 1024", {}}, buildGpt});
    // Fill each entry's option list by running its builder on defaults.
    for (auto& entry : e) {
      OptionReader o(entry.info.name, {});
      Arch scratch;
      entry.build(o, &scratch);
      entry.info.option_names = o.known();
    }
    return e;
  }();
  return kEntries;
}

const Entry* find(const std::string& name) {
  for (const auto& e : entries()) {
    if (e.info.name == name) return &e;
    for (const auto& alias : e.info.aliases) {
      if (alias == name) return &e;
    }
  }
  return nullptr;
}

}  // namespace

Result<std::pair<std::string, std::string>> parseOption(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return invalidArgument(fmt::format("model option \"{}\" must look like key=value (e.g. image_size=32)", text));
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

const std::vector<ZooEntry>& zoo() {
  static const std::vector<ZooEntry> kInfos = [] {
    std::vector<ZooEntry> v;
    for (const auto& e : entries()) v.push_back(e.info);
    return v;
  }();
  return kInfos;
}

bool isZooModel(const std::string& name) { return find(name) != nullptr; }

bool isTorchScriptPath(const std::string& name) {
  if (isZooModel(name)) return false;
  if (name.find('/') != std::string::npos) return true;
  for (const std::string ext : {".pt", ".pth", ".ts"}) {
    if (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0) return true;
  }
  std::error_code ec;
  return std::filesystem::is_regular_file(name, ec);
}

Result<Arch> buildArch(const ModelSpec& spec) {
  const Entry* entry = find(spec.name);
  if (!entry) {
    std::string names;
    for (const auto& e : entries()) names += (names.empty() ? "" : ", ") + e.info.name;
    return notFound(fmt::format("unknown model \"{}\"; zoo models are {} (see `hydrozoa models`), or give a "
                                "TorchScript file path",
                                spec.name, names));
  }
  OptionReader options(entry->info.name, spec.options);
  Arch arch;
  arch.name = entry->info.name;
  entry->build(options, &arch);
  HZ_RETURN_IF_ERROR(options.finish());
  arch.options = options.resolved();
  // Options are individually valid; check that together they give shapes that chain
  // (e.g. AlexNet's strided convolutions need image_size >= 63).
  try {
    (void)analyze(arch);
  } catch (const InternalError& e) {
    std::string detail = e.what();
    const auto pos = detail.find("check failed: ");
    return invalidArgument(fmt::format("model {}: these options give layers whose shapes do not fit together ({}); "
                                       "try a larger image_size or matching sizes",
                                       arch.name, pos == std::string::npos ? detail : detail.substr(pos + 14)));
  }
  return arch;
}

}  // namespace hydrozoa::model
