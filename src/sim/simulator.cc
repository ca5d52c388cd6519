#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <set>

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
  for (const SpotEvent& e : o.spot) {
    if (e.type < 0 || static_cast<size_t>(e.type) >= types.size()) return internalError("a spot event of no type");
    if (e.kind == SpotEvent::kPrice && o.price.empty()) {
      return invalidArgument("the spot trace changes prices: give every type's price too (--prices)");
    }
  }
  double workers = 0;
  for (const auto& t : types) workers += t.count;
  const PriceTrack bill(o.price, o.spot);

  std::vector<size_t> active;  // trace indices, in arrival order
  size_t next = 0;             // into order
  size_t event = 0;            // into o.spot: the first not yet in force
  Seconds now = trace.empty() ? 0 : trace[order[0]].arrival;
  const Seconds start = now;
  double busy = 0;
  std::vector<sched::WorkerType> market = types;  // the workers to be had now
  std::vector<double> priceNow = o.price;
  sched::Problem problem;
  std::vector<size_t> placeable;  // problem.jobs' trace indices: active jobs with a type that has their workers
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
    for (; event < o.spot.size() && o.spot[event].time <= now; ++event) {
      const SpotEvent& e = o.spot[event];
      if (e.kind == SpotEvent::kPrice) priceNow[static_cast<size_t>(e.type)] = e.value;
      if (e.kind == SpotEvent::kAvailable) market[static_cast<size_t>(e.type)].count = static_cast<int>(e.value);
      changed = true;
    }
    if (active.empty()) {  // idle until the next arrival
      now = trace[order[next]].arrival;
      continue;
    }
    if (changed) {
      problem.types = market;
      problem.price = priceNow;
      problem.entities = o.entities;
      problem.budget = o.budget < 0 ? -1 : o.budget - r.cost;
      problem.jobs.clear();
      placeable.clear();
      for (size_t m : active) {
        sched::JobDemand d = all.jobs[m];
        bool runs = false;  // on some type with its workers now (spot workers come and go)
        for (size_t j = 0; j < market.size(); ++j) runs |= d.throughput[j] > 0 && d.scale_factor <= market[j].count;
        if (!runs) continue;
        d.steps_remaining = trace[m].total_steps - done[m];
        d.elapsed = now - trace[m].arrival;
        // A deadline already missed constrains nothing more.
        d.slo_left = r.jobs[m].deadline > now ? r.jobs[m].deadline - now : -1;
        d.entity = m < o.entity_of.size() ? o.entity_of[m] : -1;
        problem.jobs.push_back(d);
        placeable.push_back(m);
      }
      if (placeable.empty() && event == o.spot.size()) {
        return unavailable(fmt::format("at {:.0f} s: {} jobs wait for workers that the spot trace never brings back",
                                       now - start, active.size()));
      }
      for (size_t k = 0; k < placeable.size(); ++k) {
        // What finish-time fairness compares with: the time its steps so far
        // would have taken on 1/n of the cluster.
        problem.jobs[k].isolated_elapsed =
            done[placeable[k]] / sched::isolatedThroughput(problem, static_cast<int>(k));
      }
      allocation = {};
      if (!placeable.empty()) {
        const auto t0 = std::chrono::steady_clock::now();
        auto a = policy.allocate(problem);
        r.solve_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (!a.ok()) {
          return Status(a.status().code(), fmt::format("at {:.0f} s: {}", now - start, a.status().message()));
        }
        allocation = std::move(*a);
        ++r.allocations;
      }
      mechanism.reset(placeable.size(), types.size());
      changed = false;
    }
    std::vector<int> previous;
    for (size_t m : placeable) previous.push_back(lastType[m]);
    const std::vector<int> placed =
        placeable.empty() ? std::vector<int>{} : mechanism.place(problem, allocation, previous);
    // Each placed job's end in the round: the round's, its last step's, or
    // that of a worker of its type reclaimed (the job placed last first).
    std::vector<Seconds> end(placeable.size(), now + o.round), lost(placeable.size(), 0);
    for (size_t k = 0; k < placeable.size(); ++k) {
      const int j = placed[k];
      if (j < 0) continue;
      lost[k] = j == lastType[placeable[k]] ? 0 : o.preemption;
      const double left = trace[placeable[k]].total_steps - done[placeable[k]];
      end[k] = std::min(end[k], now + lost[k] + left / problem.jobs[k].throughput[static_cast<size_t>(j)]);
    }
    std::vector<bool> reclaimed(placeable.size(), false);
    std::vector<int> cap;
    for (const auto& t : market) cap.push_back(t.count);
    for (size_t e = event; e < o.spot.size() && o.spot[e].time < now + o.round; ++e) {
      if (o.spot[e].kind != SpotEvent::kAvailable) continue;
      const Seconds at = o.spot[e].time;
      const int j = o.spot[e].type;
      cap[static_cast<size_t>(j)] = static_cast<int>(o.spot[e].value);
      int used = 0;
      for (size_t k = 0; k < placeable.size(); ++k) {
        if (placed[k] == j && end[k] > at) used += problem.jobs[k].scale_factor;
      }
      for (size_t k = placeable.size(); k-- > 0 && used > cap[static_cast<size_t>(j)];) {
        if (placed[k] != j || !(end[k] > at)) continue;
        end[k] = at;
        reclaimed[k] = true;
        used -= problem.jobs[k].scale_factor;
      }
    }
    for (size_t m : active) lastType[m] = -1;  // unless it runs on in this round
    std::set<size_t> ended;
    for (size_t k = 0; k < placeable.size(); ++k) {
      const size_t m = placeable[k];
      const int j = placed[k];
      if (j < 0) continue;
      const double rate = problem.jobs[k].throughput[static_cast<size_t>(j)];
      const double left = trace[m].total_steps - done[m];
      const Seconds span = end[k] - now, paid = std::min(lost[k], span);
      const bool finishes = !reclaimed[k] && paid + left / rate <= o.round;
      const Seconds ran = finishes ? left / rate : span - paid;
      done[m] += rate * ran;
      busy += (paid + ran) * trace[m].scale_factor;
      if (!o.price.empty()) r.cost += trace[m].scale_factor * bill.dollars(j, now, now + paid + ran);
      r.jobs[m].rounds += 1;
      mechanism.record(static_cast<int>(k), j, paid + ran);
      problem.jobs[k].steps_remaining = trace[m].total_steps - done[m];
      lastType[m] = reclaimed[k] ? -1 : j;
      r.reclaimed += reclaimed[k];
      if (finishes || done[m] >= trace[m].total_steps * (1 - 1e-12)) {
        r.jobs[m].finish = now + paid + ran;
        ended.insert(m);
        changed = true;
      }
    }
    std::vector<size_t> still;
    for (size_t m : active) {
      if (ended.count(m) == 0) still.push_back(m);
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
  // Over the workers there were: spot workers away count for nothing.
  double offered = 0, count = workers;
  Seconds at = start;
  std::vector<int> counts;
  for (const auto& t : types) counts.push_back(t.count);
  for (const SpotEvent& e : o.spot) {
    if (e.kind != SpotEvent::kAvailable) continue;
    const Seconds t = std::clamp(e.time, start, last);
    offered += count * (t - at);
    at = t;
    count += e.value - counts[static_cast<size_t>(e.type)];
    counts[static_cast<size_t>(e.type)] = static_cast<int>(e.value);
  }
  offered += count * (last - at);
  r.utilisation = offered > 0 ? busy / offered : 0;
  return r;
}

}  // namespace hydrozoa::sim
