#include "plan/tensor_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/table.h"
#include "plan/cost/tensor_parallel.h"

namespace hydrozoa::plan {
namespace {

const Candidate& rowOf(const std::vector<ScheduleSearch>& searches, const SearchRow& r) {
  return searches.at(r.search).result.considered.at(r.row);
}

std::string scheduleText(const SearchOptions& o) {
  std::string name = scheduleName(o.schedule);
  if (o.recompute) name += " + recompute";
  return name;
}

// "p1×t2×d4 (1f1b)".
std::string planText(const std::vector<ScheduleSearch>& searches, const SearchRow& r) {
  return fmt::format("{} ({})", rowOf(searches, r).strategy(true), scheduleText(searches.at(r.search).options));
}

// The best feasible row that `keep` accepts, over every search.
template <typename Keep>
std::optional<SearchRow> bestWhere(const std::vector<ScheduleSearch>& searches, Objective objective, Keep keep) {
  std::optional<SearchRow> best;
  for (size_t s = 0; s < searches.size(); ++s) {
    const std::vector<Candidate>& rows = searches[s].result.considered;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (!rows[i].feasible || !keep(rows[i])) continue;
      if (!best || betterCandidate(rows[i], rowOf(searches, *best), objective)) best = SearchRow{s, i};
    }
  }
  return best;
}

// Why the cost model has `other` slower than the chosen `c`: the terms of
// T = R + allreduce + update side by side.
std::string slowerBecause(const Candidate& other, const std::string& otherName, const Candidate& c) {
  const std::string tensor =
      other.tensor_communication > 0 || c.tensor_communication > 0
          ? fmt::format("tensor-parallel allreduces {} against {}, ",
                        other.tensor_communication > 0 ? formatSeconds(other.tensor_communication) : "none",
                        c.tensor_communication > 0 ? formatSeconds(c.tensor_communication) : "none")
          : "";
  return fmt::format("the cost model has {} at {} per iteration against {}: pipeline {} against {} ({}bubble {:.0f}% "
                     "against {:.0f}%), data-parallel allreduce and update after it {} against {}",
                     otherName, formatSeconds(other.iteration), formatSeconds(c.iteration),
                     formatSeconds(other.pipeline.total), formatSeconds(c.pipeline.total), tensor,
                     100 * other.bubble_fraction, 100 * c.bubble_fraction, formatSeconds(other.allreduce + other.update),
                     formatSeconds(c.allreduce + c.update));
}

// The rows of every search with this (t, p), and why none is feasible.
std::string infeasibleWhy(const std::vector<ScheduleSearch>& searches, int t, int p) {
  for (const ScheduleSearch& s : searches) {
    for (const Candidate& c : s.result.considered) {
      if (c.tensor_parallel == t && c.stages == p && !c.reason.empty()) {
        return fmt::format("{} ({}): {}", c.strategy(true), scheduleText(s.options), c.reason);
      }
    }
  }
  return fmt::format("no plan with t = {} and p = {} was considered (the pins, the workers or the schedules rule it "
                     "out)",
                     t, p);
}

// eq. (4.1), (b′/b + p − 1)·(t_f(b) + t_b(b)): a step's compute time at
// microbatch size b with communication ignored and a stage's times the
// model's over p. The bubble term is the schedule's: (p − 1)/v interleaved,
// none for a schedule that never flushes (2bw, pipedream).
Seconds equationFourOne(const profile::Measurement& m, std::int64_t perReplica, int p, const SearchOptions& o) {
  Seconds perMicrobatch = 0;
  for (const profile::LayerCost& l : m.layers) {
    perMicrobatch += (l.forward_ms * (o.recompute ? 2 : 1) + l.backward_ms) / 1e3;
  }
  const double microbatches = static_cast<double>(perReplica / m.microbatch_size);
  const double bubble = asynchronous(o.schedule) ? 0.0 : static_cast<double>(p - 1) / chunksOf(o.schedule, o.chunks);
  return (microbatches + bubble) * perMicrobatch / p;
}

}  // namespace

