#include "model/layers.h"

#include <cmath>

#include "model/tensor_parallel.h"

namespace hydrozoa::model {
namespace {

namespace nn = torch::nn;

// Conv -> [BatchNorm] -> [ReLU] -> [MaxPool].
class ConvLayer : public LayerModule {
 public:
  explicit ConvLayer(const ConvSpec& s) : s_(s) {
    conv_ = register_module("conv", nn::Conv2d(nn::Conv2dOptions(s.in, s.out, s.kernel)
                                                   .stride(s.stride)
                                                   .padding(s.padding)
                                                   .bias(s.bias)));
    if (s.batch_norm) bn_ = register_module("bn", nn::BatchNorm2d(s.out));
  }
  torch::Tensor forward(torch::Tensor x) override {
    x = conv_(x);
    if (s_.batch_norm) x = bn_(x);
    if (s_.relu) x = torch::relu(x);
    if (s_.pool_kernel > 0) x = torch::max_pool2d(x, s_.pool_kernel, s_.pool_stride, s_.pool_padding);
    return x;
  }

 private:
  ConvSpec s_;
  nn::Conv2d conv_{nullptr};
  nn::BatchNorm2d bn_{nullptr};
};

// [Dropout] -> [AdaptiveAvgPool] -> [Flatten] -> Linear -> [ReLU].
class LinearLayer : public LayerModule {
 public:
  explicit LinearLayer(const LinearSpec& s) : s_(s) {
    fc_ = register_module("fc", nn::Linear(nn::LinearOptions(s.in, s.out).bias(s.bias)));
  }
  torch::Tensor forward(torch::Tensor x) override {
    if (s_.dropout > 0) x = torch::dropout(x, s_.dropout, is_training());
    if (s_.pool_h > 0) x = torch::adaptive_avg_pool2d(x, {s_.pool_h, s_.pool_w});
    if (s_.flatten) x = x.flatten(1);
    x = fc_(x);
    if (s_.relu) x = torch::relu(x);
    return x;
  }

 private:
  LinearSpec s_;
  nn::Linear fc_{nullptr};
};

nn::Conv2d conv(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(k / 2).bias(false));
}

// A residual block's shortcut: identity, or a strided 1x1 conv + BN when
// the shape changes (torchvision's "downsample").
class Shortcut : public nn::Module {
 public:
  Shortcut(std::int64_t in, std::int64_t out, std::int64_t stride) {
    if (stride != 1 || in != out) {
      conv_ = register_module("conv", conv(in, out, 1, stride));
      bn_ = register_module("bn", nn::BatchNorm2d(out));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) { return conv_ ? bn_(conv_(x)) : x; }

 private:
  nn::Conv2d conv_{nullptr};
  nn::BatchNorm2d bn_{nullptr};
};

// ResNet basic block (torchvision's layout).
class BasicBlockLayer : public LayerModule {
 public:
  explicit BasicBlockLayer(const BasicBlockSpec& s) {
    conv1_ = register_module("conv1", conv(s.in, s.out, 3, s.stride));
    bn1_ = register_module("bn1", nn::BatchNorm2d(s.out));
    conv2_ = register_module("conv2", conv(s.out, s.out, 3, 1));
    bn2_ = register_module("bn2", nn::BatchNorm2d(s.out));
    shortcut_ = register_module("shortcut", std::make_shared<Shortcut>(s.in, s.out, s.stride));
  }
  torch::Tensor forward(torch::Tensor x) override {
    torch::Tensor y = torch::relu(bn1_(conv1_(x)));
    y = bn2_(conv2_(y));
    return torch::relu(y + shortcut_->forward(x));
  }

 private:
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
  std::shared_ptr<Shortcut> shortcut_;
};

// ResNet bottleneck (v1.5: the stride sits on the 3x3 convolution).
class BottleneckLayer : public LayerModule {
 public:
  explicit BottleneckLayer(const BottleneckSpec& s) {
    conv1_ = register_module("conv1", conv(s.in, s.width, 1, 1));
    bn1_ = register_module("bn1", nn::BatchNorm2d(s.width));
    conv2_ = register_module("conv2", conv(s.width, s.width, 3, s.stride));
    bn2_ = register_module("bn2", nn::BatchNorm2d(s.width));
    conv3_ = register_module("conv3", conv(s.width, s.out, 1, 1));
    bn3_ = register_module("bn3", nn::BatchNorm2d(s.out));
    shortcut_ = register_module("shortcut", std::make_shared<Shortcut>(s.in, s.out, s.stride));
  }
  torch::Tensor forward(torch::Tensor x) override {
    torch::Tensor y = torch::relu(bn1_(conv1_(x)));
    y = torch::relu(bn2_(conv2_(y)));
    y = bn3_(conv3_(y));
    return torch::relu(y + shortcut_->forward(x));
  }

 private:
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  std::shared_ptr<Shortcut> shortcut_;
};

// Token + position (+ segment 0) embeddings; inputs are token ids [N, S].
class EmbeddingLayer : public LayerModule {
 public:
  explicit EmbeddingLayer(const EmbeddingSpec& s) : s_(s) {
    tokens_ = register_module("tokens", nn::Embedding(s.vocab, s.hidden));
    positions_ = register_module("positions", nn::Embedding(s.max_positions, s.hidden));
    if (s.type_vocab > 0) types_ = register_module("types", nn::Embedding(s.type_vocab, s.hidden));
    if (s.layer_norm) norm_ = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({s.hidden}).eps(1e-12)));
    // BERT and GPT-2 initialise embeddings with N(0, 0.02).
    torch::NoGradGuard guard;
    for (auto& p : parameters()) {
      if (p.dim() == 2) p.normal_(0, 0.02);
    }
  }
  torch::Tensor forward(torch::Tensor ids) override {
    const auto seq = ids.size(1);
    torch::Tensor x = tokens_(ids) + positions_->weight.narrow(0, 0, seq).unsqueeze(0);
    if (s_.type_vocab > 0) x = x + types_->weight[0];  // single-segment inputs
    if (s_.layer_norm) x = norm_(x);
    return slicedDropout(x, s_.dropout, is_training());
  }

