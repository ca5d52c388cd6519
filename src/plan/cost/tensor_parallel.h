// Tensor model parallelism as the planner costs it: Megatron's splits of a
// transformer's layers across the t workers of a tensor group (PTD-P, seed
// 003 §4.2.3), costed as §4.3 analyses them (docs/plan.md, "Tensor
// parallelism").
//
// Which layers split (the model's zoo architecture, model/arch.h, says what
// each profile layer is):
//   transformer   attention heads and the MLP's inner dimension split t ways:
//                 Q, K, V and the MLP's first linear by columns, the output
//                 projection and the MLP's second linear by rows. Per
//                 microbatch, 2 allreduces of b·s·h elements in the forward
//                 pass (the g operators) and 2 in the backward pass (f).
//   embedding     the token table split by vocabulary: 1 allreduce of b·s·h
//                 in the forward pass (the partial embeddings summed).
//   lm_head       the output projection split by vocabulary, the parallel
//                 cross-entropy: 1 allreduce of b·s·h in the backward pass
//                 (the f at its input) and, in the forward pass, 3 of b·s
//                 elements (the logits' maximum, the sum of exponentials and
//                 the target's logit), so logits are never gathered.
// Every other layer is replicated on the t workers (full compute, full
// memory): a model without a layer that splits cannot take t > 1.
//
// Assumptions (each a place where a measurement would do better):
//  - A split layer's forward and backward time is the profile's divided by
//    t, and by `efficiency` (1: the sub-matrices run as fast per FLOP as
//    the whole; §4.3.3 warns they may not on small layers).
//  - Its parameters, gradients and optimizer state (and the update's time)
//    are divided by t except the parts every rank keeps whole: layer norms,
//    the row-parallel linears' biases, the position embeddings — a few
//    hidden-sized vectors, computed exactly from the architecture.
//  - Its stashed activations are divided by t except the ones every rank
//    holds whole: per transformer layer 5·s·h of the block's (its input, both
//    layer norms' inputs and outputs, as Korthikanti et al. count them), the
//    embedding's output (all of it), the LM head's layer norm. The rest (Q,
//    K, V, the attention scores, the MLP's inner activations, the logits)
//    is split.
//  - An allreduce of n bytes over the group is a ring on the tensor
//    group's link: 2(t−1) rounds of n/(t·D_t) + α·n/t + β (allreduce.h),
//    synchronous with the pass that issues it (so it adds to its time).
//
// Between pipeline stages each tensor rank holds the whole boundary
// activation (b·s·h). Without scatter/gather every rank sends it to its
// counterpart; with it (§4.4.1, Megatron's default) each sends 1/t over its
// own link and the receivers all-gather: (t−1) rounds of n/(t·D_t) + α·n/t + β.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "plan/cost/pipeline.h"
#include "profile/profile.h"

namespace hydrozoa::plan {

enum class TensorSplit { kReplicated, kTransformer, kEmbedding, kLmHead };

struct TensorLayer {
  TensorSplit split = TensorSplit::kReplicated;
  // What every rank holds whole, as fractions of the layer's parameters and
  // of its stashed activations (1: replicated); the rest is divided by t.
  double replicated_parameters = 1;
  double replicated_activations = 1;
  std::int64_t sequence = 0;  // s: tokens per sample
};

// A model's layers as tensor parallelism splits them.
struct TensorModel {
  std::string model;
  std::vector<TensorLayer> layers;  // one per profile layer
  // The sizes t must divide, in this order: heads, hidden, ffn, vocab.
  std::vector<std::pair<std::string, std::int64_t>> sizes;
  std::string why_none;  // when no layer splits: why ("cnn has no ...")

  bool splittable() const { return why_none.empty(); }
};

// From the profile's model: its zoo architecture rebuilt from its name and
// resolved options. A model that is not the zoo's (a TorchScript file,
// PipeDream's graph), or whose profile's layers are not the architecture's,
// has no layer that splits (why_none says so).
TensorModel tensorModelOf(const profile::Profile& profile);

// The t from 1 to `most` that divide `workers` and every size of `model`,
// ascending (1 always).
std::vector<int> validTensorParallel(const TensorModel& model, int workers, int most);

// OK when t workers can share the model's layers on `workers` workers; else
// one line naming the constraint and the values that keep it, e.g.
// "--tensor-parallel 3 does not divide heads=4: use 1, 2 or 4".
Status checkTensorParallel(const TensorModel& model, int t, int workers);

// "1, 2 or 4".
std::string alternativesText(const std::vector<int>& values);

// The profile one rank of a t-way tensor group sees: the split layers'
// times, parameters, optimizer state, update and stashed activations as
// above (the LM head's logits too), everything else as it was.
// REQUIRES: model.layers.size() == profile.numLayers(), t >= 1, efficiency > 0.
profile::Profile tensorParallelProfile(const profile::Profile& profile, const TensorModel& model, int t,
                                       double efficiency = 1);

// The tensor group's allreduces of one microbatch through layer i, in bytes
// each, at measurement m of the unsplit profile.
struct TensorAllreduces {
  std::vector<std::vector<Bytes>> forward, backward;  // per layer
};
TensorAllreduces tensorAllreduces(const TensorModel& model, const profile::Measurement& m);

// The tensor group's link and its ring fit.
struct TensorLink {
  int t = 1;
  BytesPerSecond bandwidth = 0;  // D_t
  double alpha = 0;              // s per byte per round beyond 1/D_t
  Seconds beta = 0;              // s per round (with the link's latency)
};

// An allreduce and an all-gather of `bytes` over the group.
Seconds tensorAllreduceTime(Bytes bytes, const TensorLink& link);
Seconds tensorAllGatherTime(Bytes bytes, const TensorLink& link);

// The pipeline's link between stages, for the transfers' time.
struct StageLink {
  BytesPerSecond bandwidth = 0;
  Seconds latency = 0;  // per message
  bool scatter_gather = true;
};

// Adds the tensor group's allreduces to `costs`' forward and backward times
// (of the unsplit profile's measurement m, per layer) and prices each cut's
// transfer as t ranks send it (scatter/gather or not); returns the seconds
// per microbatch it added to each layer's passes, forward + backward.
// Nothing changes at t = 1. REQUIRES: costs of m's chain.
std::vector<Seconds> addTensorParallelCosts(ChainCosts& costs, const TensorModel& model,
                                            const profile::Measurement& m, const TensorLink& link,
                                            const StageLink& stages);

}  // namespace hydrozoa::plan
