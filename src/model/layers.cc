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

// The transformer family below takes a tensor-parallel group (null: whole;
// model/tensor_parallel.h says what splits and why). Whole, each computes
// exactly as before any split existed.
class GroupMember {
 protected:
  explicit GroupMember(std::shared_ptr<TensorGroup> group) : group_(std::move(group)) {}
  std::int64_t ways() const { return group_ ? group_->size() : 1; }
  int rank() const { return group_ ? group_->rank() : 0; }
  // f and g (model/tensor_parallel.h); the identity when whole.
  torch::Tensor enter(const torch::Tensor& x) { return group_ ? copyToTensorRegion(x, *group_) : x; }
  torch::Tensor leave(const torch::Tensor& x) { return group_ ? reduceFromTensorRegion(x, *group_) : x; }
  // A linear layer split by rows: the partial products summed over the
  // group, then its (replicated) bias added once.
  torch::Tensor rowSplit(nn::Linear& layer, const torch::Tensor& x) {
    if (!group_) return layer->forward(x);
    return leave(torch::nn::functional::linear(x, layer->weight)) + layer->bias;
  }
  std::shared_ptr<TensorGroup> group_;
};

// Token + position (+ segment 0) embeddings; inputs are token ids [N, S].
// Split: the token table over the vocabulary, each rank's lookups of the ids
// in its slice summed.
class EmbeddingLayer : public LayerModule, GroupMember {
 public:
  EmbeddingLayer(const EmbeddingSpec& s, std::shared_ptr<TensorGroup> group) : GroupMember(std::move(group)), s_(s) {
    tokens_ = register_module("tokens", nn::Embedding(s.vocab / ways(), s.hidden));
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
    torch::Tensor x;
    if (!group_) {
      x = tokens_(ids);
    } else {
      const std::int64_t slice = s_.vocab / ways(), first = rank() * slice;
      const torch::Tensor mine = (ids >= first) & (ids < first + slice);
      x = leave(tokens_((ids - first).masked_fill(~mine, 0)).masked_fill(~mine.unsqueeze(-1), 0));
    }
    x = x + positions_->weight.narrow(0, 0, seq).unsqueeze(0);
    if (s_.type_vocab > 0) x = x + types_->weight[0];  // single-segment inputs
    if (s_.layer_norm) x = norm_(x);
    return slicedDropout(x, s_.dropout, is_training());
  }
  std::optional<ShardDim> shardDim(const std::string& name) const override {
    if (name == "tokens.weight") return ShardDim{0, 1};
    return std::nullopt;
  }

 private:
  EmbeddingSpec s_;
  nn::Embedding tokens_{nullptr}, positions_{nullptr}, types_{nullptr};
  nn::LayerNorm norm_{nullptr};
};

// Multi-head self-attention and a GELU MLP; post-norm (BERT) or pre-norm
// (GPT-2). Split: attention by heads (Q, K, V by columns, the output
// projection by rows), the MLP's first linear by columns, its second by rows.
class TransformerLayer : public LayerModule, GroupMember {
 public:
  TransformerLayer(const TransformerSpec& s, std::shared_ptr<TensorGroup> group)
      : GroupMember(std::move(group)), s_(s) {
    qkv_ = register_module("qkv", nn::Linear(s.hidden, 3 * s.hidden / ways()));
    proj_ = register_module("proj", nn::Linear(s.hidden / ways(), s.hidden));
    fc1_ = register_module("fc1", nn::Linear(s.hidden, s.ffn / ways()));
    fc2_ = register_module("fc2", nn::Linear(s.ffn / ways(), s.hidden));
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
  std::optional<ShardDim> shardDim(const std::string& name) const override {
    if (name == "qkv.weight" || name == "qkv.bias") return ShardDim{0, 3};
    if (name == "fc1.weight" || name == "fc1.bias") return ShardDim{0, 1};
    if (name == "proj.weight" || name == "fc2.weight") return ShardDim{1, 1};
    return std::nullopt;
  }

 private:
  // Dropout as the split block draws it (model/tensor_parallel.h).
  torch::Tensor drop(const torch::Tensor& x) { return slicedDropout(x, s_.dropout, is_training()); }

  torch::Tensor attention(const torch::Tensor& x) {
    const auto n = x.size(0), seq = x.size(1), heads = s_.heads / ways(), d = s_.hidden / s_.heads;
    // [N, S, 3H/t] -> three [N, heads/t, S, d]
    auto parts = qkv_(enter(x)).view({n, seq, 3, heads, d}).permute({2, 0, 3, 1, 4}).unbind(0);
    torch::Tensor scores = torch::matmul(parts[0], parts[1].transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
    if (s_.causal) {
      const auto mask = torch::ones({seq, seq}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).triu(1);
      scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
    }
    torch::Tensor probs =
        slicedDropout(torch::softmax(scores, -1), s_.dropout, is_training(), 1, rank(), static_cast<int>(ways()));
    torch::Tensor context = torch::matmul(probs, parts[2]).transpose(1, 2).reshape({n, seq, heads * d});
    return rowSplit(proj_, context);
  }

  torch::Tensor mlp(const torch::Tensor& x) { return rowSplit(fc2_, torch::gelu(fc1_(enter(x)))); }

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

// [LayerNorm] -> vocabulary logits (no bias, as GPT-2). Split: each rank's
// slice of the vocabulary's logits (model::modelLoss takes it from there).
class LmHeadLayer : public LayerModule, GroupMember {
 public:
  LmHeadLayer(const LmHeadSpec& s, std::shared_ptr<TensorGroup> group) : GroupMember(std::move(group)), s_(s) {
    if (s.final_norm) norm_ = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({s.hidden}).eps(1e-5)));
    out_ = register_module("out", nn::Linear(nn::LinearOptions(s.hidden, s.vocab / ways()).bias(false)));
  }
  torch::Tensor forward(torch::Tensor x) override { return out_(enter(s_.final_norm ? norm_(x) : x)); }
  std::optional<ShardDim> shardDim(const std::string& name) const override {
    if (name == "out.weight") return ShardDim{0, 1};
    return std::nullopt;
  }

 private:
  LmHeadSpec s_;
  nn::LayerNorm norm_{nullptr};
  nn::Linear out_{nullptr};
};

}  // namespace

std::shared_ptr<LayerModule> makeLayer(const LayerSpec& spec, const std::shared_ptr<TensorGroup>& group) {
  return std::visit(
      [&group](const auto& s) -> std::shared_ptr<LayerModule> {
        using T = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<T, ConvSpec>) return std::make_shared<ConvLayer>(s);
        if constexpr (std::is_same_v<T, LinearSpec>) return std::make_shared<LinearLayer>(s);
        if constexpr (std::is_same_v<T, BasicBlockSpec>) return std::make_shared<BasicBlockLayer>(s);
        if constexpr (std::is_same_v<T, BottleneckSpec>) return std::make_shared<BottleneckLayer>(s);
        if constexpr (std::is_same_v<T, EmbeddingSpec>) return std::make_shared<EmbeddingLayer>(s, group);
        if constexpr (std::is_same_v<T, TransformerSpec>) return std::make_shared<TransformerLayer>(s, group);
        if constexpr (std::is_same_v<T, SequenceClassifierSpec>) return std::make_shared<SequenceClassifierLayer>(s);
        if constexpr (std::is_same_v<T, LmHeadSpec>) return std::make_shared<LmHeadLayer>(s, group);
      },
      spec.params);
}

}  // namespace hydrozoa::model
