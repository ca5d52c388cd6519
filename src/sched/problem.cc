#include "sched/problem.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>
#include <string_view>

namespace hydrozoa::sched {

namespace {
constexpr std::string_view kSpot = ":spot";
}  // namespace

std::string baseType(const std::string& name) {
  return isSpot(name) ? name.substr(0, name.size() - kSpot.size()) : name;
}

bool isSpot(const std::string& name) {
  return name.size() > kSpot.size() && name.compare(name.size() - kSpot.size(), kSpot.size(), kSpot) == 0;
}

Result<std::vector<WorkerType>> parseCluster(const std::string& text, const std::string& what) {
  std::vector<WorkerType> types;
  std::set<std::string> seen;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const auto eq = item.find('=');
    WorkerType t;
    t.name = item.substr(0, eq);
    const std::string count = eq == std::string::npos ? "" : item.substr(eq + 1);
    const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), t.count);
    if (t.name.empty() || ec != std::errc() || end != count.data() + count.size() || t.count < 1 ||
        t.count > 100000) {
      return invalidArgument(fmt::format("{}: \"{}\" is not TYPE=COUNT with a count from 1 to 100000 (write e.g. "
                                         "v100=4,p100=4,k80=4)",
                                         what, item));
    }
    if (baseType(t.name).find(':') != std::string::npos) {
      return invalidArgument(fmt::format("{}: worker type \"{}\" is not TYPE or TYPE:spot (e.g. v100:spot)", what,
                                         t.name));
    }
    if (!seen.insert(t.name).second) return invalidArgument(fmt::format("{}: {} is given twice", what, t.name));
    types.push_back(std::move(t));
  }
  if (types.empty()) return invalidArgument(fmt::format("{}: no worker types (write e.g. v100=4,k80=4)", what));
  return types;
}

Result<std::vector<double>> parsePrices(const std::string& text, const std::vector<WorkerType>& types,
                                        const std::string& what) {
  std::vector<double> price(types.size(), -1);
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const auto eq = item.find('=');
    const std::string name = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    double usd = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), usd);
    if (ec != std::errc() || end != value.data() + value.size() || !(usd > 0) || usd > 1e6) {
      return invalidArgument(fmt::format("{}: \"{}\" is not TYPE=USD_PER_HOUR with a price above 0 (write e.g. "
                                         "v100=3.06,k80=0.9)",
                                         what, item));
    }
    size_t j = 0;
    while (j < types.size() && types[j].name != name) ++j;
    if (j == types.size()) return invalidArgument(fmt::format("{}: {} is not a worker type of the cluster", what, name));
    price[j] = usd;
  }
  for (size_t j = 0; j < types.size(); ++j) {
    if (price[j] < 0) return invalidArgument(fmt::format("{}: no price for {}", what, types[j].name));
  }
  return price;
}

Result<std::vector<int>> parseEntities(const std::string& text, size_t jobs, std::vector<Problem::Entity>* entities,
                                       const std::string& what) {
  std::vector<int> of(jobs, -1);
  entities->clear();
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const auto bad = [&] {
      return invalidArgument(fmt::format("{}: \"{}\" is not NAME=WEIGHT:fairness|fifo:FIRST-LAST (jobs by trace "
                                         "index, LAST not included; e.g. product=2:fairness:0-10)",
                                         what, item));
    };
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) return bad();
    std::vector<std::string> parts;
    std::stringstream fields(item.substr(eq + 1));
    for (std::string f; std::getline(fields, f, ':');) parts.push_back(f);
    if (parts.size() != 3 || (parts[1] != "fairness" && parts[1] != "fifo")) return bad();
    Problem::Entity e;
    e.name = item.substr(0, eq);
    e.fifo = parts[1] == "fifo";
    const auto [wend, wec] = std::from_chars(parts[0].data(), parts[0].data() + parts[0].size(), e.weight);
    const auto dash = parts[2].find('-');
    size_t first = 0, last = 0;
    if (wec != std::errc() || wend != parts[0].data() + parts[0].size() || !(e.weight > 0) || e.weight > 1e9 ||
        dash == std::string::npos) {
      return bad();
    }
    const std::string a = parts[2].substr(0, dash), b = parts[2].substr(dash + 1);
    const auto [aend, aec] = std::from_chars(a.data(), a.data() + a.size(), first);
    const auto [bend, bec] = std::from_chars(b.data(), b.data() + b.size(), last);
    if (aec != std::errc() || aend != a.data() + a.size() || bec != std::errc() || bend != b.data() + b.size() ||
        last <= first || last > jobs) {
      return invalidArgument(fmt::format("{}: {}'s jobs {} are not a range of the trace's 0-{}", what, e.name,
                                         parts[2], jobs));
    }
    for (size_t m = first; m < last; ++m) {
      if (of[m] >= 0) {
        return invalidArgument(fmt::format("{}: job {} is in both {} and {}", what, m,
                                           (*entities)[static_cast<size_t>(of[m])].name, e.name));
      }
      of[m] = static_cast<int>(entities->size());
    }
    entities->push_back(std::move(e));
  }
  if (entities->empty()) return invalidArgument(fmt::format("{}: no entities", what));
  return of;
}

