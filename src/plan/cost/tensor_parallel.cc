#include "plan/cost/tensor_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "model/arch.h"
#include "model/zoo.h"
#include "plan/cost/allreduce.h"

namespace hydrozoa::plan {
namespace {

// The zoo's models train in float32: the cross-entropy's three allreduces
// carry one float per token.
constexpr Bytes kFloatBytes = 4;

// Per transformer layer, the stashed activations every rank of the group
// holds whole, in elements of s·h: the block's input, both layer norms'
// inputs and outputs and the residual's (Korthikanti et al., "Reducing
// Activation Recomputation in Large Transformer Models", §4.1: 10·s·h bytes
// in half precision of the block's 34·s·h + 5·a·s² are not split).
constexpr double kReplicatedTransformerActivations = 5;

double fraction(double part, double whole) { return whole > 0 ? std::clamp(part / whole, 0.0, 1.0) : 1.0; }

// What each rank keeps of `bytes` when a fraction `replicated` of it is whole
// on every rank and the rest is split t ways.
double share(double replicated, int t) { return replicated + (1 - replicated) / t; }

Bytes shareOf(Bytes bytes, double replicated, int t) {
  return static_cast<Bytes>(std::llround(static_cast<double>(bytes) * share(replicated, t)));
}

}  // namespace

TensorModel tensorModelOf(const profile::Profile& profile) {
  TensorModel tm;
  tm.model = profile.model;
  tm.layers.assign(profile.numLayers(), TensorLayer{});
  const bool any = std::any_of(profile.layers.begin(), profile.layers.end(),
                               [](const profile::LayerInfo& l) { return model::tensorSplit(l.kind); });
  if (!any) {
    tm.why_none = fmt::format("{} has no layer that tensor parallelism splits (transformer, embedding or lm_head)",
                              profile.model.empty() ? "the model" : profile.model);
    return tm;
  }
  if (!model::isZooModel(profile.model)) {
    tm.why_none = fmt::format("{} is not a zoo model, so the sizes of its layers (heads, hidden, ffn, vocabulary) are "
                              "unknown",
                              profile.model);
    return tm;
  }
  auto arch = model::buildArch({profile.model, profile.options});
  if (!arch.ok()) {
    tm.why_none = fmt::format("{}'s architecture cannot be rebuilt from its profile's options ({})", profile.model,
                              arch.status().message());
    return tm;
  }
  const std::vector<model::LayerAnalysis> analysis = model::analyze(*arch);
  bool same = analysis.size() == profile.numLayers();
  for (size_t i = 0; same && i < analysis.size(); ++i) same = analysis[i].name == profile.layers[i].name;
  if (!same) {
    tm.why_none = fmt::format("the profile's layers are not those of {}'s architecture", profile.model);
    return tm;
  }
  for (size_t i = 0; i < analysis.size(); ++i) {
    const model::LayerAnalysis& a = analysis[i];
    TensorLayer& l = tm.layers[i];
    const double params = static_cast<double>(a.parameters), stashed = static_cast<double>(a.stashed_bytes);
    l.sequence = a.input_shape.empty() ? 0 : a.input_shape.front();
    const double s = static_cast<double>(l.sequence);
    std::visit(
        [&](const auto& spec) {
          using T = std::decay_t<decltype(spec)>;
          if constexpr (std::is_same_v<T, model::TransformerSpec>) {
            const double h = static_cast<double>(spec.hidden);
            l.split = TensorSplit::kTransformer;
            // The output projection's and the MLP's second bias, both layer norms' scale and shift.
            l.replicated_parameters = fraction(6 * h, params);
            l.replicated_activations = fraction(4.0 * kReplicatedTransformerActivations * s * h, stashed);
          } else if constexpr (std::is_same_v<T, model::EmbeddingSpec>) {
            const double h = static_cast<double>(spec.hidden);
            l.split = TensorSplit::kEmbedding;
            // Position and segment tables and the layer norm are whole; the output is summed whole.
            l.replicated_parameters =
                fraction((static_cast<double>(spec.max_positions + spec.type_vocab) + (spec.layer_norm ? 2 : 0)) * h,
                         params);
            l.replicated_activations = 1;
          } else if constexpr (std::is_same_v<T, model::LmHeadSpec>) {
            const double h = static_cast<double>(spec.hidden);
            l.split = TensorSplit::kLmHead;
            l.replicated_parameters = fraction(spec.final_norm ? 2 * h : 0, params);
            // The layer norm's input and output are whole; the logits and their log-softmax split.
            l.replicated_activations = fraction(4.0 * 2 * s * h, stashed);
          }
        },
        arch->layers[i].params);
  }
  // What t must divide, heads first, the vocabulary last (the order errors
  // name them in): the model's own statement of it (model/arch.h).
  const model::TensorSplitSizes sizes = model::tensorSplitSizes(*arch);
  tm.sizes = sizes.sizes;
  if (sizes.gcd == 0) tm.why_none = fmt::format("{} has no transformer block to split", profile.model);
  return tm;
}

std::vector<int> validTensorParallel(const TensorModel& model, int workers, int most) {
  std::vector<int> valid{1};
  if (!model.splittable()) return valid;
  for (int t = 2; t <= std::min(workers, most); ++t) {
    if (workers % t != 0) continue;
    const bool divides = std::all_of(model.sizes.begin(), model.sizes.end(),
                                     [t](const auto& size) { return size.second % t == 0; });
    if (divides) valid.push_back(t);
  }
  return valid;
}

std::string alternativesText(const std::vector<int>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += i + 1 == values.size() ? " or " : ", ";
    out += std::to_string(values[i]);
  }
  return out;
}

