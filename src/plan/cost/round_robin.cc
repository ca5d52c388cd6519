#include "plan/cost/round_robin.h"

#include <algorithm>
#include <numeric>

#include "core/status.h"

namespace hydrozoa::plan {

Seconds roundRobinSecondsPerMicrobatch(const std::vector<RoundRobinStage>& stages, const HostShare& host) {
  HZ_CHECK(!stages.empty());
  std::int64_t workers = 0;
  Seconds perCopy = 0, link = 0, work = 0;
  for (size_t s = 0; s < stages.size(); ++s) {
    const RoundRobinStage& st = stages[s];
    HZ_CHECK(st.replicas >= 1);
    workers += st.replicas;
    perCopy = std::max(perCopy, (st.compute + st.update) / st.replicas);
    work += st.compute + st.update;
    if (s > 0) link = std::max(link, 2 * st.cut_in / std::min(stages[s - 1].replicas, st.replicas));
  }
  const double threads = static_cast<double>(workers) * std::max(1, host.threads);
  // A copy computes no faster than a core of its own, slowed by the cores
  // in use (all of them busy in the steady state); past the cores, copies
  // that wait leave theirs to the others, so the host's total is the bound.
  const double used = host.cores > 0 ? std::min<double>(threads, host.cores) : threads;
  Seconds t = std::max(perCopy / host.rate(used), link);
  if (host.cores > 0 && threads > host.cores) {
    t = std::max(t, work * std::max(1, host.threads) / host.cores / host.rate(host.cores));
  }
  return t;
}

std::vector<std::int64_t> roundRobinInFlight(const std::vector<int>& replicas) {
  std::vector<std::int64_t> held(replicas.size());
  std::int64_t downstream = 0;
  for (size_t s = replicas.size(); s-- > 0;) {
    downstream += replicas[s];
    held[s] = (downstream + replicas[s] - 1) / replicas[s];
  }
  return held;
}

std::int64_t roundRobinWindow(const std::vector<int>& replicas, int stage) {
  const auto s = static_cast<size_t>(stage);
  return replicas.at(s) * (roundRobinInFlight(replicas)[s] - 1) + 1;
}

std::int64_t roundRobinStepInFlight(const std::vector<int>& replicas) {
  std::int64_t most = 0;
  for (size_t s = 0; s < replicas.size(); ++s) most = std::max(most, roundRobinWindow(replicas, static_cast<int>(s)));
  return most;
}

std::int64_t roundRobinUnit(const std::vector<int>& replicas, std::int64_t most) {
  std::int64_t unit = 1;
  for (int r : replicas) {
    HZ_CHECK(r >= 1);
    unit = std::lcm(unit, std::int64_t{r});
    if (unit > most) break;
  }
  return unit;
}

std::int64_t roundRobinNoam(const std::vector<int>& replicas, std::int64_t unit) {
  HZ_CHECK(!replicas.empty() && replicas.front() >= 1 && unit >= 1);
  const std::int64_t A = replicas.front();
  const std::int64_t workers = std::accumulate(replicas.begin(), replicas.end(), std::int64_t{0});
  const std::int64_t step = unit / std::gcd(A, unit);  // unit divides A·M exactly when step divides M
  const std::int64_t noam = (workers + A - 1) / A;
  return (noam + step - 1) / step * step;
}

}  // namespace hydrozoa::plan
