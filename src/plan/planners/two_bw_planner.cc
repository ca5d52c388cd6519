#include "plan/planners/two_bw_planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

#include "core/table.h"

namespace hydrozoa::plan {
namespace {

// Contiguous pieces of `cost` into `parts`, least maximal sum: the first
// index of each piece.
std::vector<int> balancedSplit(const std::vector<double>& cost, int parts) {
  const int n = static_cast<int>(cost.size());
  std::vector<double> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + cost[i];
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][j]: the least maximal piece over the first j layers in k pieces.
  std::vector<std::vector<double>> best(parts + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(parts + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= parts; ++k) {
    for (int j = k; j <= n; ++j) {
      for (int i = k - 1; i < j; ++i) {
        const double v = std::max(best[k - 1][i], prefix[j] - prefix[i]);
        if (v < best[k][j]) {
          best[k][j] = v;
          cut[k][j] = i;
        }
      }
    }
  }
  std::vector<int> first(parts);
  for (int k = parts, j = n; k >= 1; --k) {
    first[k - 1] = cut[k][j];
    j = cut[k][j];
  }
  return first;
}

}  // namespace

TwoBwConfig evaluateTwoBw(const profile::Profile& profile, const profile::Measurement& meas,
                          const TwoBwPlannerOptions& o, TwoBwConfig c) {
  const int L = static_cast<int>(profile.numLayers());
  const int p = c.stages, d = c.data_parallel;
  std::vector<double> compute(L);
  for (int i = 0; i < L; ++i) compute[i] = (meas.layers[i].forward_ms + meas.layers[i].backward_ms) / 1e3;
  c.first_layer = balancedSplit(compute, p);
  const double extra = c.recompute ? o.c_extra : 1.0;
  const bool twoBw = c.schedule == ScheduleKind::kTwoBW;
  Seconds perMicrobatch = 0;
  c.memory = 0;
  for (int s = 0; s < p; ++s) {
    const int first = c.first_layer[s], last = s + 1 < p ? c.first_layer[s + 1] - 1 : L - 1;
    double T = 0;
    Bytes weights = 0, stashed = 0;
    for (int i = first; i <= last; ++i) {
      T += compute[i];
      weights += profile.layers[i].parameter_bytes;
      stashed += meas.layers[i].stashed_bytes;
    }
    const Bytes in = first == 0 ? meas.input_bytes : meas.layers[first - 1].output_bytes;
    const Bytes boundaryIn = first == 0 ? 0 : in;
    const Bytes boundaryOut = last == L - 1 ? 0 : meas.layers[last].output_bytes;
    const Seconds transfers =
        p > 1 && o.in_pipeline > 0 ? 2.0 * static_cast<double>(boundaryIn + boundaryOut) / o.in_pipeline : 0;
    const Seconds ring = d > 1 && o.cross_pipeline > 0
                             ? 2.0 * (d - 1) / d * static_cast<double>(weights) / o.cross_pipeline
                             : 0;
    perMicrobatch = std::max(perMicrobatch, std::max(extra * T + transfers, ring / static_cast<double>(c.microbatches)));
    const Bytes versions = (twoBw ? 2 : 1) * weights;
    const Bytes activations = (c.recompute ? 1 : p) * stashed;
    c.memory = std::max(c.memory, versions + activations + static_cast<Bytes>(p) * in);
  }
  const double batch = static_cast<double>(c.microbatch_size * c.microbatches * d);
  c.batch_seconds = perMicrobatch * static_cast<double>(twoBw ? c.microbatches : c.microbatches + p - 1);
  c.samples_per_second = c.batch_seconds > 0 ? batch / c.batch_seconds : 0;
  c.fits = !o.memory_limit || c.memory <= *o.memory_limit;
  return c;
}

Result<TwoBwPlannerResult> planTwoBw(const profile::Profile& profile, const TwoBwPlannerOptions& o) {
  const int L = static_cast<int>(profile.numLayers());
  if (L == 0 || profile.measurements.empty()) return invalidArgument("--planner 2bw needs a profile with measurements");
  if (o.workers < 1) return invalidArgument("--planner 2bw needs --workers");
  if (o.global_batch < 1) return invalidArgument("--planner 2bw needs --global-batch (B: samples per batch)");
  TwoBwPlannerResult r;
  for (int d = 1; d <= o.workers; ++d) {
    if (o.workers % d != 0) continue;
    const int p = o.workers / d;
    if (p > L) continue;
    for (const profile::Measurement& meas : profile.measurements) {
      const std::int64_t b = meas.microbatch_size;
      if (b < 1 || o.global_batch % (static_cast<std::int64_t>(d) * b) != 0) continue;
      const std::int64_t m = o.global_batch / (static_cast<std::int64_t>(d) * b);
      for (ScheduleKind kind : {ScheduleKind::kTwoBW, ScheduleKind::kOneFOneB}) {
        // 2BW pipelines (p > 1; one stage is data parallelism, flushed)
        // and needs m ≥ p, or a third weight version would be live.
        if (kind == ScheduleKind::kTwoBW && (p == 1 || m < p)) continue;
        for (bool recompute : {false, true}) {
          TwoBwConfig c;
          c.schedule = kind;
          c.data_parallel = d;
          c.stages = p;
          c.microbatch_size = b;
          c.microbatches = m;
          c.recompute = recompute;
          c = evaluateTwoBw(profile, meas, o, c);
          if (c.fits && (!r.best || c.samples_per_second > r.best->samples_per_second)) r.best = c;
          r.considered.push_back(std::move(c));
        }
      }
    }
  }
  if (r.considered.empty()) {
    return invalidArgument(fmt::format("no measured microbatch size divides --global-batch {} among the replicas of "
                                       "any split of {} workers; profile other sizes or change the batch",
                                       o.global_batch, o.workers));
  }
  return r;
}

std::string renderTwoBw(const TwoBwPlannerResult& r, const TwoBwPlannerOptions& o) {
  // The best of each (d, p, schedule): fits first, then throughput.
  std::map<std::tuple<int, int, int>, const TwoBwConfig*> best;
  for (const TwoBwConfig& c : r.considered) {
    const auto key = std::make_tuple(c.data_parallel, c.stages, c.schedule == ScheduleKind::kTwoBW ? 0 : 1);
    const TwoBwConfig*& b = best[key];
    if (!b || (c.fits && !b->fits) || (c.fits == b->fits && c.samples_per_second > b->samples_per_second)) b = &c;
  }
  TextTable table({"", "d×p", "schedule", "b", "m", "recompute", "batch time", "samples/s", "memory/worker", ""},
                  {false, false, false, true, true, false, true, true, true, false});
  for (const auto& [key, c] : best) {
    const bool chosen = r.best && r.best->data_parallel == c->data_parallel && r.best->stages == c->stages &&
                        r.best->schedule == c->schedule && r.best->microbatch_size == c->microbatch_size &&
                        r.best->recompute == c->recompute;
    table.addRow({chosen ? "*" : "", fmt::format("{}×{}", c->data_parallel, c->stages),
                  c->schedule == ScheduleKind::kTwoBW ? "2bw" : "1f1b (flush)", std::to_string(c->microbatch_size),
                  std::to_string(c->microbatches), c->recompute ? "yes" : "no", formatSeconds(c->batch_seconds),
                  fmt::format("{:.1f}", c->samples_per_second), formatBytes(c->memory),
                  c->fits ? "" : "does not fit"});
  }
  std::string out = fmt::format(
      "PipeDream-2BW's planner: {} workers, batch {}, {} between stages, {} between replicas{} (the best of each "
      "split; * chosen, fastest that fits):\n",
      o.workers, o.global_batch, formatBandwidth(o.in_pipeline), formatBandwidth(o.cross_pipeline),
      o.memory_limit ? fmt::format(", {} per worker", formatBytes(*o.memory_limit)) : "");
  out += table.render();
  if (!r.best) out += "Nothing fits the memory; more workers, a smaller batch or --memory would.\n";
  return out;
}

}  // namespace hydrozoa::plan