Status checkTensorParallel(const TensorModel& model, int t, int workers) {
  if (t == 1) return Status();
  if (!model.splittable()) {
    return invalidArgument(fmt::format("--tensor-parallel {}: {}: use 1", t, model.why_none));
  }
  const std::vector<int> valid = validTensorParallel(model, workers, workers);
  for (const auto& [name, value] : model.sizes) {
    if (value % t != 0) {
      return invalidArgument(
          fmt::format("--tensor-parallel {} does not divide {}={}: use {}", t, name, value, alternativesText(valid)));
    }
  }
  if (workers % t != 0) {
    return invalidArgument(fmt::format("--tensor-parallel {} does not divide --workers {} (t × stages × data-parallel "
                                       "copies are the workers): use {}",
                                       t, workers, alternativesText(valid)));
  }
  return Status();
}

profile::Profile tensorParallelProfile(const profile::Profile& profile, const TensorModel& model, int t,
                                       double efficiency) {
  HZ_CHECK(model.layers.size() == profile.numLayers() && t >= 1 && efficiency > 0);
  profile::Profile p = profile;
  if (t == 1) return p;
  const double compute = 1 / (t * efficiency);
  for (size_t i = 0; i < p.numLayers(); ++i) {
    const TensorLayer& l = model.layers[i];
    if (l.split == TensorSplit::kReplicated) continue;
    profile::LayerInfo& info = p.layers[i];
    info.parameter_bytes = shareOf(info.parameter_bytes, l.replicated_parameters, t);
    info.optimizer_state_bytes = shareOf(info.optimizer_state_bytes, l.replicated_parameters, t);
    info.optimizer_ms *= share(l.replicated_parameters, t);
    info.snapshot_ms *= share(l.replicated_parameters, t);
    for (profile::Measurement& m : p.measurements) {
      profile::LayerCost& c = m.layers[i];
      for (double* ms : {&c.forward_ms, &c.backward_ms, &c.cold_forward_ms, &c.cold_backward_ms}) *ms *= compute;
      // The LM head's logits (its output, the gradient that comes back into it) are split.
      if (l.split == TensorSplit::kLmHead) {
        c.output_bytes /= t;
        c.workspace_bytes /= t;
      }
      c.stashed_bytes = std::max(c.output_bytes, shareOf(c.stashed_bytes, l.replicated_activations, t));
    }
  }
  return p;
}

