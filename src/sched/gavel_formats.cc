#include "sched/gavel_formats.h"

#include <fmt/format.h>

#include <charconv>
#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/files.h"

namespace hydrozoa::sched {

Result<std::pair<std::string, int>> parseJobKey(const std::string& key) {
  const auto bad = [&] {
    return invalidArgument(fmt::format("\"{}\" is not a job key such as \"('ResNet-18 (batch size 32)', 1)\"", key));
  };
  if (key.size() < 7 || key.rfind("('", 0) != 0 || key.back() != ')') return bad();
  const auto close = key.rfind("', ");
  if (close == std::string::npos || close < 2) return bad();
  const std::string scale = key.substr(close + 3, key.size() - close - 4);
  int s = 0;
  const auto [end, ec] = std::from_chars(scale.data(), scale.data() + scale.size(), s);
  if (ec != std::errc() || end != scale.data() + scale.size() || s < 1 || s > 100000) return bad();
  return std::make_pair(key.substr(2, close - 2), s);
}

Result<Throughputs> Throughputs::fromJson(const Json& j, const std::string& what) {
  if (!j.is_object() || j.empty()) {
    return parseError(fmt::format("{}: expected {{worker type: {{job key: {{\"null\": steps/s}}}}}}", what));
  }
  Throughputs t;
  for (const auto& [worker, jobs] : j.items()) {
    if (!jobs.is_object()) return parseError(fmt::format("{}: {} should map job keys to throughputs", what, worker));
    auto& into = t.isolated_[worker];
    for (const auto& [key, entry] : jobs.items()) {
      auto job = parseJobKey(key);
      if (!job.ok()) return parseError(fmt::format("{}: {}: {}", what, worker, job.status().message()));
      const Json* alone = entry.is_object() && entry.contains("null") ? &entry["null"] : nullptr;
      if (alone == nullptr || !alone->is_number() || !(alone->get<double>() >= 0) ||
          !std::isfinite(alone->get<double>())) {
        return parseError(fmt::format("{}: {} {}: expected {{\"null\": steps per second, at least 0}}", what, worker,
                                      key));
      }
      into[*job] = alone->get<double>();
      for (const auto& [otherKey, both] : entry.items()) {
        if (otherKey == "null") continue;
        auto other = parseJobKey(otherKey);
        if (!other.ok()) return parseError(fmt::format("{}: {} {}: {}", what, worker, key, other.status().message()));
        const auto rate = [&](size_t i) {
          return both.is_array() && both.size() == 2 && both[i].is_number() && both[i].get<double>() >= 0 &&
                 std::isfinite(both[i].get<double>());
        };
        if (!rate(0) || !rate(1) || other->second != job->second) {
          return parseError(fmt::format("{}: {} {} with {}: expected [steps/s of this job, of the other], each at "
                                        "least 0, for two jobs of one scale factor",
                                        what, worker, key, otherKey));
        }
        t.shared_[worker][{job->first, other->first, job->second}] = {both[0].get<double>(), both[1].get<double>()};
      }
    }
  }
  return t;
}

Result<Throughputs> Throughputs::load(const std::string& path) {
  HZ_ASSIGN_OR_RETURN(const Json j, readJsonFile(path));
  return fromJson(j, path);
}

std::optional<double> Throughputs::isolated(const std::string& workerType, const std::string& jobType,
                                            int scale) const {
  auto w = isolated_.find(workerType);
  if (w == isolated_.end()) return std::nullopt;
  auto it = w->second.find({jobType, scale});
  if (it == w->second.end()) return std::nullopt;
  return it->second;
}

std::optional<std::pair<double, double>> Throughputs::shared(const std::string& workerType,
                                                             const std::string& jobType,
                                                             const std::string& otherType, int scale) const {
  auto w = shared_.find(workerType);
  if (w == shared_.end()) return std::nullopt;
  auto it = w->second.find({jobType, otherType, scale});
  if (it != w->second.end()) return it->second;
  it = w->second.find({otherType, jobType, scale});  // measured the other way round
  if (it == w->second.end()) return std::nullopt;
  return std::make_pair(it->second.second, it->second.first);
}

std::vector<std::string> Throughputs::workerTypes() const {
  std::vector<std::string> out;
  for (const auto& [name, _] : isolated_) out.push_back(name);
  return out;
}

std::vector<std::string> Throughputs::jobTypes(const std::string& workerType) const {
  std::vector<std::string> out;
  auto w = isolated_.find(workerType);
  if (w == isolated_.end()) return out;
  for (const auto& [key, _] : w->second) {
    if (out.empty() || out.back() != key.first) out.push_back(key.first);
  }
  return out;
}

Result<std::vector<TraceJob>> parseTrace(const std::string& text, const std::string& what) {
  std::vector<TraceJob> jobs;
  std::stringstream in(text);
  int lineNo = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineNo;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::vector<std::string> f;
    std::stringstream fields(line);
    for (std::string field; std::getline(fields, field, '\t');) f.push_back(field);
    if (f.size() != 10) {
      return parseError(fmt::format("{}:{}: {} tab-separated fields, expected 10 (job_type, command, "
                                    "working_directory, num_steps_arg, needs_data_dir, total_steps, scale_factor, "
                                    "priority_weight, SLO, arrival_time)",
                                    what, lineNo, f.size()));
    }
    auto number = [&](int i, const char* name, double lo, double hi) -> Result<double> {
      double v = 0;
      const std::string& s = f[static_cast<size_t>(i)];
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < lo || v > hi) {
        return parseError(fmt::format("{}:{}: {} \"{}\" is not a number from {} to {}", what, lineNo, name, s, lo, hi));
      }
      return v;
    };
    TraceJob j;
    j.type = f[0];
    if (j.type.empty()) return parseError(fmt::format("{}:{}: job_type is empty", what, lineNo));
    HZ_ASSIGN_OR_RETURN(j.total_steps, number(5, "total_steps", 1, 1e15));
    HZ_ASSIGN_OR_RETURN(const double scale, number(6, "scale_factor", 1, 100000));
    if (scale != std::floor(scale)) {
      return parseError(fmt::format("{}:{}: scale_factor {} is not a whole number of workers", what, lineNo, scale));
    }
    j.scale_factor = static_cast<int>(scale);
    HZ_ASSIGN_OR_RETURN(j.weight, number(7, "priority_weight", 1e-9, 1e9));
    HZ_ASSIGN_OR_RETURN(j.slo, number(8, "SLO", -1, 1e9));
    HZ_ASSIGN_OR_RETURN(j.arrival, number(9, "arrival_time", 0, 1e12));
    jobs.push_back(std::move(j));
  }
  if (jobs.empty()) return parseError(fmt::format("{}: no jobs", what));
  return jobs;
}

