#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>
#include <set>

#include "sched/rounds.h"

namespace hydrozoa::sim {

namespace {

// What runs in a round: a job alone or a pair sharing workers, each member
// at its rate (in a pair, its shared rate until the other is done, then its
// own), after the preemption cost it pays.
struct Run {
  int type = -1, pair = -1;
  std::vector<size_t> members;    // indices of the problem's jobs
  std::vector<double> rate, alone, left;
  std::vector<Seconds> finish;    // each member's last step, from when it runs (its steps over its rates)
  Seconds lost = 0, end = 0;      // its end in the round: the round's, its last step's, or a reclaim's
  bool reclaimed = false;
};

std::vector<Run> planRuns(const sched::Problem& problem, const std::vector<size_t>& placeable,
                          const std::vector<int>& placed, const std::vector<int>& pairOf,
                          const std::vector<int>& lastType, const std::vector<sched::TraceJob>& trace,
                          const std::vector<double>& done, Seconds now, const SimOptions& o) {
  std::vector<Run> runs;
  for (size_t k = 0; k < placeable.size(); ++k) {
    const int c = pairOf[k];
    if (placed[k] < 0 || (c >= 0 && problem.pairs[static_cast<size_t>(c)].a != static_cast<int>(k))) continue;
    Run run;
    run.type = placed[k];
    run.pair = c;
    const auto j = static_cast<size_t>(run.type);
    const sched::JobPair* pair = c >= 0 ? &problem.pairs[static_cast<size_t>(c)] : nullptr;
    run.members.push_back(k);
    if (pair != nullptr) run.members.push_back(static_cast<size_t>(pair->b));
    for (size_t i = 0; i < run.members.size(); ++i) {
      const size_t q = run.members[i];
      run.alone.push_back(problem.jobs[q].throughput[j]);
      run.rate.push_back(pair == nullptr ? run.alone.back() : i == 0 ? pair->throughput_a[j] : pair->throughput_b[j]);
      run.left.push_back(trace[placeable[q]].total_steps - done[placeable[q]]);
      run.lost = std::max(run.lost, placed[q] == lastType[placeable[q]] ? 0.0 : o.preemption);
      run.finish.push_back(run.left.back() / run.rate.back());
    }
    if (run.members.size() == 2) {  // the one done later runs alone after the other
      const size_t later = run.finish[0] <= run.finish[1] ? 1 : 0, first = 1 - later;
      run.finish[later] = run.finish[first] + (run.left[later] - run.rate[later] * run.finish[first]) / run.alone[later];
    }
    run.end = std::min(now + o.round, now + run.lost + *std::max_element(run.finish.begin(), run.finish.end()));
    runs.push_back(std::move(run));
  }
  return runs;
}

// Spot workers reclaimed in the round (the market's events from `event` on)
// stop what runs on them there, what came last first.
void reclaim(std::vector<Run>* runs, const sched::Problem& problem, const std::vector<sched::WorkerType>& market,
             const SimOptions& o, size_t event, Seconds now) {
  std::vector<int> cap;
  for (const auto& t : market) cap.push_back(t.count);
  for (size_t e = event; e < o.spot.size() && o.spot[e].time < now + o.round; ++e) {
    if (o.spot[e].kind != SpotEvent::kAvailable) continue;
    const Seconds at = o.spot[e].time;
    const int j = o.spot[e].type;
    cap[static_cast<size_t>(j)] = static_cast<int>(o.spot[e].value);
    int used = 0;
    for (const Run& run : *runs) {
      if (run.type == j && run.end > at) used += problem.jobs[run.members[0]].scale_factor;
    }
    for (size_t i = runs->size(); i-- > 0 && used > cap[static_cast<size_t>(j)];) {
      Run& run = (*runs)[i];
      if (run.type != j || !(run.end > at)) continue;
      run.end = at;
      run.reclaimed = true;
      used -= problem.jobs[run.members[0]].scale_factor;
    }
  }
}

// Worker-seconds there were from `start` to `last`: spot workers away count
// for nothing.
double offeredWorkerSeconds(const std::vector<sched::WorkerType>& types, const std::vector<SpotEvent>& spot,
                            Seconds start, Seconds last) {
  std::vector<int> counts;
  double count = 0, offered = 0;
  for (const auto& t : types) {
    counts.push_back(t.count);
    count += t.count;
  }
  Seconds at = start;
  for (const SpotEvent& e : spot) {
    if (e.kind != SpotEvent::kAvailable) continue;
    const Seconds t = std::clamp(e.time, start, last);
    offered += count * (t - at);
    at = t;
    count += e.value - counts[static_cast<size_t>(e.type)];
    counts[static_cast<size_t>(e.type)] = static_cast<int>(e.value);
  }
  return offered + count * (last - at);
}

}  // namespace

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
  std::vector<double> isolatedRate;  // each placeable job's steps per second on 1/n of the cluster now
  sched::Allocation allocation;
  sched::RoundMechanism mechanism;
  mechanism.fillIdle(o.fill_idle);
  bool changed = true, marketChanged = false;
  Seconds decided = -std::numeric_limits<Seconds>::infinity();  // when the allocation was last decided
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
      changed = marketChanged = true;
    }
    if (active.empty()) {  // idle until the next arrival
      now = trace[order[next]].arrival;
      continue;
    }
    if (changed && (marketChanged || now - decided >= o.reallocate_after)) {
      decided = now;
      marketChanged = false;
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
      problem.pairs.clear();
      if (o.space_sharing) sched::addSpaceSharing(&problem, throughputs);
      if (placeable.empty() && event == o.spot.size()) {
        return unavailable(fmt::format("at {:.0f} s: {} jobs wait for workers that the spot trace never brings back",
                                       now - start, active.size()));
      }
      isolatedRate.clear();
      for (size_t k = 0; k < placeable.size(); ++k) {
        // What finish-time fairness compares with: the time its steps so far
        // would have taken on 1/n of the cluster.
        isolatedRate.push_back(sched::isolatedThroughput(problem, static_cast<int>(k)));
        problem.jobs[k].isolated_elapsed = done[placeable[k]] / isolatedRate.back();
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
      mechanism.reset(placeable.size(), types.size(), problem.pairs.size());
      changed = false;
    }
    std::vector<int> previous;
    for (size_t m : placeable) previous.push_back(lastType[m]);
    const std::vector<int> placed =
        placeable.empty() ? std::vector<int>{} : mechanism.place(problem, allocation, previous);
    std::vector<Run> runs = planRuns(problem, placeable, placed, mechanism.pairOf(), lastType, trace, done, now, o);
    reclaim(&runs, problem, market, o, event, now);
    for (size_t m : active) lastType[m] = -1;  // unless it runs on in this round
    std::set<size_t> ended;
    for (const Run& run : runs) {
      const Seconds span = run.end - now, paid = std::min(run.lost, span), window = span - paid;
      const int scale = problem.jobs[run.members[0]].scale_factor;
      Seconds busiest = 0;
      for (size_t i = 0; i < run.members.size(); ++i) {
        const size_t k = run.members[i], m = placeable[k];
        // Done when its last step falls in the round (for one alone: exactly
        // as the round's length allows) and before any reclaim.
        const bool finishes = run.members.size() == 1 ? !run.reclaimed && paid + run.finish[i] <= o.round
                                                      : run.finish[i] <= window;
        Seconds ran = finishes ? run.finish[i] : window;
        const double before = done[m];
        if (finishes) {
          done[m] = trace[m].total_steps;
        } else if (run.members.size() == 1 || window <= run.finish[1 - i]) {
          done[m] += run.rate[i] * window;
        } else {  // its partner done at finish[1 - i], alone since
          done[m] += run.rate[i] * run.finish[1 - i] + run.alone[i] * (window - run.finish[1 - i]);
        }
        busiest = std::max(busiest, ran);
        r.jobs[m].rounds += 1;
        r.jobs[m].isolated += (done[m] - before) / isolatedRate[k];
        problem.jobs[k].steps_remaining = trace[m].total_steps - done[m];
        lastType[m] = run.reclaimed ? -1 : run.type;
        r.reclaimed += run.reclaimed && !finishes;
        if (finishes || done[m] >= trace[m].total_steps * (1 - 1e-12)) {
          r.jobs[m].finish = now + paid + ran;
          ended.insert(m);
          changed = true;
        }
      }
      busy += (paid + busiest) * scale;
      if (!o.price.empty()) r.cost += scale * bill.dollars(run.type, now, now + paid + busiest);
      if (run.pair < 0) {
        mechanism.record(static_cast<int>(run.members[0]), run.type, paid + busiest);
      } else {
        mechanism.recordPair(run.pair, run.type, paid + busiest);
      }
    }
    // Until the allocation is decided again (reallocate_after), a finished
    // job's share stays unused, and the job is placed nowhere.
    for (size_t k = 0; k < placeable.size() && !ended.empty() && !allocation.x.empty(); ++k) {
      if (ended.count(placeable[k]) == 0) continue;
      std::fill(allocation.x[k].begin(), allocation.x[k].end(), 0.0);
      std::fill(problem.jobs[k].throughput.begin(), problem.jobs[k].throughput.end(), 0.0);
      for (size_t c = 0; c < problem.pairs.size() && c < allocation.pairs.size(); ++c) {
        if (problem.pairs[c].a == static_cast<int>(k) || problem.pairs[c].b == static_cast<int>(k)) {
          std::fill(allocation.pairs[c].begin(), allocation.pairs[c].end(), 0.0);
        }
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
  double jct = 0, last = start, rhos = 0;
  int finished = 0;
  const int to = o.measure_last < 0 ? static_cast<int>(r.jobs.size()) : o.measure_last;
  for (int m = 0; m < static_cast<int>(r.jobs.size()); ++m) {
    SimJob& j = r.jobs[static_cast<size_t>(m)];
    last = std::max(last, j.finish);
    if (j.isolated > 0) j.rho = (j.finish - j.arrival) / j.isolated;
    if (m < o.measure_first || m >= to) continue;
    jct += j.finish - j.arrival;
    rhos += j.rho;
    r.rho_max = std::max(r.rho_max, j.rho);
    ++finished;
  }
  r.average_jct = finished > 0 ? jct / finished : 0;
  r.rho_mean = finished > 0 ? rhos / finished : 0;
  for (const SimJob& j : r.jobs) {
    if (j.deadline < 0) continue;
    ++r.slo_jobs;
    r.slo_missed += j.finish > j.deadline * (1 + 1e-12);
  }
  r.makespan = last - start;
  const double offered = offeredWorkerSeconds(types, o.spot, start, last);
  r.utilisation = offered > 0 ? busy / offered : 0;
  return r;
}

}  // namespace hydrozoa::sim
