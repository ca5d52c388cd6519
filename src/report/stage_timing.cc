#include "report/stage_timing.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>

namespace hydrozoa::report {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// What one worker's spans add up to.
struct WorkerSpans {
  int stage = -1;
  std::map<std::int64_t, double> compute_us;        // step -> forward + backward
  std::map<std::int64_t, double> backward_end_us;   // step -> end of its last backward
  std::vector<double> update_us;                    // each traced step's optimizer step
  std::vector<double> allreduce_end_us;             // each bucket's end
};

// The allreduce a step waited for after its own compute: from the end of its
// last backward to the end of the last bucket that ended after it (and before
// the next step's last backward ended). The buckets start during the last
// backward, so their spans' lengths would count overlapped time too; the plan
// predicts the part that is not overlapped (Hydrozoa §A.1: T = R + allreduce).
std::vector<double> exposedAllreduce(const WorkerSpans& w) {
  std::vector<std::pair<double, std::int64_t>> ends;  // backward end, step
  for (const auto& [step, end] : w.backward_end_us) ends.emplace_back(end, step);
  std::sort(ends.begin(), ends.end());
  std::map<size_t, double> lastBucket;  // index into ends -> latest bucket end
  for (const double end : w.allreduce_end_us) {
    auto it = std::upper_bound(ends.begin(), ends.end(), std::make_pair(end, INT64_MAX));
    if (it == ends.begin()) continue;  // before any traced step's backward ended
    const size_t i = static_cast<size_t>(it - ends.begin()) - 1;
    lastBucket[i] = std::max(lastBucket[i], end);
  }
  std::vector<double> seconds;
  for (const auto& [i, end] : lastBucket) seconds.push_back((end - ends[i].first) * 1e-6);
  return seconds;
}

}  // namespace

std::vector<StageTiming> stageTimingsFromTrace(const Json& trace, const plan::Plan* plan) {
  std::map<std::int64_t, WorkerSpans> workers;  // by pid
  const Json* events = nullptr;
  if (trace.is_object() && trace.contains("traceEvents") && trace["traceEvents"].is_array()) {
    events = &trace["traceEvents"];
  } else if (trace.is_array()) {
    events = &trace;  // the bare array form of the trace-event format
  }
  if (events) {
    for (const Json& e : *events) {
      if (!e.is_object() || !e.contains("pid") || !e["pid"].is_number_integer()) continue;
      const std::int64_t pid = e["pid"].get<std::int64_t>();
      const std::string name = e.value("name", "");
      const std::string ph = e.value("ph", "");
      if (ph == "M" && name == "process_name") {
        const std::string process = e.contains("args") && e["args"].is_object() ? e["args"].value("name", "") : "";
        const auto at = process.find("stage ");
        int stage = -1;
        if (at != std::string::npos && std::sscanf(process.c_str() + at, "stage %d", &stage) == 1 && stage >= 0) {
          workers[pid].stage = stage;
        }
        continue;
      }
      if (ph != "X" || !e.contains("dur") || !e["dur"].is_number()) continue;
      const double dur = e["dur"].get<double>();
      const std::string cat = e.value("cat", "");
      if (cat == "compute" && (startsWith(name, "forward") || startsWith(name, "backward"))) {
        const Json* args = e.contains("args") && e["args"].is_object() ? &e["args"] : nullptr;
        if (!args || !args->contains("step") || !(*args)["step"].is_number_integer()) continue;
        const std::int64_t step = (*args)["step"].get<std::int64_t>();
        workers[pid].compute_us[step] += dur;
        if (startsWith(name, "backward") && e.contains("ts") && e["ts"].is_number()) {
          double& end = workers[pid].backward_end_us[step];
          end = std::max(end, e["ts"].get<double>() + dur);
        }
      } else if (cat == "compute" && name == "optimizer step") {
        workers[pid].update_us.push_back(dur);
      } else if (cat == "allreduce" && e.contains("ts") && e["ts"].is_number()) {
        workers[pid].allreduce_end_us.push_back(e["ts"].get<double>() + dur);
      }
    }
  }

  int stages = plan ? static_cast<int>(plan->stages.size()) : 0;
  for (const auto& [pid, w] : workers) {
    if (w.stage >= 0 && !w.compute_us.empty()) stages = std::max(stages, w.stage + 1);
  }
  std::vector<StageTiming> out(static_cast<size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    StageTiming& t = out[static_cast<size_t>(s)];
    t.stage = s;
    if (plan && s < static_cast<int>(plan->stages.size())) {
      const plan::PlanStage& ps = plan->stages[static_cast<size_t>(s)];
      t.first_layer = ps.first_layer;
      t.last_layer = ps.last_layer;
      t.layers = ps.layersText();
      t.predicted_compute = static_cast<double>(plan->num_microbatches) * (ps.forward_seconds + ps.backward_seconds);
      if (plan->data_parallel > 1) t.predicted_allreduce = ps.allreduce_exposed_seconds;
      if (ps.update_seconds > 0) t.predicted_update = ps.update_seconds;
    }
    double compute = 0, allreduce = 0, update = 0;
    int allreducing = 0, updating = 0;
    for (const auto& [pid, w] : workers) {
      if (w.stage != s || w.compute_us.empty()) continue;
      std::vector<double> perStep;
      for (const auto& [step, us] : w.compute_us) perStep.push_back(us * 1e-6);
      compute += median(perStep);
      if (t.workers_traced++ == 0) t.steps_traced = static_cast<int>(perStep.size());
      if (!w.update_us.empty()) {
        update += median(w.update_us) * 1e-6;
        ++updating;
      }
      if (const std::vector<double> waits = exposedAllreduce(w); !waits.empty()) {
        allreduce += median(waits);
        ++allreducing;
      }
    }
    if (t.workers_traced > 0) t.measured_compute = compute / t.workers_traced;
    if (allreducing > 0) t.measured_allreduce = allreduce / allreducing;
    if (updating > 0) t.measured_update = update / updating;
  }
  return out;
}

Result<std::vector<StageTiming>> loadStageTimings(const std::string& path, const plan::Plan* plan) {
  HZ_ASSIGN_OR_RETURN(Json trace, readJsonFile(path));
  return stageTimingsFromTrace(trace, plan);
}

}  // namespace hydrozoa::report
