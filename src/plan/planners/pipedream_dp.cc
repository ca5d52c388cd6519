#include "plan/planners/pipedream_dp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/table.h"

namespace hydrozoa::plan {
namespace {

constexpr double kNone = std::numeric_limits<double>::infinity();

// A^k(i→j, m): the slowest stage's time, where the last stage begins (its
// first layer; -1: a single stage) and with how many components.
struct Cell {
  double time = kNone;
  int split = -1;     // the sub-pipeline before it ends at layer split
  int machinesBefore = -1;  // index (machines − 1) of that sub-pipeline
  int replicas = 0;   // of the last stage
};

// Prefix sums over the chain: sum(first, last) of a quantity.
struct Prefix {
  std::vector<double> s;
  explicit Prefix(const std::vector<double>& v) : s(v.size() + 1, 0) {
    for (size_t i = 0; i < v.size(); ++i) s[i + 1] = s[i] + v[i];
  }
  double sum(int first, int last) const { return s[static_cast<size_t>(last) + 1] - s[static_cast<size_t>(first)]; }
};

std::vector<double> toDouble(const std::vector<Bytes>& v) { return {v.begin(), v.end()}; }

class Level {
 public:
  // table[i][j][m]: layers i..j on m + 1 components.
  std::vector<std::vector<std::vector<Cell>>> table;
};

}  // namespace

PipeDreamChain pipeDreamChain(const profile::Profile& profile) {
  PipeDreamChain c;
  const profile::Measurement& m = profile.measurements.front();
  for (size_t i = 0; i < profile.numLayers(); ++i) {
    c.compute.push_back((m.layers[i].forward_ms + m.layers[i].backward_ms) / 1e3);
    c.activation.push_back(m.layers[i].stashed_bytes);
    c.parameters.push_back(profile.layers[i].parameter_bytes);
    c.boundary.push_back(m.layers[i].output_bytes);
  }
  return c;
}

Result<PipeDreamResult> planPipeDream(const PipeDreamChain& chain, const PipeDreamOptions& o) {
  const int N = chain.numLayers();
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
  const Prefix compute(chain.compute), activation(toDouble(chain.activation)), params(toDouble(chain.parameters));
  // cost[i][j]: what the level's stages compute over layers i..j on one
  // component: the layers' own compute at level 1, the level below's best
  // pipeline over all of a component's machines above it.
  std::vector<std::vector<double>> cost(N, std::vector<double>(N, kNone));
  for (int i = 0; i < N; ++i) {
    for (int j = i; j < N; ++j) cost[i][j] = compute.sum(i, j);
  }
  std::vector<Level> levels;
  int within = 1;  // machines in one component of the level below
  for (size_t k = 0; k < o.levels.size(); ++k) {
    const int M = o.levels[k].machines;
    const double B = o.levels[k].bandwidth;
    const bool final = k + 1 == o.levels.size();
    Level level;
    level.table.assign(N, std::vector<std::vector<Cell>>(N, std::vector<Cell>(M)));
    auto& A = level.table;
    auto stash = [&](int first, int last, int before, int replicas) {
      return std::ceil(static_cast<double>(M - before) / replicas) *
             (activation.sum(first, last) + params.sum(first, last));
    };
    // One stage over layers i..j, replicated over m + 1 components.
    for (int i = 0; i < N; ++i) {
      for (int j = i; j < N; ++j) {
        for (int m = 0; m < (o.straight ? 1 : M); ++m) {
          if (o.memory_limit && stash(i, j, m + 1, m + 1) > static_cast<double>(*o.memory_limit)) continue;
          if (cost[i][j] == kNone) continue;
          const double sync = 4.0 * m * params.sum(i, j) / (B * (m + 1)) / within;
          A[i][j][m] = {(cost[i][j] + sync) / (m + 1), -1, -1, m + 1};
        }
      }
    }
    // A sub-pipeline over layers i..k on the other components, then a last
    // stage over k+1..j on m' of them. At the top level only pipelines from
    // layer 0 are needed.
    const int rows = final ? 1 : N;
    for (int i = 0; i < rows; ++i) {
      for (int m = 1; m < M; ++m) {
        for (int j = i + 1; j < N; ++j) {
          Cell best = A[i][j][m];
          if (o.fewer_machines && A[i][j][m - 1].time < best.time) best = A[i][j][m - 1];
          for (int s = i; s < j; ++s) {  // the sub-pipeline ends at layer s
            for (int mp = 1; mp <= (o.straight ? 1 : m); ++mp) {
              const Cell& before = A[i][s][m - mp];
              if (before.time == kNone || cost[s + 1][j] == kNone) continue;
              if (o.memory_limit && stash(s + 1, j, m + 1, mp) > static_cast<double>(*o.memory_limit)) continue;
              const double last =
                  (cost[s + 1][j] + 4.0 * (mp - 1) * params.sum(s + 1, j) / (B * mp)) / mp;
              double t = std::max(before.time, last);
              if (o.activation_compression) {
                const double r = *o.activation_compression;
                t = std::max(t, 2.0 * static_cast<double>(chain.boundary[s]) / (B * mp) / r);
                if (j < N - 1) t = std::max(t, 2.0 * static_cast<double>(chain.boundary[j]) / (B * mp) / r);
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
    levels.push_back(std::move(level));
    within = M;
  }

  PipeDreamResult r;
  const int top = static_cast<int>(levels.size()) - 1;
  r.time_per_stage = levels[top].table[0][N - 1][o.levels[top].machines - 1].time;
  if (r.time_per_stage == kNone) {
    return infeasible(o.memory_limit ? fmt::format("no pipeline of these machines fits {} per machine",
                                                   formatBytes(*o.memory_limit))
                                     : std::string("no pipeline of these machines exists"));
  }
  r.single_machine = compute.sum(0, N - 1);
  r.data_parallel = r.single_machine;
  within = 1;
  for (const PipeDreamLevel& l : o.levels) {
    const double sync = 4.0 * (l.machines - 1) * params.sum(0, N - 1) / (l.bandwidth * l.machines) / within;
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
        const Cell& c = levels[static_cast<size_t>(k)].table[first][end][m];
        const int begin = c.split < 0 ? first : c.split + 1;
        part.push_back({begin, end, c.replicas, compute.sum(begin, end)});
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

std::string renderPipeDream(const PipeDreamResult& r, const PipeDreamOptions& o,
                            const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < r.levels.size(); ++i) {
    const size_t level = r.levels.size() - i;  // the highest first
    const PipeDreamLevel& l = o.levels[level - 1];
    out += fmt::format("Level {}: {} {} at {}\n", level, l.machines,
                       level == 1 ? (l.machines == 1 ? "machine" : "machines") : "components",
                       formatBandwidth(l.bandwidth));
    TextTable t({"stage", "layers", "replicas", "compute"}, {true, false, true, true});
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
