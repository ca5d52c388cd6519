#include "plan/cost/funcpipe.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace hydrozoa::plan {

namespace {

bool finiteNonNegative(double v) { return std::isfinite(v) && v >= 0; }

// Layer i's stage and that stage's tier, per layer.
std::vector<int> tierOfLayers(const FuncPipeConfig& c, int L) {
  std::vector<int> t(static_cast<size_t>(L));
  for (int s = 0; s < c.numStages(); ++s) {
    const int end = s + 1 < c.numStages() ? c.first[s + 1] : L;
    for (int i = c.first[s]; i < end; ++i) t[i] = c.tier[s];
  }
  return t;
}

}  // namespace

Status validateFuncPipeProblem(const FuncPipeProblem& p) {
  const int L = p.numLayers();
  if (L < 1) return invalidArgument("the FuncPipe problem has no layers");
  if (p.tiers.empty()) return invalidArgument("the FuncPipe problem has no memory tiers");
  for (auto [name, n] : {std::pair{"backward", p.backward.size()}, {"output", p.output.size()},
                         {"activation", p.activation.size()}, {"parameters", p.parameters.size()}}) {
    if (n != static_cast<size_t>(L)) {
      return invalidArgument(fmt::format("the FuncPipe problem's {} has {} entries for {} layers", name, n, L));
    }
  }
  for (int i = 0; i < L; ++i) {
    for (const auto* times : {&p.forward, &p.backward}) {
      if ((*times)[i].size() != p.tiers.size()) {
        return invalidArgument(fmt::format("layer {}'s compute times have {} entries for {} tiers", i,
                                           (*times)[i].size(), p.tiers.size()));
      }
      for (Seconds t : (*times)[i]) {
        if (!finiteNonNegative(t)) return invalidArgument(fmt::format("layer {}'s compute time {} is not a time", i, t));
      }
    }
    if (p.output[i] < 0 || p.activation[i] < 0 || p.parameters[i] < 0) {
      return invalidArgument(fmt::format("layer {} has a negative size", i));
    }
  }
  for (size_t j = 0; j < p.tiers.size(); ++j) {
    if (p.tiers[j].memory <= 0 || !(p.tiers[j].bandwidth > 0) || !std::isfinite(p.tiers[j].bandwidth)) {
      return invalidArgument(fmt::format("memory tier {} needs a memory and a bandwidth above 0", j));
    }
    if (j > 0 && p.tiers[j].memory <= p.tiers[j - 1].memory) {
      return invalidArgument("the memory tiers must be in ascending order of memory, each once");
    }
  }
  if (p.data_parallel.empty()) return invalidArgument("the FuncPipe problem has no data-parallel degrees");
  for (int d : p.data_parallel) {
    if (d < 1 || d > 4096) return invalidArgument(fmt::format("data-parallel degree {} is out of range 1..4096", d));
  }
  if (p.microbatches < 1 || p.microbatches > (std::int64_t{1} << 20)) {
    return invalidArgument(fmt::format("{} microbatches is out of range 1..2^20", p.microbatches));
  }
  if (p.workers < 0) return invalidArgument("the worker limit must not be negative");
  if (p.worker_bytes < 0) return invalidArgument("a worker's own memory must not be negative");
  for (auto [name, v] : {std::pair{"optimizer state factor", p.optimizer_state}, {"latency", p.latency},
                         {"price", p.price_per_gb_second}}) {
    if (!finiteNonNegative(v)) return invalidArgument(fmt::format("the {} {} must be a number from 0", name, v));
  }
  if (!(p.slowdown >= 1) || !std::isfinite(p.slowdown)) {
    return invalidArgument(fmt::format("the slowdown {} must be at least 1", p.slowdown));
  }
  return Status();
}

Status validateFuncPipeConfig(const FuncPipeProblem& p, const FuncPipeConfig& c) {
  const int L = p.numLayers();
  if (c.first.empty() || c.first[0] != 0) return invalidArgument("a configuration's first stage starts at layer 0");
  if (c.tier.size() != c.first.size()) return invalidArgument("a configuration needs one tier per stage");
  for (int s = 0; s < c.numStages(); ++s) {
    if (c.first[s] >= L || (s > 0 && c.first[s] <= c.first[s - 1])) {
      return invalidArgument("a configuration's stages must start at ascending layers of the chain");
    }
    if (c.tier[s] < 0 || c.tier[s] >= p.numTiers()) return invalidArgument("a stage's tier is not one of the problem's");
  }
  if (std::find(p.data_parallel.begin(), p.data_parallel.end(), c.data_parallel) == p.data_parallel.end() ||
      p.microbatches % c.data_parallel != 0) {
    return invalidArgument(fmt::format("data-parallel degree {} is not one of the problem's, or does not divide its "
                                       "{} microbatches",
                                       c.data_parallel, p.microbatches));
  }
  if (p.workers > 0 && static_cast<std::int64_t>(c.data_parallel) * c.numStages() > p.workers) {
    return invalidArgument(fmt::format("{} stages × {} replicas need more than the {} workers", c.numStages(),
                                       c.data_parallel, p.workers));
  }
  return Status();
}

SyncTerms syncTerms(const FuncPipeProblem& p, int d) {
  if (d <= 1) return {};
  if (p.sync == ScatterReduce::kPipelined) return {2.0, 2.0 + d};
  return {3.0 - 2.0 / d, 4.0};
}

