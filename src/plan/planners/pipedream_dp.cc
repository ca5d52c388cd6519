#include "plan/planners/pipedream_dp.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <cmath>
#include <limits>

#include "core/table.h"

namespace hydrozoa::plan {
namespace {

constexpr double kNone = std::numeric_limits<double>::infinity();

// A^k(i→j, m): the slowest stage's time, where the sub-pipeline before the
// last stage ends, on how many components, and the last stage's replicas.
struct Cell {
  double time = kNone;
  int split = -1;           // the sub-pipeline before the last stage ends at state split (-1: one stage)
  int machinesBefore = -1;  // index (components − 1) of that sub-pipeline
  int replicas = 0;         // of the last stage
};

using Table = std::vector<std::vector<std::vector<Cell>>>;  // [row][state][components − 1]

// Sets of node indices as bitsets.
using Bits = std::vector<bool>;

}  // namespace

PipeDreamStates chainStates(const std::vector<double>& compute, const std::vector<double>& activation,
                            const std::vector<double>& parameters, const std::vector<double>& boundary,
                            std::vector<std::string> names, const std::vector<double>& forward) {
  PipeDreamStates s;
  double c = 0, a = 0, p = 0, f = 0;
  for (size_t i = 0; i < compute.size(); ++i) {
    s.compute.push_back(c += compute[i]);
    if (i < forward.size()) s.forward.push_back(f += forward[i]);
    s.activation.push_back(a += activation[i]);
    s.parameters.push_back(p += parameters[i]);
  }
  s.boundary = boundary;
  s.names = std::move(names);
  return s;
}

PipeDreamStates pipeDreamChain(const profile::Profile& profile, std::int64_t microbatch_size) {
  const profile::Measurement* at = &profile.measurements.front();
  for (const profile::Measurement& m : profile.measurements) {
    if (m.microbatch_size == microbatch_size) at = &m;
  }
  const profile::Measurement& m = *at;
  std::vector<double> compute, activation, parameters, boundary, forward;
  std::vector<std::string> names;
  for (size_t i = 0; i < profile.numLayers(); ++i) {
    compute.push_back((m.layers[i].forward_ms + m.layers[i].backward_ms) / 1e3);
    forward.push_back(m.layers[i].forward_ms / 1e3);
    activation.push_back(static_cast<double>(m.layers[i].stashed_bytes));
    parameters.push_back(static_cast<double>(profile.layers[i].parameter_bytes));
    boundary.push_back(static_cast<double>(m.layers[i].output_bytes));
    names.push_back(profile.layers[i].name);
  }
  return chainStates(compute, activation, parameters, boundary, std::move(names), forward);
}

Result<PipeDreamStates> pipeDreamStates(const profile::PipeDreamGraph& g) {
  const size_t n = g.nodes.size();
  auto trimmed = [](const std::string& t) {
    const auto b = t.find_first_not_of(" \t");
    return b == std::string::npos ? std::string() : t.substr(b);
  };
  std::vector<std::vector<size_t>> in(n);
  for (size_t v = 0; v < n; ++v) {
    for (size_t d : g.successors[v]) in[d].push_back(v);
  }
  // As PipeDream's optimizer: inputs are not placed, and unused
  // "__getitem__" sinks are dropped.
  Bits alive(n, true);
  for (size_t v = 0; v < n; ++v) {
    const std::string desc = trimmed(g.nodes[v].description);
    if (in[v].empty() && desc.rfind("Input", 0) == 0) alive[v] = false;
    if (g.successors[v].empty() && desc.rfind("__getitem__", 0) == 0) alive[v] = false;
  }
  std::vector<std::vector<size_t>> out(n), inAlive(n);
  for (size_t v = 0; v < n; ++v) {
    if (!alive[v]) continue;
    for (size_t d : g.successors[v]) {
      if (alive[d]) {
        out[v].push_back(d);
        inAlive[d].push_back(v);
      }
    }
  }
  // Transitive predecessors and successors, in topological order.
  std::vector<Bits> pred(n, Bits(n, false)), succ(n, Bits(n, false));
  for (size_t v : g.order) {
    for (size_t u : inAlive[v]) {
      pred[v][u] = true;
      for (size_t w = 0; w < n; ++w) {
        if (pred[u][w]) pred[v][w] = true;
      }
    }
  }
  for (auto it = g.order.rbegin(); it != g.order.rend(); ++it) {
    const size_t v = *it;
    for (size_t d : out[v]) {
      succ[v][d] = true;
      for (size_t w = 0; w < n; ++w) {
        if (succ[d][w]) succ[v][w] = true;
      }
    }
  }
  size_t source = n;
  for (size_t v = 0; v < n && source == n; ++v) {
    if (alive[v] && inAlive[v].empty()) source = v;
  }
  if (source == n) return invalidArgument("the graph has no node to place (only inputs)");

  using Antichain = std::vector<size_t>;  // sorted
  auto augment = [&](const Antichain& a) {
    std::set<size_t> nodes(a.begin(), a.end());
    for (size_t x : a) {
      for (size_t p = 0; p < n; ++p) {
        if (!pred[x][p]) continue;
        for (size_t o : out[p]) {
          if (!pred[x][o] && o != x) {
            nodes.insert(p);
            break;
          }
        }
      }
    }
    return Antichain(nodes.begin(), nodes.end());
  };
  auto deaugment = [&](const Antichain& aug) {
    Antichain a;
    for (size_t u : aug) {
      bool before = false;
      for (size_t w : aug) before = before || (w != u && succ[u][w]);
      if (!before) a.push_back(u);
    }
    std::sort(a.begin(), a.end());
    a.erase(std::unique(a.begin(), a.end()), a.end());
    return a;
  };
  // The antichain DAG, breadth first from the first source.
  std::map<Antichain, int> id;
  std::vector<Antichain> antichains;
  std::vector<std::set<int>> edges;
  auto node = [&](const Antichain& a) {
    auto [it, added] = id.emplace(a, static_cast<int>(antichains.size()));
    if (added) {
      antichains.push_back(a);
      edges.emplace_back();
    }
    return it->second;
  };
  std::deque<Antichain> queue = {{source}};
  node({source});
  std::set<Antichain> expanded;
  while (!queue.empty()) {
    const Antichain a = queue.front();
    queue.pop_front();
    if (!expanded.insert(a).second) continue;
    const Antichain aug = augment(a);
    for (size_t u : aug) {
      for (size_t v : out[u]) {
        if (std::binary_search(a.begin(), a.end(), v)) continue;
        bool next = true;
        for (size_t w : aug) next = next && !succ[v][w];
        if (!next) continue;
        Antichain replaced = aug;
        std::replace(replaced.begin(), replaced.end(), u, v);
        const Antichain b = deaugment(replaced);
        const int from = node(a), to = node(b);  // (node() may grow `edges`)
        edges[static_cast<size_t>(from)].insert(to);
        queue.push_back(b);
      }
    }
    if (antichains.size() > 100000) {
      return invalidArgument("the graph has more than 100,000 cuts (antichains): too wide for PipeDream's optimizer");
    }
  }
  // A topological order of the states (Kahn, in discovery order).
  const size_t S = antichains.size();
  std::vector<int> indegree(S, 0);
  for (const auto& e : edges) {
    for (int d : e) ++indegree[static_cast<size_t>(d)];
  }
  std::vector<int> order;
  std::deque<int> ready;
  for (size_t i = 0; i < S; ++i) {
    if (indegree[i] == 0) ready.push_back(static_cast<int>(i));
  }
  while (!ready.empty()) {
    const int v = ready.front();
    ready.pop_front();
    order.push_back(v);
    for (int d : edges[static_cast<size_t>(v)]) {
      if (--indegree[static_cast<size_t>(d)] == 0) ready.push_back(d);
    }
  }
  std::vector<int> position(S);
  for (size_t i = 0; i < order.size(); ++i) position[static_cast<size_t>(order[i])] = static_cast<int>(i);
  // Transitive predecessors of each state, by position.
  std::vector<Bits> before(S, Bits(S, false));
  for (int v : order) {
    for (int d : edges[static_cast<size_t>(v)]) {
      auto& b = before[static_cast<size_t>(position[static_cast<size_t>(d)])];
      b[static_cast<size_t>(position[static_cast<size_t>(v)])] = true;
      const auto& bv = before[static_cast<size_t>(position[static_cast<size_t>(v)])];
      for (size_t w = 0; w < S; ++w) {
        if (bv[w]) b[w] = true;
      }
    }
  }
  PipeDreamStates s;
  for (size_t i = 0; i < S; ++i) {
    const Antichain aug = augment(antichains[static_cast<size_t>(order[i])]);
    Bits all(n, false);
    std::string name;
    double boundary = 0;
    for (size_t x : aug) {
      all[x] = true;
      for (size_t p = 0; p < n; ++p) {
        if (pred[x][p]) all[p] = true;
      }
      boundary += g.nodes[x].activation_bytes;
      name += (name.empty() ? "" : ",") + g.nodes[x].id;
    }
    double compute = 0, activation = 0, parameters = 0, forward = 0;
    for (size_t v = 0; v < n; ++v) {
      if (!all[v] || !alive[v]) continue;
      compute += (g.nodes[v].forward_ms + g.nodes[v].backward_ms) / 1e3;
      forward += g.nodes[v].forward_ms / 1e3;
      activation += g.nodes[v].activation_bytes;
      parameters += g.nodes[v].parameter_bytes;
    }
    s.compute.push_back(compute);
    s.forward.push_back(forward);
    s.activation.push_back(activation);
    s.parameters.push_back(parameters);
    s.boundary.push_back(boundary);
    // A one-node cut by the node ("node2 Conv2d(3, 64, ..."), others by their nodes' ids.
    s.names.push_back(aug.size() == 1 ? g.nodes[aug.front()].id + " " + trimmed(g.nodes[aug.front()].description)
                                      : "{" + name + "}");
    std::vector<int> p;
    for (size_t w = 0; w < S; ++w) {
      if (before[i][w]) p.push_back(static_cast<int>(w));
    }
    s.predecessors.push_back(std::move(p));
  }
  return s;
}

Result<PipeDreamResult> planPipeDream(const PipeDreamStates& st, const PipeDreamOptions& o) {
  const int N = st.size();
  if (N < 1) return invalidArgument("the profile has no layers to partition");
  if (o.levels.empty()) return invalidArgument("give the machines of at least one level (--machines)");
  for (const PipeDreamLevel& l : o.levels) {
    if (l.machines < 1 || !(l.bandwidth > 0)) {
      return invalidArgument("every level needs at least 1 machine and a positive bandwidth");
    }
  }
  if (o.activation_compression && !(*o.activation_compression > 0)) {
    return invalidArgument("--activation-compression must be a positive ratio");
  }
  // What the nodes after state i−1 up to state j hold (row i, state j).
  auto range = [](const std::vector<double>& cumulative, int i, int j) {
    return cumulative[static_cast<size_t>(j)] - (i > 0 ? cumulative[static_cast<size_t>(i - 1)] : 0.0);
  };
  // Whether state k comes before state j.
  auto precedes = [&](int k, int j) {
    if (st.predecessors.empty()) return k < j;
    const auto& p = st.predecessors[static_cast<size_t>(j)];
    return std::binary_search(p.begin(), p.end(), k);
  };
  // cost[i][j]: what a stage over row i..state j computes on one component:
  // the nodes' own compute at level 1, the level below's best pipeline over
  // all of a component's machines above it.
  std::vector<std::vector<double>> cost(N, std::vector<double>(N, kNone));
  for (int i = 0; i < N; ++i) {
    for (int j = i; j < N; ++j) cost[i][j] = range(st.compute, i, j);
  }
  std::vector<Table> tables;
  int within = 1;  // machines in one component of the level below
  for (size_t k = 0; k < o.levels.size(); ++k) {
    const int M = o.levels[k].machines;
    const double B = o.levels[k].bandwidth;
    const bool final = k + 1 == o.levels.size();
    Table A(N, std::vector<std::vector<Cell>>(N, std::vector<Cell>(M)));
    auto stash = [&](int first, int last, int before, int replicas) {
      return std::ceil(static_cast<double>(M - before) / replicas) *
             (range(st.activation, first, last) + range(st.parameters, first, last));
    };
    // One stage over row i..state j, replicated over m + 1 components.
    for (int i = 0; i < N; ++i) {
      for (int j = i; j < N; ++j) {
        for (int m = 0; m < (o.straight ? 1 : M); ++m) {
          if (o.memory_limit && stash(i, j, m + 1, m + 1) > static_cast<double>(*o.memory_limit)) continue;
          if (cost[i][j] == kNone) continue;
          const double sync = 4.0 * m * range(st.parameters, i, j) / (B * (m + 1)) / within;
          A[i][j][m] = {(cost[i][j] + sync) / (m + 1), -1, -1, m + 1};
        }
      }
    }
    // A sub-pipeline over row i..state s on the other components, then a
    // last stage over the states after s up to j on m' of them, s a
    // predecessor of j and not of the row's start. At the top level only
    // pipelines from the start are needed.
    const int rows = final ? 1 : N;
    for (int i = 0; i < rows; ++i) {
      for (int m = 1; m < M; ++m) {
        for (int j = i + 1; j < N; ++j) {
          Cell best = A[i][j][m];
          if (o.fewer_machines && A[i][j][m - 1].time < best.time) best = A[i][j][m - 1];
          for (int s = i; s < j; ++s) {
            if (!precedes(s, j) || (i > 0 && precedes(s, i - 1))) continue;
            for (int mp = 1; mp <= (o.straight ? 1 : m); ++mp) {
              const Cell& before = A[i][s][m - mp];
              if (before.time == kNone || cost[s + 1][j] == kNone) continue;
              if (o.memory_limit && stash(s + 1, j, m + 1, mp) > static_cast<double>(*o.memory_limit)) continue;
              const double last =
                  (cost[s + 1][j] + 4.0 * (mp - 1) * range(st.parameters, s + 1, j) / (B * mp)) / mp;
              double t = std::max(before.time, last);
              if (o.activation_compression) {
                const double r = *o.activation_compression;
                t = std::max(t, 2.0 * st.boundary[static_cast<size_t>(s)] / (B * mp) / r);
                if (j < N - 1) t = std::max(t, 2.0 * st.boundary[static_cast<size_t>(j)] / (B * mp) / r);
              }
              if (t < best.time) best = {t, s, m - mp, mp};
            }
          }
          A[i][j][m] = best;
        }
      }
    }
    for (int i = 0; i < N; ++i) {
      for (int j = 0; j < N; ++j) cost[i][j] = A[i][j][M - 1].time;
    }
    tables.push_back(std::move(A));
    within = M;
  }

  PipeDreamResult r;
  const int top = static_cast<int>(tables.size()) - 1;
  r.time_per_stage = tables[static_cast<size_t>(top)][0][N - 1][o.levels[static_cast<size_t>(top)].machines - 1].time;
  if (r.time_per_stage == kNone) {
    return infeasible(o.memory_limit ? fmt::format("no pipeline of these machines fits {} per machine",
                                                   formatBytes(*o.memory_limit))
                                     : std::string("no pipeline of these machines exists"));
  }
  r.single_machine = st.compute.back();
  r.data_parallel = r.single_machine;
  within = 1;
  for (const PipeDreamLevel& l : o.levels) {
    const double sync = 4.0 * (l.machines - 1) * st.parameters.back() / (l.bandwidth * l.machines) / within;
    r.data_parallel = (r.data_parallel + sync) / l.machines;
    within = l.machines;
  }
  // The stages, from the top level down: each range of the level above is
  // split by the level below's table over all of a component's machines.
  std::vector<std::pair<int, int>> ranges = {{0, N - 1}};
  for (int k = top; k >= 0; --k) {
    const int M = o.levels[static_cast<size_t>(k)].machines;
    std::vector<PipeDreamStage> stages;
    std::vector<std::pair<int, int>> next;
    for (const auto& [first, last] : ranges) {
      std::vector<PipeDreamStage> part;
      int end = last, m = M - 1;
      for (;;) {
        const Cell& c = tables[static_cast<size_t>(k)][first][end][m];
        const int begin = c.split < 0 ? first : c.split + 1;
        part.push_back({begin, end, c.replicas, range(st.compute, begin, end)});
        if (c.split < 0) break;
        end = c.split;
        m = c.machinesBefore;
      }
      std::reverse(part.begin(), part.end());
      for (const PipeDreamStage& s : part) next.emplace_back(s.first_layer, s.last_layer);
      stages.insert(stages.end(), part.begin(), part.end());
    }
    r.levels.push_back(std::move(stages));
    ranges = std::move(next);
  }
  return r;
}

std::string renderPipeDream(const PipeDreamResult& r, const PipeDreamOptions& o, const PipeDreamStates& states) {
  const std::vector<std::string>& names = states.names;
  std::string out;
  for (size_t i = 0; i < r.levels.size(); ++i) {
    const size_t level = r.levels.size() - i;  // the highest first
    const PipeDreamLevel& l = o.levels[level - 1];
    out += fmt::format("Level {}: {} {} at {}\n", level, l.machines,
                       level == 1 ? (l.machines == 1 ? "machine" : "machines") : "components",
                       formatBandwidth(l.bandwidth));
    TextTable t({"stage", states.predecessors.empty() ? "layers" : "states", "replicas", "compute"},
                {true, false, true, true});
    for (size_t s = 0; s < r.levels[i].size(); ++s) {
      const PipeDreamStage& st = r.levels[i][s];
      std::string layers = fmt::format("{}-{}", st.first_layer, st.last_layer);
      if (static_cast<size_t>(st.last_layer) < names.size()) {
        auto shortName = [](const std::string& n) { return n.size() <= 24 ? n : n.substr(0, 23) + "…"; };
        layers += fmt::format(" ({}..{})", shortName(names[st.first_layer]), shortName(names[st.last_layer]));
      }
      t.addRow({std::to_string(s), layers, std::to_string(st.replicas), formatSeconds(st.compute)});
    }
    out += t.render() + "\n";
  }
  out += fmt::format("Time per microbatch of the slowest stage: {} (one machine: {}, {:.2f}× faster; "
                     "data parallelism over all machines: {}, {:.2f}× faster)\n",
                     formatSeconds(r.time_per_stage), formatSeconds(r.single_machine),
                     r.single_machine / r.time_per_stage, formatSeconds(r.data_parallel),
                     r.data_parallel / r.time_per_stage);
  return out;
}

}  // namespace hydrozoa::plan
