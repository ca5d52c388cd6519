#include "model/tensor_parallel.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/status.h"

namespace hydrozoa::model {

TensorGroup::TensorGroup(int rank, int size, c10::intrusive_ptr<c10d::ProcessGroup> group)
    : rank_(rank), size_(size), group_(std::move(group)) {
  HZ_CHECK(size >= 1 && rank >= 0 && rank < size);
}

void TensorGroup::allreduce(torch::Tensor& t, c10d::ReduceOp op) {
  if (size_ == 1) return;
  HZ_CHECK(t.is_contiguous() && group_);
  std::vector<at::Tensor> v = {t};
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  group_->allreduce(v, options)->wait();
  reduced_ += static_cast<std::int64_t>(t.numel() * t.element_size());
}

std::vector<torch::Tensor> TensorGroup::allgather(const torch::Tensor& t) {
  if (size_ == 1) return {t};
  HZ_CHECK(t.is_contiguous() && group_);
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < size_; ++r) out[0].push_back(torch::empty_like(t));
  std::vector<at::Tensor> in = {t};
  group_->allgather(out, in)->wait();
  reduced_ += static_cast<std::int64_t>(t.numel() * t.element_size());
  return out[0];
}

namespace {

// The slice of `size` along s.dim: `blocks` blocks, each cut in `size` pieces.
std::vector<torch::Tensor> blocksOf(const torch::Tensor& t, ShardDim s) {
  HZ_CHECK(s.dim >= 0 && s.dim < t.dim() && s.blocks >= 1 && t.size(s.dim) % s.blocks == 0);
  return t.chunk(s.blocks, s.dim);
}

}  // namespace

torch::Tensor shardOf(const torch::Tensor& whole, ShardDim s, int rank, int size) {
  std::vector<torch::Tensor> pieces;
  for (const torch::Tensor& block : blocksOf(whole, s)) {
    HZ_CHECK(block.size(s.dim) % size == 0);
    const std::int64_t n = block.size(s.dim) / size;
    pieces.push_back(block.narrow(s.dim, rank * n, n));
  }
  return torch::cat(pieces, s.dim).contiguous();
}

torch::Tensor unshard(const std::vector<torch::Tensor>& slices, ShardDim s) {
  HZ_CHECK(!slices.empty());
  std::vector<std::vector<torch::Tensor>> perBlock(static_cast<size_t>(s.blocks));
  for (const torch::Tensor& slice : slices) {
    const auto blocks = blocksOf(slice, s);
    for (size_t b = 0; b < blocks.size(); ++b) perBlock[b].push_back(blocks[b]);
  }
  std::vector<torch::Tensor> whole;
  for (auto& pieces : perBlock) whole.push_back(torch::cat(pieces, s.dim));
  return torch::cat(whole, s.dim).contiguous();
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

TensorGroup& groupOf(AutogradContext* ctx) {
  return *reinterpret_cast<TensorGroup*>(ctx->saved_data["group"].toInt());  // NOLINT: the group outlives the graph
}

torch::Tensor reduced(const torch::Tensor& x, TensorGroup& group) {
  torch::Tensor out = x.contiguous().clone();
  group.allreduce(out);
  return out;
}

// f: identity forward, the gradient summed over the group backward.
struct CopyToRegion : torch::autograd::Function<CopyToRegion> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t group) {
    ctx->saved_data["group"] = group;
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {reduced(grads[0], groupOf(ctx)), torch::Tensor()};
  }
};

// g: summed over the group forward, identity backward.
struct ReduceFromRegion : torch::autograd::Function<ReduceFromRegion> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t group) {
    return reduced(x, *reinterpret_cast<TensorGroup*>(group));  // NOLINT
  }
  static variable_list backward(AutogradContext* /*ctx*/, variable_list grads) { return {grads[0], torch::Tensor()}; }
};

std::int64_t handle(TensorGroup& group) { return reinterpret_cast<std::int64_t>(&group); }  // NOLINT

}  // namespace

torch::Tensor copyToTensorRegion(const torch::Tensor& x, TensorGroup& group) {
  if (group.size() == 1) return x;
  return CopyToRegion::apply(x, handle(group));
}

torch::Tensor reduceFromTensorRegion(const torch::Tensor& x, TensorGroup& group) {
  if (group.size() == 1) return x;
  return ReduceFromRegion::apply(x, handle(group));
}