Bytes stageNeeds(const FuncPipeProblem& p, int d, double activations, double parameters) {
  const double mu = static_cast<double>(p.microbatches / d);
  const double state = 2 + p.optimizer_state + (d > 1 ? 2 : 0);
  const double need = mu * activations + state * parameters + static_cast<double>(p.worker_bytes);
  return need >= 9e18 ? std::numeric_limits<Bytes>::max() : static_cast<Bytes>(std::ceil(need));
}

FuncPipeCost funcPipeCost(const FuncPipeProblem& p, const FuncPipeConfig& c) {
  const int L = p.numLayers();
  const int d = c.data_parallel;
  const double mu = static_cast<double>(p.microbatches / d);
  const std::vector<int> tier = tierOfLayers(c, L);
  std::vector<bool> cut(static_cast<size_t>(L), false);  // x_i: a stage ends after layer i (not the last)
  for (int s = 1; s < c.numStages(); ++s) cut[c.first[s] - 1] = true;

  // Transfers over the boundary after layer i (0 where there is none):
  // forward up and down, and the gradient back up and down.
  std::vector<Seconds> fu(L, 0), fd(L, 0), bu(L, 0), bd(L, 0);
  for (int i = 0; i + 1 < L; ++i) {
    if (!cut[i]) continue;
    const double o = static_cast<double>(p.output[i]);
    fu[i] = o / p.tiers[tier[i]].bandwidth + p.latency;
    fd[i] = o / p.tiers[tier[i + 1]].bandwidth + p.latency;
    bu[i] = o / p.tiers[tier[i + 1]].bandwidth + p.latency;  // by layer i+1's workers
    bd[i] = o / p.tiers[tier[i]].bandwidth + p.latency;      // by layer i's
  }
  std::vector<Seconds> fc(L), bc(L);
  for (int i = 0; i < L; ++i) {
    fc[i] = p.slowdown * p.forward[i][tier[i]];
    bc[i] = p.slowdown * p.backward[i][tier[i]];
  }
  // Hats: from layer i to the top of its stage.
  std::vector<double> fHat(L), bHat(L), sHat(L), aHat(L);
  for (int i = L - 1; i >= 0; --i) {
    const bool top = i == L - 1 || cut[i];
    fHat[i] = fc[i] + (top ? 0 : fHat[i + 1]);
    bHat[i] = bc[i] + (top ? 0 : bHat[i + 1]);
    sHat[i] = static_cast<double>(p.parameters[i]) + (top ? 0 : sHat[i + 1]);
    aHat[i] = static_cast<double>(p.activation[i]) + (top ? 0 : aHat[i + 1]);
  }

  FuncPipeCost out;
  Seconds first = 0, lag = 0;
  for (int i = 0; i < L; ++i) {
    first += fc[i] + fu[i] + fd[i];
    lag = std::max({lag, fHat[i], fu[i], fd[i]});
  }
  out.forward = first + (mu - 1) * lag;

  const SyncTerms sync = syncTerms(p, d);
  // From the top down: the sums over k ≥ i and the lag over them.
  Seconds below = 0, lagB = 0;
  for (int i = L - 1; i >= 0; --i) {
    if (i + 1 < L) {  // the boundary after i: its transfers count for t_b^k, k ≤ i
      below += bu[i] + bd[i];
      lagB = std::max({lagB, bu[i], bd[i]});
    }
    below += bc[i];
    lagB = std::max(lagB, bHat[i]);
    const Seconds tb = below + (mu - 1) * lagB;
    const Seconds ts = sync.gamma * sHat[i] / p.tiers[tier[i]].bandwidth + sync.delta * p.latency;  // 0 at d = 1
    out.backward = std::max(out.backward, tb + ts);
  }
  out.iteration = out.forward + out.backward;

  for (int s = 0; s < c.numStages(); ++s) {
    const int i = c.first[s];
    const Bytes needs = stageNeeds(p, d, aHat[i], sHat[i]);
    out.needs.push_back(needs);
    out.fits = out.fits && needs <= p.tiers[c.tier[s]].memory;
    out.memory += static_cast<Bytes>(d) * p.tiers[c.tier[s]].memory;
  }
  out.dollars = p.price_per_gb_second * out.iteration * static_cast<double>(out.memory) / 1e9;
  return out;
}

double funcPipeObjective(const FuncPipeCost& cost, const FuncPipeWeights& w) {
  return w.cost * cost.dollars + w.time * cost.iteration;
}

std::optional<FuncPipeConfig> bestByEnumeration(const FuncPipeProblem& p, const FuncPipeWeights& w) {
  const int L = p.numLayers(), J = p.numTiers();
  std::optional<FuncPipeConfig> best;
  double bestValue = 0;
  for (int d : p.data_parallel) {
    if (p.microbatches % d != 0) continue;
    for (std::uint32_t cuts = 0; cuts < (1u << (L - 1)); ++cuts) {
      FuncPipeConfig c;
      c.data_parallel = d;
      c.first = {0};
      for (int i = 0; i + 1 < L; ++i) {
        if (cuts & (1u << i)) c.first.push_back(i + 1);
      }
      if (p.workers > 0 && static_cast<std::int64_t>(d) * c.numStages() > p.workers) continue;
      c.tier.assign(c.first.size(), 0);
      // Every tier per stage, as an odometer.
      for (;;) {
        const FuncPipeCost cost = funcPipeCost(p, c);
        if (cost.fits) {
          const double value = funcPipeObjective(cost, w);
          if (!best || value < bestValue) {
            best = c;
            bestValue = value;
          }
        }
        size_t s = 0;
        while (s < c.tier.size() && ++c.tier[s] == J) c.tier[s++] = 0;
        if (s == c.tier.size()) break;
      }
    }
  }
  return best;
}

}  // namespace hydrozoa::plan