double effectiveThroughput(const JobDemand& job, const std::vector<double>& x) {
  double sum = 0;
  for (size_t j = 0; j < x.size() && j < job.throughput.size(); ++j) sum += job.throughput[j] * x[j];
  return sum;
}

double effectiveThroughput(const Problem& p, const Allocation& a, int m) {
  double sum = effectiveThroughput(p.jobs[static_cast<size_t>(m)], a.x[static_cast<size_t>(m)]);
  for (size_t c = 0; c < a.pairs.size() && c < p.pairs.size(); ++c) {
    const JobPair& pair = p.pairs[c];
    if (pair.a != m && pair.b != m) continue;
    const std::vector<double>& rate = pair.a == m ? pair.throughput_a : pair.throughput_b;
    for (size_t j = 0; j < rate.size() && j < a.pairs[c].size(); ++j) sum += rate[j] * a.pairs[c][j];
  }
  return sum;
}

double fastestThroughput(const JobDemand& job) {
  return job.throughput.empty() ? 0 : *std::max_element(job.throughput.begin(), job.throughput.end());
}

Status checkProblem(const Problem& p) {
  if (p.types.empty()) return invalidArgument("no worker types");
  for (const WorkerType& t : p.types) {
    if (t.count < 0) return invalidArgument(fmt::format("worker type {} has {} workers", t.name, t.count));
  }
  for (size_t m = 0; m < p.jobs.size(); ++m) {
    const JobDemand& job = p.jobs[m];
    if (job.throughput.size() != p.types.size()) {
      return internalError(fmt::format("job {} has {} throughputs for {} worker types", m, job.throughput.size(),
                                       p.types.size()));
    }
    if (job.scale_factor < 1 || !(job.weight > 0) || !std::isfinite(job.weight) || !(job.steps_remaining >= 0)) {
      return invalidArgument(fmt::format("job {} ({}): scale factor {}, weight {}, {} steps: expected at least 1 "
                                         "worker, a positive weight and steps not negative",
                                         m, job.type, job.scale_factor, job.weight, job.steps_remaining));
    }
    bool runs = false;
    for (size_t j = 0; j < p.types.size(); ++j) {
      if (!(job.throughput[j] >= 0) || !std::isfinite(job.throughput[j])) {
        return invalidArgument(fmt::format("job {} ({}): throughput {} on {} is not a rate", m, job.type,
                                           job.throughput[j], p.types[j].name));
      }
      runs |= job.throughput[j] > 0 && job.scale_factor <= p.types[j].count;
    }
    if (!runs) {
      return invalidArgument(fmt::format("job {} ({}, {} worker{}) has no throughput on any worker type with that many "
                                         "workers: measure it there or give the cluster more",
                                         m, job.type, job.scale_factor, job.scale_factor == 1 ? "" : "s"));
    }
  }
  for (size_t c = 0; c < p.pairs.size(); ++c) {
    const JobPair& pair = p.pairs[c];
    const bool ok = pair.a >= 0 && pair.a < pair.b && static_cast<size_t>(pair.b) < p.jobs.size() &&
                    pair.throughput_a.size() == p.types.size() && pair.throughput_b.size() == p.types.size() &&
                    p.jobs[static_cast<size_t>(pair.a)].scale_factor == p.jobs[static_cast<size_t>(pair.b)].scale_factor;
    if (!ok) return internalError(fmt::format("pair {} ({} and {}) is not two jobs of one scale factor", c, pair.a, pair.b));
    for (size_t j = 0; j < p.types.size(); ++j) {
      for (double t : {pair.throughput_a[j], pair.throughput_b[j]}) {
        if (!(t >= 0) || !std::isfinite(t)) {
          return invalidArgument(fmt::format("jobs {} and {} sharing {}: throughput {} is not a rate", pair.a, pair.b,
                                             p.types[j].name, t));
        }
      }
    }
  }
  return Status();
}

}  // namespace hydrozoa::sched