 private:
  EmbeddingSpec s_;
  nn::Embedding tokens_{nullptr}, positions_{nullptr}, types_{nullptr};
  nn::LayerNorm norm_{nullptr};
};

// Multi-head self-attention and a GELU MLP; post-norm (BERT) or pre-norm (GPT-2).
class TransformerLayer : public LayerModule {
 public:
  explicit TransformerLayer(const TransformerSpec& s) : s_(s) {
    qkv_ = register_module("qkv", nn::Linear(s.hidden, 3 * s.hidden));
    proj_ = register_module("proj", nn::Linear(s.hidden, s.hidden));
    fc1_ = register_module("fc1", nn::Linear(s.hidden, s.ffn));
    fc2_ = register_module("fc2", nn::Linear(s.ffn, s.hidden));
    norm1_ = register_module("norm1", nn::LayerNorm(nn::LayerNormOptions({s.hidden}).eps(1e-5)));
    norm2_ = register_module("norm2", nn::LayerNorm(nn::LayerNormOptions({s.hidden}).eps(1e-5)));
  }
  torch::Tensor forward(torch::Tensor x) override {
    if (s_.pre_norm) {
      x = x + drop(attention(norm1_(x)));
      return x + drop(mlp(norm2_(x)));
    }
    x = norm1_(x + drop(attention(x)));
    return norm2_(x + drop(mlp(x)));
  }

 private:
  // Dropout as the split block (model/tensor_parallel.h) draws it.
  torch::Tensor drop(const torch::Tensor& x) { return slicedDropout(x, s_.dropout, is_training()); }

  torch::Tensor attention(const torch::Tensor& x) {
    const auto n = x.size(0), seq = x.size(1), h = s_.hidden, heads = s_.heads, d = h / heads;
    // [N, S, 3H] -> three [N, heads, S, d]
    auto parts = qkv_(x).view({n, seq, 3, heads, d}).permute({2, 0, 3, 1, 4}).unbind(0);
    torch::Tensor scores = torch::matmul(parts[0], parts[1].transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
    if (s_.causal) {
      const auto mask = torch::ones({seq, seq}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).triu(1);
      scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
    }
    torch::Tensor probs = drop(torch::softmax(scores, -1));
    torch::Tensor context = torch::matmul(probs, parts[2]).transpose(1, 2).reshape({n, seq, h});
    return proj_(context);
  }

  torch::Tensor mlp(const torch::Tensor& x) { return fc2_(torch::gelu(fc1_(x))); }

  TransformerSpec s_;
  nn::Linear qkv_{nullptr}, proj_{nullptr}, fc1_{nullptr}, fc2_{nullptr};
  nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
};

// First token -> [dense + tanh] -> classes.
class SequenceClassifierLayer : public LayerModule {
 public:
  explicit SequenceClassifierLayer(const SequenceClassifierSpec& s) : s_(s) {
    if (s.pooler) pooler_ = register_module("pooler", nn::Linear(s.hidden, s.hidden));
    out_ = register_module("out", nn::Linear(s.hidden, s.classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    torch::Tensor first = x.select(1, 0);
    if (s_.pooler) first = torch::tanh(pooler_(first));
    return out_(first);
  }

 private:
  SequenceClassifierSpec s_;
  nn::Linear pooler_{nullptr}, out_{nullptr};
};

// [LayerNorm] -> vocabulary logits (no bias, as GPT-2).
class LmHeadLayer : public LayerModule {
 public:
  explicit LmHeadLayer(const LmHeadSpec& s) : s_(s) {
    if (s.final_norm) norm_ = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({s.hidden}).eps(1e-5)));
    out_ = register_module("out", nn::Linear(nn::LinearOptions(s.hidden, s.vocab).bias(false)));
  }
  torch::Tensor forward(torch::Tensor x) override { return out_(s_.final_norm ? norm_(x) : x); }

 private:
  LmHeadSpec s_;
  nn::LayerNorm norm_{nullptr};
  nn::Linear out_{nullptr};
};

}  // namespace

std::shared_ptr<LayerModule> makeLayer(const LayerSpec& spec) {
  return std::visit(
      [](const auto& s) -> std::shared_ptr<LayerModule> {
        using T = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<T, ConvSpec>) return std::make_shared<ConvLayer>(s);
        if constexpr (std::is_same_v<T, LinearSpec>) return std::make_shared<LinearLayer>(s);
        if constexpr (std::is_same_v<T, BasicBlockSpec>) return std::make_shared<BasicBlockLayer>(s);
        if constexpr (std::is_same_v<T, BottleneckSpec>) return std::make_shared<BottleneckLayer>(s);
        if constexpr (std::is_same_v<T, EmbeddingSpec>) return std::make_shared<EmbeddingLayer>(s);
        if constexpr (std::is_same_v<T, TransformerSpec>) return std::make_shared<TransformerLayer>(s);
        if constexpr (std::is_same_v<T, SequenceClassifierSpec>) return std::make_shared<SequenceClassifierLayer>(s);
        if constexpr (std::is_same_v<T, LmHeadSpec>) return std::make_shared<LmHeadLayer>(s);
      },
      spec.params);
}

}  // namespace hydrozoa::model
