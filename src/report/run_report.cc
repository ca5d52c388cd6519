#include "report/run_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <system_error>

#include "core/limits.h"
#include "report/stage_timing.h"

namespace hydrozoa::report {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRunFiles[] = {"job.yaml", "plan.json", "metrics.jsonl", "summary.json"};

bool exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

std::optional<double> optNumber(const Json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::optional<std::int64_t> optInt(const Json& j, const char* key) {
  const auto v = optNumber(j, key);
  // Past ±2^62 (or NaN) the cast would be undefined: such a figure is no count.
  if (!v || !(std::fabs(*v) < 4.6e18)) return std::nullopt;
  return static_cast<std::int64_t>(*v);
}

std::string optString(const Json& j, const char* key) {
  if (!j.is_object()) return "";
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

const Json& member(const Json& j, const char* key) {
  static const Json kNull;
  if (!j.is_object()) return kNull;
  const auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

// What a path that is not a run directory is, for the error message.
Status notARunDirectory(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    return notFound(fmt::format("{}: no such directory; expected a run directory of `hydrozoa train` (the --out DIR "
                                "it printed, holding metrics.jsonl and summary.json)",
                                path));
  }
  if (!fs::is_directory(st)) {
    const std::string name = fs::path(path).filename().string();
    for (const char* file : kRunFiles) {
      if (name == file) {
        return invalidArgument(fmt::format("{} is a file of a run directory; give the directory: {}", path,
                                           fs::path(path).parent_path().empty() ? std::string(".")
                                                                                : fs::path(path).parent_path().string()));
      }
    }
    return invalidArgument(fmt::format("{} is a file, not a run directory; expected the directory `hydrozoa train` "
                                       "wrote (with job.yaml, metrics.jsonl and summary.json)",
                                       path));
  }
  return invalidArgument(fmt::format("{} is a directory but not a run directory: it holds none of job.yaml, plan.json, "
                                     "metrics.jsonl, summary.json; give the --out DIR of `hydrozoa train`",
                                     path));
}

std::string eventLabel(const std::string& kind, const Json& e) {
  if (kind == "worker_lost") {
    const auto w = optInt(e, "worker");
    return w ? fmt::format("lost worker {}", *w) : "lost a worker";
  }
  if (kind == "recovered") return "recovered from " + (optString(e, "restored_from").empty() ? std::string("?") : optString(e, "restored_from"));
  if (kind == "scaled") {
    const auto before = optInt(e, "replicas_before"), after = optInt(e, "replicas");
    if (before && after) return fmt::format("{} \u2192 {} replicas", *before, *after);
    return "scaled";
  }
  return kind;
}

std::string eventDetail(const std::string& kind, const Json& e) {
  std::string d = optString(e, "why");
  auto add = [&d](const std::string& s) { d += (d.empty() ? "" : "; ") + s; };
  if (kind == "worker_lost") {
    if (const auto s = optInt(e, "steps_completed")) add(fmt::format("{} steps completed", *s));
  } else if (kind == "recovered") {
    if (const auto s = optInt(e, "restore_step")) add(fmt::format("restored at step {}", *s));
    if (const auto s = optInt(e, "lost_steps")) add(fmt::format("{} steps redone", *s));
    if (const auto s = optNumber(e, "seconds_to_training")) add("training again after " + formatSeconds(*s));
  } else if (kind == "scaled") {
    if (const auto w = optInt(e, "workers")) add(fmt::format("{} workers", *w));
    if (const auto b = optInt(e, "global_batch")) add(fmt::format("global batch {}", *b));
    if (const auto s = optNumber(e, "seconds_to_training")) add("training again after " + formatSeconds(*s));
  }
  return d;
}

// metrics.jsonl: steps, evaluations and events in file order.
Status loadMetrics(const std::string& path, RunReport& run) {
  HZ_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  std::istringstream in(text);
  std::string line;
  size_t number = 0;
  Seconds lastT = 0;
  std::vector<size_t> evalsWithoutTime;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const Json j = parseJsonOrDiscarded(line);
    if (!j.is_object()) {
      if (in.peek() == std::char_traits<char>::eof()) {  // a line cut short by a crash
        run.notes.push_back(fmt::format("{}: the last line ({}) is cut short and was skipped", path, number));
        break;
      }
      return parseError(fmt::format("{}:{}: not a JSON object; metrics.jsonl holds one object per line (is this a "
                                    "hydrozoa run directory?)",
                                    path, number));
    }
    const auto t = optNumber(j, "t");
    if (j.contains("event")) {
      RunEvent e;
      e.kind = optString(j, "event");
      // A recovery is written at the first step after it, with the loss's time
      // and how long training took to resume.
      const auto lostAt = optNumber(j, "lost_at");
      e.t = t ? *t : lostAt ? *lostAt + optNumber(j, "seconds_to_training").value_or(0) : lastT;
      e.label = eventLabel(e.kind, j);
      e.detail = eventDetail(e.kind, j);
      e.fields = j;
      run.events.push_back(std::move(e));
    } else if (j.contains("step")) {
      StepPoint s;
      s.t = t.value_or(lastT);
      s.epoch = optInt(j, "epoch").value_or(0);
      s.step = optInt(j, "step").value_or(0);
      s.loss = optNumber(j, "loss").value_or(0);
      s.samples_per_second = optNumber(j, "samples_per_s");
      s.workers = static_cast<int>(optInt(j, "workers").value_or(0));
      s.cost = optNumber(j, "cost_usd").value_or(0);
      s.partial = member(j, "partial").is_boolean() && member(j, "partial").get<bool>();
      run.steps.push_back(s);
    } else if (j.contains("test_accuracy")) {
      EvalPoint e;
      e.t = t.value_or(lastT);
      e.epoch = optInt(j, "epoch").value_or(0);
      e.test_loss = optNumber(j, "test_loss").value_or(0);
      e.test_accuracy = optNumber(j, "test_accuracy").value_or(0);
      e.cost = optNumber(j, "cost_usd");
      run.evals.push_back(e);
    }
    if (t) lastT = *t;
  }
  if (run.steps.empty()) run.notes.push_back(path + " has no steps yet: the run failed or stopped before its first step");
  return Status();
}

RunOutcome outcomeFromJson(const Json& s) {
  RunOutcome o;
  o.status = optString(s, "status");
  o.reason = optString(s, "reason");
  const Json& steps = member(s, "steps");
  o.steps_done = optInt(steps, "done");
  o.steps_total = optInt(steps, "total");
  o.epochs_completed = optInt(s, "epochs_completed");
  o.generations = optInt(s, "generations");
  o.samples = optNumber(s, "samples");
  o.final_loss = optNumber(s, "final_loss");
  o.final_test_accuracy = optNumber(s, "final_test_accuracy");
  o.final_test_loss = optNumber(s, "final_test_loss");
  o.wall_seconds = optNumber(s, "wall_seconds");
  o.training_seconds = optNumber(s, "training_seconds");
  o.throughput = optNumber(s, "throughput_samples_per_s");
  const Json& it = member(s, "iteration_seconds");
  o.iteration_measured = optNumber(it, "measured_median");
  o.iteration_predicted = optNumber(it, "predicted");
  const Json& bubble = member(s, "bubble_fraction");
  o.bubble_measured = optNumber(bubble, "measured_median");
  o.bubble_predicted = optNumber(bubble, "predicted");
  o.cost = optNumber(s, "cost_usd");
  o.samples_per_dollar = optNumber(s, "samples_per_dollar");
  const std::string policy = optString(member(s, "scaling"), "policy");
  if (!policy.empty()) o.scaling_policy = policy;
  const std::string launcher = optString(member(s, "launcher"), "kind");
  if (!launcher.empty()) o.launcher = launcher;
  const Json& workers = member(s, "workers");
  if (workers.is_array()) {
    for (const Json& w : workers) {
      const auto id = optInt(w, "id"), replica = optInt(w, "replica"), stage = optInt(w, "stage");
      auto valid = [](const std::optional<std::int64_t>& v) { return v && *v >= 0 && *v < kWorkersRange.max; };
      if (!valid(id) || !valid(replica) || !valid(stage)) continue;
      WorkerOutcome out{static_cast<int>(*id), static_cast<int>(*replica), static_cast<int>(*stage), std::nullopt};
      const auto peak = optInt(w, "peak_memory");
      if (peak && *peak > 0 && *peak <= kMaxBytes) out.peak_memory = *peak;
      o.workers.push_back(out);
    }
  }
  return o;
}

Json opt(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }
Json opt(const std::optional<std::int64_t>& v) { return v ? Json(*v) : Json(nullptr); }
Json opt(const std::optional<int>& v) { return v ? Json(*v) : Json(nullptr); }
Json opt(const std::optional<std::string>& v) { return v ? Json(*v) : Json(nullptr); }

}  // namespace

std::string RunReport::status() const {
  if (outcome && !outcome->status.empty()) return outcome->status;
  return "unfinished";
}

Result<RunReport> loadRunReport(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return notARunDirectory(dir);
  const auto file = [&dir](const char* name) { return (fs::path(dir) / name).string(); };
  if (std::none_of(std::begin(kRunFiles), std::end(kRunFiles), [&](const char* f) { return exists(file(f)); })) {
    return notARunDirectory(dir);
  }
  RunReport run;
  run.dir = dir;
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "runs/x/"
  run.label = p.filename().string();
  if (run.label.empty() || run.label == ".") run.label = fs::absolute(p, ec).lexically_normal().filename().string();

  if (exists(file("job.yaml"))) {
    HZ_ASSIGN_OR_RETURN(Json job, readYamlFile(file("job.yaml")));
    run.job_name = optString(job, "name");
    const Json& model = member(job, "model");
    run.model = model.is_string() ? model.get<std::string>() : optString(model, "name");
  } else {
    run.notes.push_back("no job.yaml");
  }
  if (exists(file("plan.json"))) {
    HZ_ASSIGN_OR_RETURN(run.plan, plan::loadPlan(file("plan.json")));
    if (run.model.empty()) run.model = run.plan->model;
  } else {
    run.notes.push_back("no plan.json: the run stopped before its plan was made");
  }
  if (exists(file("metrics.jsonl"))) {
    HZ_RETURN_IF_ERROR(loadMetrics(file("metrics.jsonl"), run));
  } else {
    run.notes.push_back("no metrics.jsonl: the run stopped before its first step");
  }
  if (exists(file("summary.json"))) {
    HZ_ASSIGN_OR_RETURN(Json summary, readJsonFile(file("summary.json")));
    if (!summary.is_object()) return parseError(file("summary.json") + ": expected a JSON object");
    run.outcome = outcomeFromJson(summary);
    if (run.model.empty()) run.model = optString(summary, "model");
  } else {
    run.notes.push_back("no summary.json: the run is still going, or its coordinator was killed");
  }
  if (exists(file("trace.json"))) {
    auto stages = loadStageTimings(file("trace.json"), run.plan ? &*run.plan : nullptr);
    if (stages.ok()) {
      run.stages = std::move(*stages);
    } else {
      run.notes.push_back("trace.json skipped: " + stages.status().message());
    }
  } else {
    run.notes.push_back("no trace.json: no measured time per stage (it is written when the run ends)");
  }
  if (run.stages.empty() && run.plan) run.stages = stageTimingsFromTrace(Json::object(), &*run.plan);
  return run;
}

void labelRuns(std::vector<RunReport>& runs) {
  std::map<std::string, int> seen;
  for (const auto& r : runs) ++seen[r.label];
  std::map<std::string, int> used;
  for (auto& r : runs) {
    if (seen[r.label] < 2) continue;
    std::error_code ec;
    const fs::path parent = fs::absolute(r.dir, ec).lexically_normal().parent_path();
    std::string label = parent.filename().string() + "/" + r.label;
    if (++used[label] > 1) label += fmt::format(" ({})", used[label]);
    r.label = label;
  }
}

Json runReportToJson(const RunReport& run) {
  Json outcome = nullptr;
  if (run.outcome) {
    const RunOutcome& o = *run.outcome;
    outcome = {{"status", o.status},
               {"reason", o.reason},
               {"steps_done", opt(o.steps_done)},
               {"steps_total", opt(o.steps_total)},
               {"epochs_completed", opt(o.epochs_completed)},
               {"generations", opt(o.generations)},
               {"samples", opt(o.samples)},
               {"final_loss", opt(o.final_loss)},
               {"final_test_accuracy", opt(o.final_test_accuracy)},
               {"final_test_loss", opt(o.final_test_loss)},
               {"wall_seconds", opt(o.wall_seconds)},
               {"training_seconds", opt(o.training_seconds)},
               {"throughput_samples_per_s", opt(o.throughput)},
               {"iteration_seconds_measured", opt(o.iteration_measured)},
               {"iteration_seconds_predicted", opt(o.iteration_predicted)},
               {"bubble_fraction_measured", opt(o.bubble_measured)},
               {"bubble_fraction_predicted", opt(o.bubble_predicted)},
               {"cost_usd", opt(o.cost)},
               {"samples_per_dollar", opt(o.samples_per_dollar)},
               {"scaling_policy", opt(o.scaling_policy)},
               {"launcher", opt(o.launcher)}};
    Json workers = Json::array();
    for (const auto& w : o.workers) {
      workers.push_back({{"id", w.id}, {"replica", w.replica}, {"stage", w.stage}, {"peak_memory", opt(w.peak_memory)}});
    }
    outcome["workers"] = std::move(workers);
  }
  Json steps = Json::array();
  for (const auto& s : run.steps) {
    Json j = {{"t", s.t},       {"epoch", s.epoch},     {"step", s.step},
              {"loss", s.loss}, {"samples_per_s", opt(s.samples_per_second)}, {"workers", s.workers},
              {"cost_usd", s.cost}};
    if (s.partial) j["partial"] = true;
    steps.push_back(std::move(j));
  }
  Json evals = Json::array();
  for (const auto& e : run.evals) {
    evals.push_back({{"t", e.t},
                     {"epoch", e.epoch},
                     {"test_loss", e.test_loss},
                     {"test_accuracy", e.test_accuracy},
                     {"cost_usd", opt(e.cost)}});
  }
  Json events = Json::array();
  for (const auto& e : run.events) {
    events.push_back({{"t", e.t}, {"event", e.kind}, {"label", e.label}, {"detail", e.detail}, {"fields", e.fields}});
  }
  Json stages = Json::array();
  for (const auto& s : run.stages) {
    stages.push_back({{"stage", s.stage},
                      {"first_layer", opt(s.first_layer)},
                      {"last_layer", opt(s.last_layer)},
                      {"layers", s.layers},
                      {"predicted_compute_seconds", opt(s.predicted_compute)},
                      {"measured_compute_seconds", opt(s.measured_compute)},
                      {"predicted_allreduce_seconds", opt(s.predicted_allreduce)},
                      {"measured_allreduce_seconds", opt(s.measured_allreduce)},
                      {"predicted_update_seconds", opt(s.predicted_update)},
                      {"measured_update_seconds", opt(s.measured_update)},
                      {"workers_traced", s.workers_traced},
                      {"steps_traced", s.steps_traced}});
  }
  return {{"dir", run.dir},
          {"label", run.label},
          {"job_name", run.job_name},
          {"model", run.model},
          {"status", run.status()},
          {"outcome", outcome},
          {"plan", run.plan ? plan::planToJson(*run.plan) : Json(nullptr)},
          {"steps", steps},
          {"evals", evals},
          {"events", events},
          {"stages", stages},
          {"notes", run.notes}};
}

}  // namespace hydrozoa::report