Result<std::vector<TraceJob>> loadTrace(const std::string& path) {
  HZ_ASSIGN_OR_RETURN(const std::string text, readTextFile(path));
  return parseTrace(text, path);
}

Result<Problem> problemOf(const std::vector<TraceJob>& jobs, const std::vector<WorkerType>& types,
                          const Throughputs& throughputs) {
  Problem p;
  p.types = types;
  for (const WorkerType& t : types) {
    if (!throughputs.hasWorkerType(baseType(t.name))) {
      std::string known;
      for (const auto& name : throughputs.workerTypes()) known += (known.empty() ? "" : ", ") + name;
      return invalidArgument(fmt::format("worker type {} has no throughputs (the file has {})", baseType(t.name), known));
    }
  }
  for (size_t m = 0; m < jobs.size(); ++m) {
    JobDemand d;
    d.type = jobs[m].type;
    d.scale_factor = jobs[m].scale_factor;
    d.weight = jobs[m].weight;
    d.steps_remaining = jobs[m].total_steps;
    for (const WorkerType& t : types) {
      d.throughput.push_back(throughputs.isolated(baseType(t.name), d.type, d.scale_factor).value_or(0));
    }
    // The SLO: that many times the job's duration on its fastest type.
    const double fastest = fastestThroughput(d);
    if (jobs[m].slo > 0 && fastest > 0) d.slo_left = jobs[m].slo * jobs[m].total_steps / fastest;
    p.jobs.push_back(std::move(d));
  }
  HZ_RETURN_IF_ERROR(checkProblem(p));
  return p;
}

}  // namespace hydrozoa::sched

namespace hydrozoa::sched {

void addSpaceSharing(Problem* p, const Throughputs& t, size_t limit) {
  struct Candidate {
    double gain;
    JobPair pair;
  };
  std::vector<Candidate> found;
  for (size_t a = 0; a < p->jobs.size(); ++a) {
    for (size_t b = a + 1; b < p->jobs.size(); ++b) {
      const JobDemand& x = p->jobs[a];
      const JobDemand& y = p->jobs[b];
      if (x.scale_factor != y.scale_factor) continue;
      JobPair pair;
      pair.a = static_cast<int>(a);
      pair.b = static_cast<int>(b);
      double gain = 0;
      for (size_t j = 0; j < p->types.size(); ++j) {
        const auto both = t.shared(baseType(p->types[j].name), x.type, y.type, x.scale_factor);
        const bool runs = both && x.throughput[j] > 0 && y.throughput[j] > 0;
        pair.throughput_a.push_back(runs ? both->first : 0.0);
        pair.throughput_b.push_back(runs ? both->second : 0.0);
        if (runs) gain = std::max(gain, both->first / x.throughput[j] + both->second / y.throughput[j] - 1);
      }
      if (gain > 1e-9) found.push_back({gain, std::move(pair)});
    }
  }
  std::stable_sort(found.begin(), found.end(), [](const Candidate& l, const Candidate& r) { return l.gain > r.gain; });
  if (found.size() > limit) found.resize(limit);
  std::stable_sort(found.begin(), found.end(), [](const Candidate& l, const Candidate& r) {
    return std::tie(l.pair.a, l.pair.b) < std::tie(r.pair.a, r.pair.b);
  });
  p->pairs.clear();
  for (Candidate& c : found) p->pairs.push_back(std::move(c.pair));
}

}  // namespace hydrozoa::sched