torch::Tensor slicedDropout(const torch::Tensor& x, double p, bool training, int dim, int rank, int size) {
  if (!training || p <= 0) return x;
  std::vector<std::int64_t> shape = x.sizes().vec();
  shape[static_cast<size_t>(dim)] *= size;
  torch::Tensor mask = torch::empty(shape, x.options().requires_grad(false)).bernoulli_(1 - p);
  if (size > 1) mask = mask.narrow(dim, rank * x.size(dim), x.size(dim));
  return x * mask.div_(1 - p);
}

torch::Tensor vocabParallelCrossEntropy(const torch::Tensor& logits, const torch::Tensor& labels, TensorGroup& group) {
  const std::int64_t slice = logits.size(-1), first = group.rank() * slice;
  const torch::Tensor flat = logits.reshape({-1, slice});
  const torch::Tensor ids = labels.reshape({-1});
  // Softmax is shift-invariant: the shift (the largest logit of each row
  // over the whole vocabulary) is a constant, outside the graph.
  torch::Tensor shift;
  {
    torch::NoGradGuard guard;
    shift = std::get<0>(flat.max(1)).contiguous();
    group.allreduce(shift, c10d::ReduceOp::MAX);
  }
  const torch::Tensor shifted = flat - shift.unsqueeze(1);
  // The target's logit: on the rank whose slice holds it, 0 on the others.
  const torch::Tensor mine = (ids >= first) & (ids < first + slice);
  const torch::Tensor local = (ids - first).masked_fill(~mine, 0);
  const torch::Tensor target =
      reduceFromTensorRegion(shifted.gather(1, local.unsqueeze(1)).squeeze(1).masked_fill(~mine, 0), group);
  const torch::Tensor sumExp = reduceFromTensorRegion(shifted.exp().sum(1), group);
  return (sumExp.log() - target).mean();
}

torch::Tensor vocabParallelArgmax(const torch::Tensor& logits, TensorGroup& group) {
  torch::NoGradGuard guard;
  const std::int64_t slice = logits.size(-1);
  auto [best, where] = logits.max(-1);
  torch::Tensor top = best.contiguous().clone();
  group.allreduce(top, c10d::ReduceOp::MAX);
  // The first index over the whole vocabulary among the ranks holding the maximum.
  torch::Tensor index = (where + group.rank() * slice)
                            .masked_fill(best != top, std::numeric_limits<std::int64_t>::max())
                            .contiguous();
  group.allreduce(index, c10d::ReduceOp::MIN);
  return index;
}

namespace {

namespace nn = torch::nn;

// Token embedding split over the vocabulary; positions (and segment 0)
// replicated.
class SplitEmbedding : public LayerModule {
 public:
  SplitEmbedding(const EmbeddingSpec& s, std::shared_ptr<TensorGroup> group) : s_(s), group_(std::move(group)) {
    tokens_ = register_module("tokens", nn::Embedding(s.vocab / group_->size(), s.hidden));
    positions_ = register_module("positions", nn::Embedding(s.max_positions, s.hidden));
    if (s.type_vocab > 0) types_ = register_module("types", nn::Embedding(s.type_vocab, s.hidden));
    if (s.layer_norm) norm_ = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({s.hidden}).eps(1e-12)));
  }
  torch::Tensor forward(torch::Tensor ids) override {
    const std::int64_t slice = s_.vocab / group_->size(), first = group_->rank() * slice;
    const torch::Tensor mine = (ids >= first) & (ids < first + slice);
    torch::Tensor x = tokens_((ids - first).masked_fill(~mine, 0)).masked_fill(~mine.unsqueeze(-1), 0);
    x = reduceFromTensorRegion(x, *group_);
    x = x + positions_->weight.narrow(0, 0, ids.size(1)).unsqueeze(0);
    if (s_.type_vocab > 0) x = x + types_->weight[0];
    if (s_.layer_norm) x = norm_(x);
    return slicedDropout(x, s_.dropout, is_training());
  }
  std::optional<ShardDim> shardDim(const std::string& name) const override {
    if (name == "tokens.weight") return ShardDim{0, 1};
    return std::nullopt;
  }

 private:
  EmbeddingSpec s_;
  std::shared_ptr<TensorGroup> group_;
  nn::Embedding tokens_{nullptr}, positions_{nullptr}, types_{nullptr};
  nn::LayerNorm norm_{nullptr};
};

