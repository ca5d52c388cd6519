// RunReport: what a training run's directory says about it, as plain values,
// for `hydrozoa report` (HTML, html.h), `hydrozoa show RUN_DIR` (text,
// text.h) and their --json forms.
//
// loadRunReport() reads what `hydrozoa train` left in the run directory
// (docs/train.md "The run directory"):
//
//   metrics.jsonl  steps (loss, samples/s, workers, cost over training time),
//                  evaluations (test loss and accuracy) and events
//                  (worker_lost, recovered, scaled)
//   summary.json   the outcome (status, throughput, step time measured vs
//                  predicted, cost)
//   plan.json      the plan the run started with and every alternative
//   job.yaml       the job's name
//   trace.json     per stage, the measured compute and allreduce time per step
//
// A run that is still going, failed early or was killed has some of these
// missing: what is there is loaded and each missing file is named in
// `notes`, so the report is partial rather than refused. A path that is not
// a run directory at all, or a file that exists but does not parse (other
// than a last metrics line cut short), is an error naming the path and what
// was expected.
//
// Pure: no libtorch; links hydrozoa_core and hydrozoa_plan (the plan loader).
// Thread-safety: values; the loader touches only the files it reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"
#include "core/units.h"
#include "plan/plan.h"

namespace hydrozoa::report {

// One `{"step": ...}` line of metrics.jsonl.
struct StepPoint {
  Seconds t = 0;  // training seconds
  std::int64_t epoch = 0, step = 0;  // both 1-based
  double loss = 0;
  std::optional<double> samples_per_second;  // absent on lines estimated after a loss ("partial")
  int workers = 0;
  Usd cost = 0;
  bool partial = false;
};

// One `{"test_accuracy": ...}` line.
struct EvalPoint {
  Seconds t = 0;  // when it was done (or the epoch's last step when the line has no "t")
  std::int64_t epoch = 0;  // 1-based
  double test_loss = 0, test_accuracy = 0;  // accuracy in [0, 1]
  std::optional<Usd> cost;
};

// A `{"event": ...}` line: "worker_lost", "recovered", "scaled" (or any
// other a later version writes, kept as it is).
struct RunEvent {
  // Training seconds: its "t"; a recovery's "lost_at" + "seconds_to_training"
  // (when training went on); else the previous line's.
  Seconds t = 0;
  std::string kind;
  std::string label;   // a few words for a chart marker: "lost worker 3", "1 → 2 replicas"
  std::string detail;  // one line for tables
  Json fields;         // the line as written
};

// A stage's time per step: the plan's prediction against the trace.
struct StageTiming {
  int stage = 0;
  std::optional<int> first_layer, last_layer;  // from the plan
  std::string layers = "-";                    // the plan's PlanStage::layersText()
  // Compute (every microbatch's forward and backward) and gradient allreduce
  // (what is left of it after the last backward) per step. Predicted:
  // microbatches × (forward + backward) and the stage's allreduce from
  // plan.json. Measured: per worker, the median over the traced steps; then
  // the mean over the stage's workers (stage_timing.h).
  std::optional<Seconds> predicted_compute, measured_compute;
  std::optional<Seconds> predicted_allreduce, measured_allreduce;
  // The optimizer's step ("optimizer step" spans; the plan's update_seconds).
  std::optional<Seconds> predicted_update, measured_update;
  int workers_traced = 0;
  int steps_traced = 0;  // steps of the stage's first traced worker
};

// A worker as summary.json lists it (the last generation's).
struct WorkerOutcome {
  int id = 0, replica = 0, stage = 0;
  std::optional<Bytes> peak_memory;  // resident, the most it reported
};

// The typed part of summary.json that reports show (all optional: an older
// or a partial summary may lack any of them).
struct RunOutcome {
  std::string status, reason;  // "completed", "interrupted", "failed"
  std::optional<std::int64_t> steps_done, steps_total, epochs_completed, generations;
  std::optional<double> samples, final_loss, final_test_accuracy, final_test_loss;
  std::optional<Seconds> wall_seconds, training_seconds;
  std::optional<double> throughput;  // samples/s over the steps' time
  std::optional<Seconds> iteration_measured, iteration_predicted;
  std::optional<double> bubble_measured, bubble_predicted;
  std::optional<Usd> cost;
  std::optional<double> samples_per_dollar;
  std::optional<std::string> scaling_policy;
  std::optional<std::string> launcher;
  std::vector<WorkerOutcome> workers;  // entries without an id, replica or stage are skipped
};

struct RunReport {
  std::string dir;     // as given
  std::string label;   // names the run in legends: the directory's last component
  std::string job_name, model;
  std::optional<RunOutcome> outcome;  // from summary.json
  std::optional<plan::Plan> plan;     // from plan.json
  std::vector<StepPoint> steps;       // in file order (t ascending)
  std::vector<EvalPoint> evals;
  std::vector<RunEvent> events;
  std::vector<StageTiming> stages;
  // What is missing or was skipped: "no summary.json: the run is still going
  // or its coordinator was killed".
  std::vector<std::string> notes;

  // "completed", "failed", ... or "unfinished" without a summary.
  std::string status() const;
};

// Reads a run directory (see the top). Errors: `dir` missing, a file (says
// what kind when it is a hydrozoa file), a directory with none of a run's
// files, or a run file that does not parse.
Result<RunReport> loadRunReport(const std::string& dir);

// Legend labels for several runs: the directories' names, made unique with
// their parent directories where two are the same.
void labelRuns(std::vector<RunReport>& runs);

// Everything in a RunReport, for --json: {"dir", "label", "job_name",
// "model", "status", "outcome", "plan", "steps", "evals", "events", "stages",
// "notes"}; absent values are null.
Json runReportToJson(const RunReport& run);

}  // namespace hydrozoa::report
