#include "model/tensor_parallel.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "core/status.h"
#include "model/layers.h"

namespace hydrozoa::model {

TensorGroup::TensorGroup(int rank, int size, c10::intrusive_ptr<c10d::Backend> group)
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

std::shared_ptr<LayerModule> splitLayer(const LayerSpec& spec, const std::shared_ptr<LayerModule>& whole,
                                        const std::shared_ptr<TensorGroup>& group) {
  if (group->size() == 1 || !tensorSplit(kindName(spec.params))) return whole;
  std::shared_ptr<LayerModule> split = makeLayer(spec, group);
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
