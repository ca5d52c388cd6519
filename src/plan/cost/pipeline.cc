#include "plan/cost/pipeline.h"

#include <algorithm>
#include <limits>

#include "core/status.h"

namespace hydrozoa::plan {

std::string Partition::toString(int numLayers) const {
  std::string s;
  for (int i = 0; i < numStages(); ++i) {
    if (i) s += ",";
    s += std::to_string(first[i]) + "-" + std::to_string(lastLayer(i, numLayers));
  }
  return s;
}

bool HostShare::oversubscribed(int stages) const {
  return cores > 0 && static_cast<std::int64_t>(replicas) * stages * std::max(1, threads) > cores;
}

// NOTE [Compute beside busy cores]
// Cores of one host are not independent: they share caches, memory
// bandwidth, a power budget and, on a virtual machine, often the physical
// core (two hyperthreads), and how much depends on the neighbours of the
// day. Measured on this 2-core VM on 2026-11-25, a pinned one-thread
// convolution ran 1.17–1.36× slower while the other core computed too, and
// a CNN's 2x1 (two replicas, no transfers) ran 22% over a plan that counted
// its compute as the profile's, measured alone; the next day, 1.02×
// (bench/README.md). The profiler measures the slowdown s with every usable
// core running the model's passes (profile/measure.cc); here n busy threads
// on c cores each run at min(1, c/n) of a core over 1 + (s − 1)(m − 1)/(c − 1)
// with m = min(n, c) cores in use: 1 alone, s with every core busy, linear
// between (exact on 2 cores, an interpolation above).
bool HostShare::contended(int stages) const {
  return cores > 1 && slowdown > 1 && static_cast<std::int64_t>(replicas) * stages * std::max(1, threads) > 1;
}

double HostShare::rate(double busy) const {
  if (cores <= 0 || busy <= 0) return 1;
  const double share = std::min(1.0, cores / busy);
  const double used = std::min<double>(busy, cores);
  const double contention = cores > 1 ? 1 + (std::max(1.0, slowdown) - 1) * (used - 1) / (cores - 1) : 1;
  return share / contention;
}

double HostShare::scale(int stages) const {
  return 1 / rate(static_cast<double>(std::max(1, replicas)) * std::max(1, stages) * std::max(1, threads));
}

MessagePasses stageMessages(const ChainCosts& costs, int first, int last) {
  const int L = costs.numLayers();
  MessagePasses m;
  if (costs.send.empty()) return m;
  HZ_CHECK(static_cast<int>(costs.send.size()) == L - 1 && costs.receive.size() == costs.send.size());
  if (last + 1 < L) {
    m.forward += costs.send[last];
    m.backward += costs.receive[last];
  }
  if (first > 0) {
    m.forward += costs.receive[first - 1];
    m.backward += costs.send[first - 1];
  }
  return m;
}

namespace {

// Stage s's forward and backward time per microbatch, its messages'
// CPU included, and the transfer into it (0 for the first stage).
struct StageCosts {
  std::vector<Seconds> forward, backward, cut_in;
};

StageCosts stageCosts(const ChainCosts& costs, const Partition& partition) {
  const int L = costs.numLayers();
  const int k = partition.numStages();
  HZ_CHECK(k >= 1 && partition.first[0] == 0);
  StageCosts sc;
  for (int s = 0; s < k; ++s) {
    const int first = partition.first[s], last = partition.lastLayer(s, L);
    HZ_CHECK(first <= last && last < L);
    Seconds f = 0, b = 0;
    for (int i = first; i <= last; ++i) {
      f += costs.forward[i];
      b += costs.backward[i];
    }
    const MessagePasses messages = stageMessages(costs, first, last);
    sc.forward.push_back(f + messages.forward);
    sc.backward.push_back(b + messages.backward);
    sc.cut_in.push_back(s > 0 ? costs.cut[first - 1] : 0);
  }
  return sc;
}

constexpr Seconds kNever = std::numeric_limits<Seconds>::infinity();

// NOTE [A pipeline on a shared host]
// When more compute threads than cores share a host, how much slower each
// stage computes depends on how many compute at that moment: during a GPipe
// schedule's fill and drain only some do. Scaling every time by
// threads/cores (computeScale, plan/search.h) is exact when all stages
// compute throughout (data parallelism, a long balanced pipeline) and too
// pessimistic otherwise: measured on 2 cores, VGG-11's 1x4 with few
// microbatches ran in half its uniformly scaled prediction, as fast as its
// 1x2 (bench/README.md). So the schedule is simulated: each stage works
// through its passes in the schedule's order (cost/schedules.h, the order the
// runtime runs: GPipe's forwards 0..M−1, backwards M−1..0), an action starts when the previous one is done
// and its input has arrived, a transfer occupies its link (one at a time, as
// R's c is a machine of the flow shop) and takes no core, and the n stages
// computing at a moment (each on `replicas` workers with `threads` threads)
// share the cores: each progresses at min(1, cores / (n·replicas·threads)),
// slowed further by the cores in use (NOTE [Compute beside busy cores]).
// A waiting worker takes no core (Gloo's receive and the shared-memory
// allreduce on shared cores sleep), and the runtime pins such workers round
// robin so that those computing at once share the cores evenly (NOTE [Cores
// for compute threads], cluster/coordinator.cc). With StageTails, each stage
// then computes its tail (its replicas' sum, its update) the same way. With
// a core for every thread the simulation is the flow shop that R is the
// closed form of, and gives R exactly (tested). Measured with it, VGG-11's
// 1x4 on 2 cores was planned within 7% of its run (bench/README.md).
PipelineTime simulate(const StageCosts& sc, std::int64_t M, const HostShare& host,
                      const std::vector<StageTail>& tails, ScheduleKind schedule, int chunks) {
  // V virtual stages (the partition's pieces) on k stages: stage s runs
  // pieces s, s + k, ... (interleaved; otherwise V = k).
  const int V = static_cast<int>(sc.forward.size());
  const int k = V / chunks;
  HZ_CHECK(k >= 1 && k * chunks == V);
  HZ_CHECK(tails.empty() || static_cast<int>(tails.size()) == k);
  const std::int64_t passes = 2 * M * chunks;  // then the tail's allreduce and update
  std::vector<std::vector<Pass>> order(k);
  for (int s = 0; s < k; ++s) order[s] = passOrder(schedule, s, k, M, chunks);
  const std::int64_t actions = passes + (tails.empty() ? 0 : 2);
  const double threadsPerStage = static_cast<double>(std::max(1, host.replicas)) * std::max(1, host.threads);
  // forward_in[v][m]: when virtual stage v has microbatch m's activations
  // (v ≥ 1); backward_in[v][m]: when it has m's gradient (v ≤ V−2).
  std::vector<std::vector<Seconds>> forward_in(V, std::vector<Seconds>(M, kNever));
  std::vector<std::vector<Seconds>> backward_in(V, std::vector<Seconds>(M, kNever));
  std::vector<Seconds> link_free(k, 0);  // link s−1 → s, both ways (index s; k−1 → 0 at 0)
  auto virtualOf = [&](int s, const Pass& p) { return p.chunk * k + s; };
  struct State {
    std::int64_t next = 0;  // < 2M: order[s][next]; then the tail's two
    bool running = false;
    Seconds remaining = 0;  // of the running action, in seconds on a core of its own
    Seconds busy = 0, last_backward = 0, update_start = 0, end = 0;
  };
  std::vector<State> st(k);
  auto ready = [&](int s) -> Seconds {  // when stage s's next action may start
    const std::int64_t a = st[s].next;
    if (a >= passes) return 0;  // the tail follows the stage's own last pass
    const Pass& p = order[s][a];
    const int v = virtualOf(s, p);
    if (!p.backward) return v == 0 ? 0 : forward_in[v][p.microbatch];
    return v == V - 1 ? 0 : backward_in[v][p.microbatch];
  };
  auto send = [&](int link, Seconds at, Seconds cut, Seconds* arrival) {
    const Seconds start = std::max(at, link_free[link]);
    link_free[link] = start + cut;
    *arrival = start + cut;
  };
  Seconds now = 0;
  int done = 0;
  while (done < k) {
    int running = 0;
    for (int s = 0; s < k; ++s) {
      State& x = st[s];
      if (!x.running && x.next < actions && ready(s) <= now) {
        x.running = true;
        const Pass* p = x.next < passes ? &order[s][x.next] : nullptr;
        x.remaining = p                  ? (p->backward ? sc.backward[virtualOf(s, *p)] : sc.forward[virtualOf(s, *p)])
                      : x.next == passes ? tails[s].allreduce
                                         : tails[s].update;
        if (x.next == passes + 1) x.update_start = now;
      }
      running += x.running;
    }
    Seconds step = kNever;
    for (int s = 0; s < k; ++s) {
      if (!st[s].running && st[s].next < actions) step = std::min(step, ready(s) - now);
    }
    // cores == 0: a core for every thread.
    // (NOTE [Compute beside busy cores])
    const double rate = host.rate(running * threadsPerStage);
    for (int s = 0; s < k; ++s) {
      if (st[s].running) step = std::min(step, st[s].remaining / rate);
    }
    HZ_CHECK(step < kNever);  // something computes or an input is on its way
    now += step;
    for (int s = 0; s < k; ++s) {
      State& x = st[s];
      if (!x.running) continue;
      if (x.next < passes) x.busy += step;  // the passes: what the bubble is counted against
      x.remaining -= step * rate;
      if (x.remaining > 1e-12 * std::max<Seconds>(1, now)) continue;
      x.running = false;
      const std::int64_t a = x.next++;
      if (a < passes) {
        const Pass& p = order[s][a];
        const int v = virtualOf(s, p);
        if (!p.backward && v + 1 < V) send((v + 1) % k, now, sc.cut_in[v + 1], &forward_in[v + 1][p.microbatch]);
        if (p.backward && v > 0) send(v % k, now, sc.cut_in[v], &backward_in[v - 1][p.microbatch]);
        if (a == passes - 1) x.last_backward = now;
      }
      if (x.next == actions) {
        x.end = now;
        ++done;
      }
    }
  }
  PipelineTime t;
  t.shared = true;
  for (const State& x : st) {
    t.total = std::max(t.total, x.last_backward);
    t.busy += x.busy;
  }
  for (const State& x : st) {
    t.drain.push_back(t.total - x.last_backward);
    if (!tails.empty()) {
      t.update_start.push_back(x.update_start);
      t.end.push_back(x.end);
    }
  }
  return t;
}

}  // namespace

// Past this many microbatches the schedule is in its steady state: the
// simulation runs this many and extends the last microbatch's increment to
// the rest (exact for the flow shop, whose time is linear in M), so a plan's
// cost stays bounded (O(k²) per microbatch, k·M arrival times held).
constexpr std::int64_t kSimulatedMicrobatches = 256;

PipelineTime simulatedPipelineTime(const ChainCosts& costs, const Partition& partition, std::int64_t microbatches,
                                   const HostShare& host, const std::vector<StageTail>& tails,
                                   ScheduleKind schedule, int chunks) {
  HZ_CHECK(microbatches >= 1);
  if (asynchronous(schedule)) {
    // A step in the steady state (cost/two_bw.h): what M more microbatches
    // add to a long 1F1B pipeline. Every stage's allreduce and update delay
    // its next passes (drain 0: nothing of theirs is hidden).
    PipelineTime one = simulatedPipelineTime(costs, partition, microbatches, host, {}, ScheduleKind::kOneFOneB);
    const PipelineTime two = simulatedPipelineTime(costs, partition, 2 * microbatches, host, {}, ScheduleKind::kOneFOneB);
    one.total = two.total - one.total;
    one.busy = two.busy - one.busy;
    one.drain.assign(one.drain.size(), 0);
    one.update_start.clear();
    one.end.clear();
    return one;
  }
  const StageCosts sc = stageCosts(costs, partition);
  PipelineTime sim;
  // The interleaved order repeats per group of k microbatches (k stages).
  const std::int64_t group = chunks > 1 ? partition.numStages() / chunks : 1;
  const std::int64_t simulated = std::max(group, kSimulatedMicrobatches / group * group);
  if (microbatches <= simulated) {
    sim = simulate(sc, microbatches, host, tails, schedule, chunks);
  } else {
    const PipelineTime before = simulate(sc, simulated - group, host, tails, schedule, chunks);
    sim = simulate(sc, simulated, host, tails, schedule, chunks);
    const Seconds extra = (sim.total - before.total) * static_cast<double>(microbatches - simulated) / group;
    sim.total += extra;
    sim.busy *= static_cast<double>(microbatches) / simulated;
    for (Seconds& t : sim.update_start) t += extra;
    for (Seconds& t : sim.end) t += extra;
  }
  PipelineTime t = pipelineTime(costs, partition, microbatches);  // the closed form's terms (GPipe's)
  t.total = sim.total;
  t.busy = sim.busy;
  t.drain = std::move(sim.drain);
  t.update_start = std::move(sim.update_start);
  t.end = std::move(sim.end);
  t.shared = true;
  return t;
}

PipelineTime pipelineTime(const ChainCosts& costs, const Partition& partition, std::int64_t microbatches,
                          const HostShare& host, ScheduleKind schedule, int chunks) {
  HZ_CHECK(microbatches >= 1);
  const int k = partition.numStages();
  if (host.oversubscribed(k / chunks) || host.contended(k / chunks) || schedule != ScheduleKind::kGPipe) {
    return simulatedPipelineTime(costs, partition, microbatches, host, {}, schedule, chunks);
  }
  const StageCosts sc = stageCosts(costs, partition);
  PipelineTime t;
  Seconds drain = 0;
  for (int s = 0; s < k; ++s) {
    const Seconds f = sc.forward[s], b = sc.backward[s];
    t.compute += f + b;
    t.max_forward = std::max(t.max_forward, f);
    t.max_backward = std::max(t.max_backward, b);
    if (s > 0) {
      const Seconds c = sc.cut_in[s];
      t.communication += 2 * c;
      t.max_cut = std::max(t.max_cut, c);
    }
    // The last microbatch's backward pass reaches stage s this long before
    // it leaves the first stage.
    if (s > 0) drain += sc.backward[s - 1] + sc.cut_in[s];
    t.drain.push_back(drain);
  }
  t.t_k = std::max(t.max_forward, t.max_cut);
  t.r_1 = std::max(t.max_backward, t.max_cut);
  t.total = t.compute + t.communication + static_cast<double>(microbatches - 1) * (t.t_k + t.r_1);
  t.busy = static_cast<double>(microbatches) * t.compute;
  return t;
}

double bubbleFraction(const PipelineTime& time, int stages) {
  if (time.total <= 0 || stages <= 0) return 0;
  return std::max(0.0, 1.0 - time.busy / (stages * time.total));
}

}  // namespace hydrozoa::plan
