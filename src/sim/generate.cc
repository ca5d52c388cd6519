#include "sim/generate.h"

#include <fmt/format.h>

#include <cmath>
#include <random>

namespace hydrozoa::sim {

Result<std::vector<sched::TraceJob>> generateTrace(const sched::Throughputs& t, const TraceOptions& o) {
  if (o.jobs < 1 || o.jobs > 1000000) return invalidArgument("--generate: from 1 to 1000000 jobs");
  if (!(o.rate > 0) || !std::isfinite(o.rate)) return invalidArgument("--rate: jobs per hour, above 0");
  const std::vector<int> scales = o.multiple ? std::vector<int>{1, 2, 4, 8} : std::vector<int>{1};
  // Job types measured on the reference type at every scale factor the trace uses.
  std::vector<std::string> types;
  for (const std::string& type : t.jobTypes(o.reference)) {
    bool all = true;
    for (int s : scales) all = all && t.isolated(o.reference, type, s).value_or(0) > 0;
    if (all) types.push_back(type);
  }
  if (types.empty()) {
    return invalidArgument(fmt::format("the throughputs have no job type measured on {} at scale factor{} {}",
                                       o.reference, scales.size() > 1 ? "s" : "",
                                       o.multiple ? "1, 2, 4 and 8" : "1"));
  }
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> unit(0, 1);
  std::exponential_distribution<double> gap(o.rate / 3600);
  std::vector<sched::TraceJob> jobs;
  double now = 0;
  for (int i = 0; i < o.jobs; ++i) {
    sched::TraceJob j;
    j.type = types[static_cast<size_t>(rng() % types.size())];
    if (o.multiple) {
      const double u = unit(rng);
      j.scale_factor = u < 0.7 ? 1 : u < 0.95 ? (unit(rng) < 0.5 ? 2 : 4) : 8;
    }
    const double x = unit(rng) < 0.8 ? 1.5 + 1.5 * unit(rng) : 3 + unit(rng);
    const double seconds = std::pow(10.0, x) * 60;
    j.total_steps = std::ceil(seconds * *t.isolated(o.reference, j.type, j.scale_factor));
    if (i > 0) now += gap(rng);
    j.arrival = now;
    jobs.push_back(std::move(j));
  }
  return jobs;
}

std::string formatTrace(const std::vector<sched::TraceJob>& jobs) {
  std::string out;
  for (const sched::TraceJob& j : jobs) {
    out += fmt::format("{}\t-\t-\t-\t0\t{}\t{}\t{}\t{:.6f}\t{}\n", j.type, j.total_steps, j.scale_factor, j.weight,
                       j.slo, j.arrival);
  }
  return out;
}

}  // namespace hydrozoa::sim
