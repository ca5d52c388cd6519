// The run directory (docs/train.md, "The run directory"): everything a training run leaves behind.
//
//   job.yaml         the resolved job spec        profile.json, plan.json
//   metrics.jsonl    one line per step and per evaluation
//   trace.json       Chrome/Perfetto timeline of every worker (at the end)
//   summary.json     the outcome (at the end, also when the run failed)
//   coordinator.json the running coordinator's pid and control endpoint
//   workers/         worker-N.log, worker-N.trace.jsonl
//   checkpoints/     step-00000469/ (one file per layer + manifest.json), latest
//
// The directory and its files are readable by the user only (0700/0600).
// Checkpoints are assembled atomically: workers write a step's layer files
// into step-N.partial/, and only when every stage has reported does
// finalizeCheckpoint() add the manifest and rename it to step-N/; "latest"
// names the newest complete one. A run that dies mid-checkpoint leaves a
// .partial directory that resuming ignores and removes.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"

namespace hydrozoa::cluster {

struct CheckpointInfo {
  std::int64_t step = 0;  // global steps completed
  std::string dir;
  Json manifest;
};

class RunDir {
 public:
  // A new run: creates `path` (and parents), private to the user. Fails when
  // `path` already holds a run, naming --resume as the way to continue it. An
  // existing `path` keeps its mode; one that is not a real directory of this
  // user that no one else can write is refused (`--out /tmp`: use /tmp/run).
  static Result<RunDir> create(const std::string& path);
  // An existing run, to resume.
  static Result<RunDir> open(const std::string& path);

  // Removes what create() and the run made since: the directory itself when
  // create() made it, else only the entries that were not there before. For
  // a run that fails before training starts, so that --out can be used again.
  void discard() const;

  const std::string& root() const { return root_; }
  std::string file(const std::string& name) const { return root_ + "/" + name; }
  std::string workerLog(int worker) const;
  std::string workerTrace(int worker) const;
  // <root>/checkpoints, or the directory useCheckpointsDir() named.
  std::string checkpointsDir() const { return checkpoints_.empty() ? root_ + "/checkpoints" : checkpoints_; }
  // Checkpoints in `dir` (output.checkpoint_dir, a shared filesystem),
  // created (private) when missing; an existing one under create()'s rules.
  Status useCheckpointsDir(const std::string& dir);
  std::string partialCheckpoint(std::int64_t step) const;

  Status writeJson(const std::string& name, const Json& value) const;
  Status writeText(const std::string& name, const std::string& text) const;

  // metrics.jsonl
  Status appendMetrics(const Json& line) const;
  Result<std::vector<Json>> readMetrics() const;
  // Drops the lines of steps after `step` and of evaluations after the
  // `epochs` completed by then: they belong to an attempt that is redone
  // from a checkpoint at `step`. Other lines (events) stay.
  Status keepMetricsThrough(std::int64_t step, std::int64_t epochs) const;

  // Adds the manifest to step-N.partial/, renames it to step-N/, points
  // "latest" at it and keeps only the newest `keep` checkpoints.
  Status finalizeCheckpoint(std::int64_t step, const Json& manifest, int keep = 2) const;
  Result<std::optional<CheckpointInfo>> latestCheckpoint() const;
  // Removes unfinished step-N.partial/ directories.
  void removePartialCheckpoints() const;

  // Merges the workers' trace files into trace.json: timestamps relative to
  // `originUs`, one process per worker named by `names[worker]`.
  Status mergeTraces(const std::vector<std::string>& names, std::int64_t originUs) const;

 private:
  explicit RunDir(std::string root) : root_(std::move(root)) {}
  std::string root_;
  std::string checkpoints_;          // "" : <root>/checkpoints
  bool made_ = false;                // create() made the directory
  std::set<std::string> existing_;   // entries it held before create()
};

}  // namespace hydrozoa::cluster