std::optional<SearchRow> bestSearchRow(const std::vector<ScheduleSearch>& searches, bool tensor, Objective objective) {
  return bestWhere(searches, objective, [tensor](const Candidate& c) { return (c.tensor_parallel > 1) == tensor; });
}

bool consideredTensorParallel(const std::vector<ScheduleSearch>& searches) {
  for (const ScheduleSearch& s : searches) {
    for (const Candidate& c : s.result.considered) {
      if (c.tensor_parallel > 1) return true;
    }
  }
  return false;
}

std::string renderTensorComparison(const std::vector<ScheduleSearch>& searches, const SearchRow& chosen) {
  if (!consideredTensorParallel(searches)) return "";
  const Objective objective = searches.at(chosen.search).options.objective;
  TextTable table({"", "", "strategy", "schedule", "b", "m", "v", "iteration", "samples/s", "memory/worker"},
                  {false, false, false, false, true, true, true, true, true, true});
  for (const bool tensor : {false, true}) {
    const char* label = tensor ? "with tensor parallelism" : "without";
    const std::optional<SearchRow> best = bestSearchRow(searches, tensor, objective);
    if (!best) {
      table.addRow({"", label, "-", "-", "-", "-", "-", "-", "-", "none feasible"});
      continue;
    }
    const Candidate& c = rowOf(searches, *best);
    const SearchOptions& o = searches[best->search].options;
    table.addRow({*best == chosen ? "*" : "", label, c.strategy(true), scheduleText(o),
                  std::to_string(c.microbatch_size), std::to_string(c.microbatches),
                  std::to_string(chunksOf(o.schedule, o.chunks)), formatSeconds(c.iteration),
                  fmt::format("{:.1f}", c.samples_per_second), formatBytes(c.maxWorkerMemory())});
  }
  return fmt::format("Best plan without and with tensor parallelism (p×t×d: pipeline stages × tensor-parallel "
                     "workers × data-parallel copies; b microbatch size, m microbatches, v chunks; * chosen, {}):\n{}",
                     objectiveName(objective), table.render());
}