// A transformer block with its heads and MLP width split (model/layers.cc's
// TransformerLayer, the same names and order of operations).
class SplitTransformer : public LayerModule {
 public:
  SplitTransformer(const TransformerSpec& s, std::shared_ptr<TensorGroup> group) : s_(s), group_(std::move(group)) {
    const std::int64_t t = group_->size();
    qkv_ = register_module("qkv", nn::Linear(s.hidden, 3 * s.hidden / t));
    proj_ = register_module("proj", nn::Linear(s.hidden / t, s.hidden));
    fc1_ = register_module("fc1", nn::Linear(s.hidden, s.ffn / t));
    fc2_ = register_module("fc2", nn::Linear(s.ffn / t, s.hidden));
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
  torch::Tensor drop(const torch::Tensor& x) { return slicedDropout(x, s_.dropout, is_training()); }

  torch::Tensor attention(const torch::Tensor& x) {
    const std::int64_t t = group_->size();
    const auto n = x.size(0), seq = x.size(1), heads = s_.heads / t, d = s_.hidden / s_.heads;
    auto parts = qkv_(copyToTensorRegion(x, *group_)).view({n, seq, 3, heads, d}).permute({2, 0, 3, 1, 4}).unbind(0);
    torch::Tensor scores = torch::matmul(parts[0], parts[1].transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
    if (s_.causal) {
      const auto mask = torch::ones({seq, seq}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).triu(1);
      scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
    }
    torch::Tensor probs =
        slicedDropout(torch::softmax(scores, -1), s_.dropout, is_training(), 1, group_->rank(), group_->size());
    torch::Tensor context = torch::matmul(probs, parts[2]).transpose(1, 2).reshape({n, seq, heads * d});
    return rowSplit(proj_, context);
  }

  torch::Tensor mlp(const torch::Tensor& x) {
    return rowSplit(fc2_, torch::gelu(fc1_(copyToTensorRegion(x, *group_))));
  }

  // A linear layer split by rows: the partial products summed over the
  // group, then the (replicated) bias added once.
  torch::Tensor rowSplit(const nn::Linear& layer, const torch::Tensor& x) {
    return reduceFromTensorRegion(torch::nn::functional::linear(x, layer->weight), *group_) + layer->bias;
  }

  TransformerSpec s_;
  std::shared_ptr<TensorGroup> group_;
  nn::Linear qkv_{nullptr}, proj_{nullptr}, fc1_{nullptr}, fc2_{nullptr};
  nn::LayerNorm norm1_{nullptr}, norm2_{nullptr};
};

// [LayerNorm] -> this rank's slice of the vocabulary's logits.
class SplitLmHead : public LayerModule {
 public:
  SplitLmHead(const LmHeadSpec& s, std::shared_ptr<TensorGroup> group) : s_(s), group_(std::move(group)) {
    if (s.final_norm) norm_ = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({s.hidden}).eps(1e-5)));
    out_ = register_module("out", nn::Linear(nn::LinearOptions(s.hidden, s.vocab / group_->size()).bias(false)));
  }
  torch::Tensor forward(torch::Tensor x) override {
    return out_(copyToTensorRegion(s_.final_norm ? norm_(x) : x, *group_));
  }
  std::optional<ShardDim> shardDim(const std::string& name) const override {
    if (name == "out.weight") return ShardDim{0, 1};
    return std::nullopt;
  }

 private:
  LmHeadSpec s_;
  std::shared_ptr<TensorGroup> group_;
  nn::LayerNorm norm_{nullptr};
  nn::Linear out_{nullptr};
};

}  // namespace

std::shared_ptr<LayerModule> splitLayer(const LayerSpec& spec, const std::shared_ptr<LayerModule>& whole,
                                        const std::shared_ptr<TensorGroup>& group) {
  std::shared_ptr<LayerModule> split;
  if (const auto* e = std::get_if<EmbeddingSpec>(&spec.params)) split = std::make_shared<SplitEmbedding>(*e, group);
  if (const auto* t = std::get_if<TransformerSpec>(&spec.params)) split = std::make_shared<SplitTransformer>(*t, group);
  if (const auto* h = std::get_if<LmHeadSpec>(&spec.params)) split = std::make_shared<SplitLmHead>(*h, group);
  if (!split || group->size() == 1) return whole;
  torch::NoGradGuard guard;
  const auto from = whole->named_parameters();
  for (auto& p : split->named_parameters()) {
    const torch::Tensor* w = from.find(p.key());
    HZ_CHECK(w != nullptr);
    const auto dim = split->shardDim(p.key());
    p.value().copy_(dim ? shardOf(*w, *dim, group->rank(), group->size()) : *w);
  }
  return split;
}

}  // namespace hydrozoa::model
