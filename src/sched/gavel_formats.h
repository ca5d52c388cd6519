// Gavel's published input formats (../shared/gavel/README.md): the
// throughputs file and the job trace, read with every problem named by
// file, line or key.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/files.h"
#include "core/status.h"
#include "sched/problem.h"

namespace hydrozoa::sched {

// {worker_type: {"('JOB TYPE', SCALE)": {"null": steps/s alone,
// "('OTHER TYPE', SCALE)": [steps/s of this job, of the other] when the two
// share the workers (space sharing)}}}.
class Throughputs {
 public:
  static Result<Throughputs> load(const std::string& path);
  static Result<Throughputs> fromJson(const Json& j, const std::string& what);
  // Steps/s of `jobType` on `workerType` with `scale` workers; nothing when
  // not measured.
  std::optional<double> isolated(const std::string& workerType, const std::string& jobType, int scale) const;
  // Steps/s of `jobType` and of `otherType` when they share `workerType`'s
  // workers (both with `scale`); nothing when not measured.
  std::optional<std::pair<double, double>> shared(const std::string& workerType, const std::string& jobType,
                                                  const std::string& otherType, int scale) const;
  bool hasWorkerType(const std::string& workerType) const { return isolated_.count(workerType) > 0; }
  std::vector<std::string> workerTypes() const;
  // The job types measured on `workerType` (at any scale factor), sorted.
  std::vector<std::string> jobTypes(const std::string& workerType) const;

 private:
  std::map<std::string, std::map<std::pair<std::string, int>, double>> isolated_;
  // worker type -> (job type, other job type, scale) -> (this, other)
  std::map<std::string, std::map<std::tuple<std::string, std::string, int>, std::pair<double, double>>> shared_;
};

// "('ResNet-18 (batch size 32)', 1)" -> {"ResNet-18 (batch size 32)", 1}.
Result<std::pair<std::string, int>> parseJobKey(const std::string& key);

struct TraceJob {
  std::string type;
  double total_steps = 0;
  int scale_factor = 1;
  double weight = 1;
  double slo = -1;        // deadline factor; < 0: none
  double arrival = 0;     // seconds from the trace's start
};

// One job per line, 10 tab-separated fields (job_type, command,
// working_directory, num_steps_arg, needs_data_dir, total_steps,
// scale_factor, priority_weight, SLO, arrival_time).
Result<std::vector<TraceJob>> loadTrace(const std::string& path);
Result<std::vector<TraceJob>> parseTrace(const std::string& text, const std::string& what);

// The problem of `jobs` (each with all its steps left) on `types`, their
// throughputs looked up; a job with none on any type is an error naming it.
// A job's SLO factor s > 0 gives it s × its duration on its fastest type.
Result<Problem> problemOf(const std::vector<TraceJob>& jobs, const std::vector<WorkerType>& types,
                          const Throughputs& throughputs);

// Space sharing (Gavel §5.3.1): adds to `problem` every pair of its jobs
// with the same scale factor whose shared throughputs are measured and beat
// taking turns on some type (the two shares of their throughputs alone sum
// past 1), at most `limit` pairs (the best gains first).
void addSpaceSharing(Problem* problem, const Throughputs& throughputs, size_t limit = 50000);

}  // namespace hydrozoa::sched