std::vector<std::string> takeawayNotes(const profile::Profile& profile, const Catalog& catalog,
                                       const std::vector<ScheduleSearch>& searches, const SearchRow& chosen) {
  std::vector<std::string> notes;
  const SearchOptions& o = searches.at(chosen.search).options;
  const Candidate& c = rowOf(searches, chosen);
  if (!c.stage_replicas.empty()) return notes;  // 1F1B-RR: no p × t × d grid to compare
  const TensorModel model = tensorModelOf(profile);
  const std::vector<int> fast = validTensorParallel(model, o.workers, o.tensor_link_workers);
  const int g = fast.back();
  const int t = c.tensor_parallel, p = c.stages, d = c.data_parallel;
  const std::string name = planText(searches, chosen);

  // #1: tensor parallelism up to g, then pipeline parallelism.
  if (t > o.tensor_link_workers) {
    notes.push_back(fmt::format("Takeaway #1 (seed 003 §4.3.2): tensor parallelism only within the {} worker{} that "
                                "share a fast link. The chosen {}'s tensor groups of {} span the slower links between "
                                "them, as --tensor-parallel pinned",
                                o.tensor_link_workers, o.tensor_link_workers == 1 ? "" : "s", name, t));
  } else if (p > 1 && t < g) {
    // The same model-parallel size with as much of it tensor-parallel as the fast link allows.
    int t1 = t;
    for (int v : fast) {
      if (v <= t * p && (t * p) % v == 0) t1 = std::max(t1, v);
    }
    const int p1 = t * p / t1;
    std::string why;
    if (t1 == t) {
      why = fmt::format("no t above {} that divides the model-parallel size {} is valid for this model", t, t * p);
    } else if (auto alt = bestWhere(searches, o.objective,
                                    [&](const Candidate& r) { return r.tensor_parallel == t1 && r.stages == p1; })) {
      why = slowerBecause(rowOf(searches, *alt), planText(searches, *alt), c);
    } else {
      why = "the takeaway's plan is infeasible: " + infeasibleWhy(searches, t1, p1);
    }
    notes.push_back(fmt::format("Takeaway #1 (seed 003 §4.3.2): tensor parallelism up to the workers that share a fast "
                                "link ({} here, at {}; t ≤ {} for this model), then pipeline parallelism. The chosen {} "
                                "pipelines {} stages with t = {}; {}",
                                o.tensor_link_workers,
                                formatBandwidth(o.tensor_bandwidth > 0 ? o.tensor_bandwidth : o.bandwidth), g, name, p,
                                t, why));
  }

  // #2: a model-parallel size t·p just large enough to fit memory.
  int least = 0;
  for (const ScheduleSearch& s : searches) {
    for (const Candidate& r : s.result.considered) {
      if (r.feasible && (least == 0 || r.tensor_parallel * r.stages < least)) least = r.tensor_parallel * r.stages;
    }
  }
  if (least > 0 && t * p > least) {
    const auto alt = bestWhere(searches, o.objective,
                               [&](const Candidate& r) { return r.tensor_parallel * r.stages == least; });
    notes.push_back(fmt::format("Takeaway #2 (seed 003 §4.3.3): a model-parallel size t·p just large enough to fit "
                                "memory, data parallelism for the rest. The chosen {} has t·p = {} where {} fits with "
                                "t·p = {}; {}",
                                name, t * p, planText(searches, *alt), least,
                                slowerBecause(rowOf(searches, *alt), planText(searches, *alt), c)));
  }

  // #3: the microbatch size that minimises eq. (4.1).
  if (!o.microbatch_size && !o.microbatches && c.stage_replicas.empty()) {
    const profile::Profile split = t > 1 ? tensorParallelProfile(profile, model, t, o.tensor_efficiency) : profile;
    const std::int64_t perReplica = c.globalBatch() / d;
    const profile::Measurement* best = nullptr;
    Seconds bestTime = 0;
    for (const profile::Measurement& m : split.measurements) {
      if (perReplica % m.microbatch_size != 0) continue;
      // Only sizes the schedule can run: 2bw needs m ≥ p, interleaved a multiple of p.
      const std::int64_t microbatches = perReplica / m.microbatch_size;
      if ((o.schedule == ScheduleKind::kTwoBW && microbatches < p) ||
          (chunksOf(o.schedule, o.chunks) > 1 && microbatches % p != 0)) {
        continue;
      }
      const Seconds time = equationFourOne(m, perReplica, p, o);
      if (!best || time < bestTime) {
        best = &m;
        bestTime = time;
      }
    }
    const profile::Measurement* own = split.at(c.microbatch_size);
    if (best && own && best->microbatch_size != c.microbatch_size) {
      const std::int64_t b = best->microbatch_size;
      SearchOptions pinned = o;
      pinned.tensor_parallel = t;
      pinned.data_parallel = d;
      pinned.stages = p;
      pinned.microbatch_size = b;
      pinned.global_batch = c.globalBatch();
      std::string why;
      auto r = searchPlan(profile, catalog, pinned);
      if (!r.ok()) {
        why = fmt::format("at b = {} the plan is infeasible: {}", b, r.status().message());
      } else {
        why = slowerBecause(r->best(), fmt::format("b = {}", b), c) +
              " (eq. 4.1 counts neither transfers, allreduces nor the optimizer's update)";
      }
      notes.push_back(fmt::format("Takeaway #3 (seed 003 §4.3.4): the microbatch size that minimises (b′/b + p − 1)"
                                  "·(t_f(b) + t_b(b)) (eq. 4.1), here b = {} ({} against {} at the chosen b = {}). "
                                  "The chosen {} has b = {}; {}",
                                  b, formatSeconds(bestTime),
                                  formatSeconds(equationFourOne(*own, perReplica, p, o)),
                                  c.microbatch_size, name, c.microbatch_size, why));
    }
  }
  return notes;
}

}  // namespace hydrozoa::plan
