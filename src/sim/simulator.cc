#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "sched/rounds.h"

namespace hydrozoa::sim {

Result<SimResult> simulate(const std::vector<sched::TraceJob>& trace, const std::vector<sched::WorkerType>& types,
                           const sched::Throughputs& throughputs, const sched::Policy& policy,
                           const SimOptions& o) {
  if (!(o.round > 0)) return invalidArgument("the round must be longer than 0 s");
  if (!(o.preemption >= 0 && o.preemption < o.round)) {
    return invalidArgument("a preemption must cost from 0 s to less than a round");
  }
  if (o.measure_first < 0 || (o.measure_last >= 0 && (o.measure_last <= o.measure_first ||
                                                       o.measure_last > static_cast<int>(trace.size())))) {
    return invalidArgument(fmt::format("the jobs measured, {} to {}, are not a range of the trace's 0 to {}",
                                       o.measure_first, o.measure_last, trace.size()));
  }
  // Every job's throughputs, checked once (a job that cannot run anywhere is named).
  HZ_ASSIGN_OR_RETURN(const sched::Problem all, sched::problemOf(trace, types, throughputs));
  std::vector<size_t> order(trace.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return trace[a].arrival < trace[b].arrival; });

  SimResult r;
  r.jobs.resize(trace.size());
  std::vector<double> done(trace.size(), 0.0);
  std::vector<int> lastType(trace.size(), -1);  // each job's type in the round before; -1: it did not run
  for (size_t m = 0; m < trace.size(); ++m) {
    r.jobs[m].arrival = trace[m].arrival;
    if (all.jobs[m].slo_left >= 0) r.jobs[m].deadline = trace[m].arrival + all.jobs[m].slo_left;
  }
  if (!o.price.empty() && o.price.size() != types.size()) return invalidArgument("a price for every worker type");
  double workers = 0;
  for (const auto& t : types) workers += t.count;

  std::vector<size_t> active;  // trace indices, in arrival order
  size_t next = 0;             // into order
  Seconds now = trace.empty() ? 0 : trace[order[0]].arrival;
  const Seconds start = now;
  double busy = 0;
  sched::Problem problem;
  sched::Allocation allocation;
  sched::RoundMechanism mechanism;
  bool changed = true;
  while (next < order.size() || !active.empty()) {
    if (now - start > o.max_time) {
      return unavailable(fmt::format("the simulation passed {} virtual seconds with {} jobs left", o.max_time,
                                     active.size() + order.size() - next));
    }
    while (next < order.size() && trace[order[next]].arrival <= now) {
      active.push_back(order[next++]);
      changed = true;
    }
    if (active.empty()) {  // idle until the next arrival
      now = trace[order[next]].arrival;
      continue;
    }
    if (changed) {
      problem.types = types;
      problem.price = o.price;
      problem.entities = o.entities;
      problem.budget = o.budget < 0 ? -1 : o.budget - r.cost;
      problem.jobs.clear();
      for (size_t m : active) {
        sched::JobDemand d = all.jobs[m];
        d.steps_remaining = trace[m].total_steps - done[m];
        d.elapsed = now - trace[m].arrival;
        // A deadline already missed constrains nothing more.
        d.slo_left = r.jobs[m].deadline > now ? r.jobs[m].deadline - now : -1;
        d.entity = m < o.entity_of.size() ? o.entity_of[m] : -1;
        problem.jobs.push_back(d);
      }
      for (size_t k = 0; k < active.size(); ++k) {
        // What finish-time fairness compares with: the time its steps so far
        // would have taken on 1/n of the cluster.
        problem.jobs[k].isolated_elapsed = done[active[k]] / sched::isolatedThroughput(problem, static_cast<int>(k));
      }
      const auto t0 = std::chrono::steady_clock::now();
      auto a = policy.allocate(problem);
      r.solve_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!a.ok()) return Status(a.status().code(), fmt::format("at {:.0f} s: {}", now - start, a.status().message()));
      allocation = std::move(*a);
      mechanism.reset(active.size(), types.size());
      ++r.allocations;
      changed = false;
    }
    std::vector<int> previous;
    for (size_t m : active) previous.push_back(lastType[m]);
    const std::vector<int> placed = mechanism.place(problem, allocation, previous);
    std::vector<size_t> still;
    for (size_t k = 0; k < active.size(); ++k) {
      const size_t m = active[k];
      const int j = placed[k];
      if (j < 0) {
        lastType[m] = -1;
        still.push_back(m);
        continue;
      }
      const double rate = problem.jobs[k].throughput[static_cast<size_t>(j)];
      const double left = trace[m].total_steps - done[m];
      const Seconds lost = j == lastType[m] ? 0 : o.preemption;
      lastType[m] = j;
      const Seconds ran = std::min(o.round - lost, left / rate);
      done[m] += rate * ran;
      busy += (lost + ran) * trace[m].scale_factor;
      if (!o.price.empty()) r.cost += (lost + ran) * trace[m].scale_factor * o.price[static_cast<size_t>(j)] / 3600;
      r.jobs[m].rounds += 1;
      mechanism.record(static_cast<int>(k), j, lost + ran);
      problem.jobs[k].steps_remaining = trace[m].total_steps - done[m];
      if (lost + ran < o.round || done[m] >= trace[m].total_steps * (1 - 1e-12)) {
        r.jobs[m].finish = now + lost + ran;
        changed = true;
      } else {
        still.push_back(m);
      }
    }
    active = std::move(still);
    now += o.round;
    ++r.rounds;
  }
  double jct = 0, last = start;
  int finished = 0;
  const int to = o.measure_last < 0 ? static_cast<int>(r.jobs.size()) : o.measure_last;
  for (int m = 0; m < static_cast<int>(r.jobs.size()); ++m) {
    const SimJob& j = r.jobs[static_cast<size_t>(m)];
    last = std::max(last, j.finish);
    if (m < o.measure_first || m >= to) continue;
    jct += j.finish - j.arrival;
    ++finished;
  }
  r.average_jct = finished > 0 ? jct / finished : 0;
  for (const SimJob& j : r.jobs) {
    if (j.deadline < 0) continue;
    ++r.slo_jobs;
    r.slo_missed += j.finish > j.deadline * (1 + 1e-12);
  }
  r.makespan = last - start;
  r.utilisation = r.makespan > 0 ? busy / (workers * r.makespan) : 0;
  return r;
}

}  // namespace hydrozoa::sim
