// Tensor model parallelism (Megatron-LM; seed 003 §4.2): a transformer
// block's layers split across the t ranks of a tensor-parallel group.
//
// In a block, the MLP's first linear layer is split by columns (each rank
// computes 1/t of the hidden units, GELU applies per unit) and the second by
// rows (each rank's partial product, summed across the group); attention is
// split by heads (Q, K and V by columns, the output projection by rows). Two
// conjugate operators join the split region to the replicated rest:
//   f: identity forward, allreduce of the gradient backward (entering);
//   g: allreduce forward, identity backward (leaving),
// so a block costs one allreduce of b·s·h elements in each of attention and
// MLP, forward and backward. The embedding is split over the vocabulary
// (each rank looks up the ids in its slice, zeros elsewhere, g sums them),
// and so is the language-model head: its logits stay split, and the loss is
// the vocabulary-parallel cross-entropy (three allreduces of b·s elements),
// so the b·s·V logits are never gathered whole. Layer norms, biases after a
// row-split layer, position embeddings and every layer of another kind are
// replicated: their inputs are equal on every rank, so their outputs and
// gradients are too, and they need no synchronisation.
//
// Dropout: inside the split region (attention probabilities) each rank draws
// the mask of the whole tensor and keeps its slice; outside it every rank
// draws the same whole mask. With the per-layer seeds of the runtime
// (runtime/stage.h) every rank then consumes the generator as the unsplit
// layer does, and the masks are those of one process.
//
// Exactness: a split layer's slices are the unsplit layer's weights (each
// rank builds the layer whole from its seed and keeps its slice). Results
// differ from the unsplit layer's only by the order of additions in the
// row-split products and the allreduces (float32 reassociation).
//
// Checkpoints hold whole tensors: unshard() of the t slices is exact, and
// shardOf() cuts a whole tensor for any t, so a run resumes at another t.
//
// Thread-safety: a TensorGroup's collectives are blocking and issued by one
// thread per rank, in the same order on every rank (the same graph).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/arch.h"
#include "model/model.h"

namespace hydrozoa::model {

class TensorGroup {
 public:
  // `group`: a process group over the t ranks; null until attach() (the
  // layers are built before the workers connect), and always when size is 1.
  TensorGroup(int rank, int size, c10::intrusive_ptr<c10d::Backend> group = {});
  void attach(c10::intrusive_ptr<c10d::Backend> group) { group_ = std::move(group); }

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Blocking collectives over the group; `t` contiguous.
  void allreduce(torch::Tensor& t, c10d::ReduceOp op = c10d::ReduceOp::SUM);
  // Every rank's `t` (same shape), in rank order.
  std::vector<torch::Tensor> allgather(const torch::Tensor& t);

  // Payload bytes this rank has put into allreduces and all-gathers so far
  // (the bench compares them with the cost model's volumes).
  std::int64_t bytesReduced() const { return reduced_.load(); }

 private:
  int rank_, size_;
  c10::intrusive_ptr<c10d::Backend> group_;
  std::atomic<std::int64_t> reduced_{0};
};

// Slice `rank` of `size` of a whole tensor, and the whole tensor from all
// slices in rank order; both exact (copies of elements).
torch::Tensor shardOf(const torch::Tensor& whole, ShardDim s, int rank, int size);
torch::Tensor unshard(const std::vector<torch::Tensor>& slices, ShardDim s);

// f and g (see the header comment).
torch::Tensor copyToTensorRegion(const torch::Tensor& x, TensorGroup& group);
torch::Tensor reduceFromTensorRegion(const torch::Tensor& x, TensorGroup& group);

// Dropout of `x`, rank `rank` of `size`'s slice along `dim` of a tensor
// `size` times larger there: the whole tensor's mask is drawn (as
// torch::dropout draws it on CPU: bernoulli(1 − p), scaled by 1/(1 − p)) and
// this rank's slice applied. size 1: plain dropout. Identity unless training
// and p > 0.
torch::Tensor slicedDropout(const torch::Tensor& x, double p, bool training, int dim = 0, int rank = 0,
                            int size = 1);

// Mean cross-entropy of logits split over the vocabulary (`logits`: this
// rank's [..., V/t], the rank's slice starting at rank·V/t) against `labels`
// (ids in [0, V), shape logits' without the last dimension).
torch::Tensor vocabParallelCrossEntropy(const torch::Tensor& logits, const torch::Tensor& labels, TensorGroup& group);
// argmax over the whole vocabulary of split logits: [...] ids.
torch::Tensor vocabParallelArgmax(const torch::Tensor& logits, TensorGroup& group);

// The split module of layer `spec` for `group`, its parameters the slices of
// `whole` (the unsplit module, built from the layer's seed); `whole` itself
// (replicated) for the kinds tensor parallelism does not split.
std::shared_ptr<LayerModule> splitLayer(const LayerSpec& spec, const std::shared_ptr<LayerModule>& whole,
                                        const std::shared_ptr<TensorGroup>& group);

}  // namespace hydrozoa::model
