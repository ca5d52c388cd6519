#include "model/arch.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "core/status.h"

namespace hydrozoa::model {
namespace {

constexpr std::int64_t kFloat = 4;  // bytes per float32 element
constexpr std::int64_t kIndex = 8;  // bytes per int64 element (max-pool indices, token ids)

std::int64_t convOut(std::int64_t size, std::int64_t kernel, std::int64_t stride, std::int64_t padding) {
  return (size + 2 * padding - kernel) / stride + 1;
}

// The analysis of one kind is a function of its spec and the input shape.
// Each fills every field of LayerAnalysis but name/kind/input_shape.

void analyzeConv(const ConvSpec& c, const Shape& in, LayerAnalysis* a) {
  HZ_CHECK_MSG(in.size() == 3 && in[0] == c.in, "conv expects [" + std::to_string(c.in) + ",H,W], got " + shapeString(in));
  const std::int64_t ho = convOut(in[1], c.kernel, c.stride, c.padding);
  const std::int64_t wo = convOut(in[2], c.kernel, c.stride, c.padding);
  HZ_CHECK_MSG(ho > 0 && wo > 0, "conv input " + shapeString(in) + " is too small");
  const std::int64_t eConv = c.out * ho * wo;
  Shape out = {c.out, ho, wo};
  std::int64_t ePool = 0;
  if (c.pool_kernel > 0) {
    const std::int64_t hp = convOut(ho, c.pool_kernel, c.pool_stride, c.pool_padding);
    const std::int64_t wp = convOut(wo, c.pool_kernel, c.pool_stride, c.pool_padding);
    HZ_CHECK_MSG(hp > 0 && wp > 0, "pooling input " + shapeString(out) + " is too small");
    out = {c.out, hp, wp};
    ePool = numel(out);
  }
  a->output_shape = out;
  a->parameters = c.out * c.in * c.kernel * c.kernel + (c.bias ? c.out : 0) + (c.batch_norm ? 2 * c.out : 0);
  a->largest_parameter = c.out * c.in * c.kernel * c.kernel;
  const double convFlops = 2.0 * static_cast<double>(c.in * c.kernel * c.kernel) * static_cast<double>(eConv);
  a->forward_flops = convFlops + (c.bias ? eConv : 0) + (c.batch_norm ? 4.0 * eConv : 0) + (c.relu ? eConv : 0) +
                     static_cast<double>(c.pool_kernel * c.pool_kernel * ePool);
  a->backward_flops = 2 * a->forward_flops;
  a->stashed_bytes = kFloat * eConv * (1 + c.batch_norm + c.relu) + (kFloat + kIndex) * ePool;
  a->memory_traffic_bytes = kFloat * (numel(in) + eConv * (1 + 2 * c.batch_norm + 2 * c.relu) + (ePool ? eConv + ePool : 0));
}

void analyzeLinear(const LinearSpec& l, const Shape& in, LayerAnalysis* a) {
  Shape x = in;
  std::int64_t pooled = 0;
  if (l.pool_h > 0) {
    HZ_CHECK_MSG(x.size() == 3, "pooling linear expects [C,H,W], got " + shapeString(in));
    x = {x[0], l.pool_h, l.pool_w};
    pooled = numel(x);
  }
  if (l.flatten) x = {numel(x)};
  HZ_CHECK_MSG(!x.empty() && x.back() == l.in,
               fmt::format("linear expects last dimension {}, got {}", l.in, shapeString(x)));
  const std::int64_t rows = numel(x) / l.in;
  x.back() = l.out;
  a->output_shape = x;
  a->parameters = l.in * l.out + (l.bias ? l.out : 0);
  a->largest_parameter = l.in * l.out;
  const double e = static_cast<double>(rows * l.out);
  a->forward_flops = 2.0 * static_cast<double>(l.in) * e + (l.bias ? e : 0) + (l.relu ? e : 0) +
                     static_cast<double>(pooled) + (l.dropout > 0 ? numel(in) : 0);
  a->backward_flops = 2 * a->forward_flops;
  a->stashed_bytes = kFloat * rows * l.out * (1 + l.relu) + kFloat * pooled + (l.dropout > 0 ? 5 * numel(in) : 0);
  a->memory_traffic_bytes = kFloat * (numel(in) + rows * l.out * (1 + 2 * l.relu) + pooled);
}

void analyzeBasicBlock(const BasicBlockSpec& b, const Shape& in, LayerAnalysis* a) {
  HZ_CHECK_MSG(in.size() == 3 && in[0] == b.in, "basic block expects [" + std::to_string(b.in) + ",H,W]");
  const std::int64_t ho = convOut(in[1], 3, b.stride, 1), wo = convOut(in[2], 3, b.stride, 1);
  const std::int64_t e = b.out * ho * wo;
  const bool down = b.stride != 1 || b.in != b.out;
  a->output_shape = {b.out, ho, wo};
  a->parameters = 9 * b.in * b.out + 2 * b.out + 9 * b.out * b.out + 2 * b.out + (down ? b.in * b.out + 2 * b.out : 0);
  a->largest_parameter = 9 * b.out * std::max(b.in, b.out);
  const double de = static_cast<double>(e);
  a->forward_flops = 2.0 * 9 * b.in * de + 2.0 * 9 * b.out * de + (down ? 2.0 * b.in * de + 4 * de : 0) + 12 * de;
  a->backward_flops = 2 * a->forward_flops;
  a->stashed_bytes = kFloat * e * (6 + 2 * down);
  a->memory_traffic_bytes = kFloat * (numel(in) + e * (11 + 3 * down));
}

void analyzeBottleneck(const BottleneckSpec& b, const Shape& in, LayerAnalysis* a) {
  HZ_CHECK_MSG(in.size() == 3 && in[0] == b.in, "bottleneck expects [" + std::to_string(b.in) + ",H,W]");
  const std::int64_t ho = convOut(in[1], 3, b.stride, 1), wo = convOut(in[2], 3, b.stride, 1);
  const std::int64_t e1 = b.width * in[1] * in[2], e2 = b.width * ho * wo, e3 = b.out * ho * wo;
  const bool down = b.stride != 1 || b.in != b.out;
  a->output_shape = {b.out, ho, wo};
  a->parameters = b.in * b.width + 2 * b.width + 9 * b.width * b.width + 2 * b.width + b.width * b.out + 2 * b.out +
                  (down ? b.in * b.out + 2 * b.out : 0);
  a->largest_parameter = std::max({b.in * b.width, 9 * b.width * b.width, b.width * b.out, down ? b.in * b.out : 0});
  a->forward_flops = 2.0 * b.in * e1 + 2.0 * 9 * b.width * e2 + 2.0 * b.width * e3 + (down ? 2.0 * b.in * e3 + 4.0 * e3 : 0) +
                     5.0 * (e1 + e2) + 7.0 * e3;
  a->backward_flops = 2 * a->forward_flops;
  a->stashed_bytes = kFloat * (3 * e1 + 3 * e2 + 3 * e3 + 2 * down * e3);
  a->memory_traffic_bytes = kFloat * (numel(in) + 5 * e1 + 5 * e2 + (6 + 3 * down) * e3);
}

void analyzeEmbedding(const EmbeddingSpec& m, const Shape& in, LayerAnalysis* a) {
  HZ_CHECK_MSG(in.size() == 1, "embedding expects token ids [seq], got " + shapeString(in));
  HZ_CHECK_MSG(in[0] <= m.max_positions, "sequence longer than max_positions");
  const std::int64_t s = in[0], e = s * m.hidden;
  a->output_shape = {s, m.hidden};
  a->parameters = (m.vocab + m.max_positions + m.type_vocab) * m.hidden + (m.layer_norm ? 2 * m.hidden : 0);
  a->largest_parameter = std::max({m.vocab, m.max_positions, m.type_vocab}) * m.hidden;
  a->forward_flops = static_cast<double>(e) * (2 + (m.type_vocab > 0) + (m.layer_norm ? 8 : 0));
  a->backward_flops = a->forward_flops;
  a->stashed_bytes = kFloat * e * (1 + 2 * m.layer_norm + (m.dropout > 0)) + kIndex * s;
  a->memory_traffic_bytes = kIndex * s + kFloat * e * (3 + 2 * m.layer_norm);
}

void analyzeTransformer(const TransformerSpec& t, const Shape& in, LayerAnalysis* a) {
  HZ_CHECK_MSG(in.size() == 2 && in[1] == t.hidden, "transformer expects [seq," + std::to_string(t.hidden) + "]");
  HZ_CHECK_MSG(t.heads > 0 && t.hidden % t.heads == 0, "hidden size must be a multiple of heads");
  const double s = static_cast<double>(in[0]), h = static_cast<double>(t.hidden), f = static_cast<double>(t.ffn);
  const double heads = static_cast<double>(t.heads);
  a->output_shape = in;
  a->parameters = 4 * t.hidden * t.hidden + 4 * t.hidden + 2 * t.hidden * t.ffn + t.ffn + t.hidden + 4 * t.hidden;
  a->largest_parameter = std::max(3 * t.hidden * t.hidden, t.hidden * t.ffn);  // the attention's input projection
  const double matmuls = 2 * s * h * 3 * h + 2 * 2 * s * s * h + 2 * s * h * h + 2 * 2 * s * h * f;
  a->forward_flops = matmuls + 5 * heads * s * s + 8 * s * f + 20 * s * h;
  a->backward_flops = 2 * a->forward_flops;
  const double attn = heads * s * s;
  a->stashed_bytes = static_cast<std::int64_t>(kFloat * (3 * s * h + (2 + (t.dropout > 0)) * attn + 6 * s * h + 2 * s * f));
  a->memory_traffic_bytes = static_cast<std::int64_t>(kFloat * (12 * s * h + 4 * attn + 4 * s * f));
}

void analyzeSequenceClassifier(const SequenceClassifierSpec& c, const Shape& in, LayerAnalysis* a) {
  HZ_CHECK_MSG(in.size() == 2 && in[1] == c.hidden, "classifier expects [seq," + std::to_string(c.hidden) + "]");
  const double h = static_cast<double>(c.hidden), k = static_cast<double>(c.classes);
  a->output_shape = {c.classes};
  a->parameters = (c.pooler ? c.hidden * c.hidden + c.hidden : 0) + c.hidden * c.classes + c.classes;
  a->largest_parameter = std::max(c.pooler ? c.hidden * c.hidden : 0, c.hidden * c.classes);
  a->forward_flops = (c.pooler ? 2 * h * h + 2 * h : 0) + 2 * h * k + k;
  a->backward_flops = 2 * a->forward_flops;
  a->stashed_bytes = kFloat * (2 * c.hidden + c.classes);
  a->memory_traffic_bytes = kFloat * (3 * c.hidden + c.classes);
}

void analyzeLmHead(const LmHeadSpec& l, const Shape& in, LayerAnalysis* a) {
  HZ_CHECK_MSG(in.size() == 2 && in[1] == l.hidden, "lm head expects [seq," + std::to_string(l.hidden) + "]");
  const double s = static_cast<double>(in[0]), h = static_cast<double>(l.hidden), v = static_cast<double>(l.vocab);
  a->output_shape = {in[0], l.vocab};
  a->parameters = (l.final_norm ? 2 * l.hidden : 0) + l.hidden * l.vocab;
  a->largest_parameter = l.hidden * l.vocab;
  a->forward_flops = 2 * s * h * v + (l.final_norm ? 8 * s * h : 0);
  a->backward_flops = 2 * a->forward_flops;
  // Logits and the loss's log-softmax of them are both kept.
  a->stashed_bytes = static_cast<std::int64_t>(kFloat * (2 * s * v + 2 * s * h));
  a->memory_traffic_bytes = static_cast<std::int64_t>(kFloat * (3 * s * v + 3 * s * h));
}

}  // namespace

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string shapeString(const Shape& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s.empty() ? "scalar" : s;
}

const char* kindName(const LayerParams& params) {
  struct Namer {
    const char* operator()(const ConvSpec&) const { return "conv"; }
    const char* operator()(const LinearSpec&) const { return "linear"; }
    const char* operator()(const BasicBlockSpec&) const { return "basic_block"; }
    const char* operator()(const BottleneckSpec&) const { return "bottleneck"; }
    const char* operator()(const EmbeddingSpec&) const { return "embedding"; }
    const char* operator()(const TransformerSpec&) const { return "transformer"; }
    const char* operator()(const SequenceClassifierSpec&) const { return "sequence_classifier"; }
    const char* operator()(const LmHeadSpec&) const { return "lm_head"; }
  };
  return std::visit(Namer{}, params);
}

namespace {

template <size_t... I>
std::vector<std::string> kindNames(std::index_sequence<I...>) {
  return {kindName(LayerParams(std::in_place_index<I>))...};
}

}  // namespace

const std::vector<std::string>& layerKinds() {
  static const std::vector<std::string> kinds = kindNames(std::make_index_sequence<std::variant_size_v<LayerParams>>());
  return kinds;
}

std::vector<LayerAnalysis> analyze(const Arch& arch) {
  std::vector<LayerAnalysis> out;
  out.reserve(arch.layers.size());
  Shape shape = arch.input.shape;
  for (const LayerSpec& layer : arch.layers) {
    LayerAnalysis a;
    a.name = layer.name;
    a.kind = kindName(layer.params);
    a.input_shape = shape;
    std::visit(
        [&](const auto& spec) {
          using T = std::decay_t<decltype(spec)>;
          if constexpr (std::is_same_v<T, ConvSpec>) analyzeConv(spec, shape, &a);
          if constexpr (std::is_same_v<T, LinearSpec>) analyzeLinear(spec, shape, &a);
          if constexpr (std::is_same_v<T, BasicBlockSpec>) analyzeBasicBlock(spec, shape, &a);
          if constexpr (std::is_same_v<T, BottleneckSpec>) analyzeBottleneck(spec, shape, &a);
          if constexpr (std::is_same_v<T, EmbeddingSpec>) analyzeEmbedding(spec, shape, &a);
          if constexpr (std::is_same_v<T, TransformerSpec>) analyzeTransformer(spec, shape, &a);
          if constexpr (std::is_same_v<T, SequenceClassifierSpec>) analyzeSequenceClassifier(spec, shape, &a);
          if constexpr (std::is_same_v<T, LmHeadSpec>) analyzeLmHead(spec, shape, &a);
        },
        layer.params);
    a.output_bytes = kFloat * numel(a.output_shape);
    shape = a.output_shape;
    out.push_back(std::move(a));
  }
  return out;
}

std::int64_t totalParameters(const Arch& arch) {
  std::int64_t total = 0;
  for (const auto& a : analyze(arch)) total += a.parameters;
  return total;
}

bool tensorSplit(const std::string& kind) { return kind == "transformer" || kind == "embedding" || kind == "lm_head"; }

TensorSplitSizes tensorSplitSizes(const Arch& arch) {
  TensorSplitSizes out;
  std::int64_t heads = 0, hidden = 0, ffn = 0, vocab = 0;
  bool blocks = false;
  for (const auto& layer : arch.layers) {
    if (const auto* t = std::get_if<TransformerSpec>(&layer.params)) {
      blocks = true;
      heads = std::gcd(heads, t->heads);
      hidden = std::gcd(hidden, t->hidden);
      ffn = std::gcd(ffn, t->ffn);
    } else if (const auto* e = std::get_if<EmbeddingSpec>(&layer.params)) {
      vocab = std::gcd(vocab, e->vocab);
    } else if (const auto* h = std::get_if<LmHeadSpec>(&layer.params)) {
      vocab = std::gcd(vocab, h->vocab);
    }
  }
  if (!blocks) return out;
  out.gcd = std::gcd(std::gcd(heads, ffn), vocab);
  // hidden is a multiple of heads: named for the planner's tables, never the first t fails.
  out.sizes = {{"heads", heads}, {"hidden", hidden}, {"ffn", ffn}};
  if (vocab > 0) out.sizes.emplace_back("vocab", vocab);
  return out;
}

Status checkTensorParallel(const Arch& arch, int t) {
  if (t < 1) return invalidArgument(fmt::format("tensor parallelism {} must be at least 1", t));
  if (t == 1) return Status();
  const TensorSplitSizes sizes = tensorSplitSizes(arch);
  if (sizes.gcd == 0) {
    return invalidArgument(fmt::format(
        "tensor parallelism {} needs transformer blocks to split, and {} has none: use tensor parallelism 1", t,
        arch.name));
  }
  if (sizes.gcd % t == 0) return Status();
  std::string valid;
  std::vector<std::int64_t> divisors;
  for (std::int64_t d = 1; d <= sizes.gcd; ++d) {
    if (sizes.gcd % d == 0) divisors.push_back(d);
  }
  for (size_t i = 0; i < divisors.size(); ++i) {
    valid += (i == 0 ? "" : i + 1 == divisors.size() ? " or " : ", ") + std::to_string(divisors[i]);
  }
  for (const auto& [name, value] : sizes.sizes) {
    if (value % t != 0) {
      return invalidArgument(
          fmt::format("tensor parallelism {} does not divide {}={} of {}: use {}", t, name, value, arch.name, valid));
    }
  }
  return invalidArgument(fmt::format("tensor parallelism {} does not divide {}: use {}", t, arch.name, valid));
}

}  // namespace hydrozoa::model