TensorAllreduces tensorAllreduces(const TensorModel& model, const profile::Measurement& m) {
  const size_t L = model.layers.size();
  HZ_CHECK(m.layers.size() == L);
  TensorAllreduces a;
  a.forward.resize(L);
  a.backward.resize(L);
  for (size_t i = 0; i < L; ++i) {
    const TensorLayer& l = model.layers[i];
    const Bytes out = m.layers[i].output_bytes;  // b·s·h elements, but the LM head's
    const Bytes in = i == 0 ? m.input_bytes : m.layers[i - 1].output_bytes;
    switch (l.split) {
      case TensorSplit::kReplicated:
        break;
      case TensorSplit::kTransformer:  // g after attention and after the MLP; f before each
        a.forward[i] = {out, out};
        a.backward[i] = {out, out};
        break;
      case TensorSplit::kEmbedding:  // g: the partial embeddings summed
        a.forward[i] = {out};
        break;
      case TensorSplit::kLmHead: {  // the cross-entropy's max, sum and target logit; f at the input
        const Bytes tokens = kFloatBytes * m.microbatch_size * l.sequence;
        a.forward[i] = {tokens, tokens, tokens};
        a.backward[i] = {in};
        break;
      }
    }
  }
  return a;
}

Seconds tensorAllreduceTime(Bytes bytes, const TensorLink& link) {
  return ringAllreduceTime(bytes, link.t, link.bandwidth, link.alpha, link.beta);
}

Seconds tensorAllGatherTime(Bytes bytes, const TensorLink& link) {
  if (link.t <= 1 || bytes <= 0) return 0;
  const double t = link.t, n = static_cast<double>(bytes);
  return (t - 1) * (n / (t * link.bandwidth) + link.alpha * n / t + link.beta);
}

std::vector<Seconds> addTensorParallelCosts(ChainCosts& costs, const TensorModel& model,
                                            const profile::Measurement& m, const TensorLink& link,
                                            const StageLink& stages) {
  const int L = costs.numLayers();
  HZ_CHECK(static_cast<int>(model.layers.size()) == L && static_cast<int>(m.layers.size()) == L);
  std::vector<Seconds> added(static_cast<size_t>(L), 0);
  if (link.t <= 1) return added;
  HZ_CHECK(link.bandwidth > 0 && stages.bandwidth > 0);
  const TensorAllreduces a = tensorAllreduces(model, m);
  auto sum = [&](const std::vector<Bytes>& sizes) {
    Seconds s = 0;
    for (Bytes n : sizes) s += tensorAllreduceTime(n, link);
    return s;
  };
  for (int i = 0; i < L; ++i) {
    const Seconds forward = sum(a.forward[i]), backward = sum(a.backward[i]);
    costs.forward[i] += forward;
    costs.backward[i] += backward;
    added[i] = forward + backward;
  }
  // NOTE [Scatter/gather between stages]: every rank of the sending group
  // holds the whole boundary activation. Without the optimisation each sends
  // it to its counterpart over its own link, in parallel: the t = 1 time.
  // With it each sends 1/t and the receiving group all-gathers the pieces
  // on its fast link (seed 003 §4.4.1); the gradient comes back the same way.
  if (stages.scatter_gather) {
    for (int u = 0; u + 1 < L; ++u) {
      const Bytes n = m.layers[static_cast<size_t>(u)].output_bytes;
      costs.cut[u] = stages.latency + static_cast<double>(n) / (link.t * stages.bandwidth) + tensorAllGatherTime(n, link);
    }
  }
  return added;
}

}  // namespace hydrozoa::plan
