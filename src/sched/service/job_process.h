// One job of the scheduler service as it runs: a `hydrozoa train` process
// (whose coordinator drives the job through its handle,
// cluster/job_handle.h), in a session of its own so that it outlives a
// scheduler that is killed, and read through the events it appends to its
// --events file (NOTE [A job's events]). The scheduler preempts it with
// SIGUSR2 (a checkpoint at the next step all workers agree on, then the
// end: status "preempted") and cancels it with SIGINT.
//
// A restarted scheduler re-attaches to a job process that is still
// running: attach() with the pid and the events file's offset it saved.
//
// Thread-safety: none; one owner.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"

namespace hydrozoa::sched {

class JobProcess {
 public:
  JobProcess() = default;
  // Starts `argv` in `cwd`, output to `log`; events are read from `events`
  // from its current end.
  static Result<JobProcess> spawn(const std::vector<std::string>& argv, const std::string& cwd,
                                  const std::string& log, const std::string& events);
  // A process started by an earlier scheduler: when `pid` still runs a
  // command line that holds `marker`, the job, read from `offset` on;
  // else a handle whose running() is false.
  static JobProcess attach(pid_t pid, const std::string& marker, const std::string& events, std::int64_t offset);

  pid_t pid() const { return pid_; }
  // Whether the process still runs (a child that ended is reaped).
  bool running();
  void signal(int sig) const;
  // The events appended since the last call (whole lines only).
  std::vector<Json> newEvents();
  std::int64_t offset() const { return offset_; }

 private:
  pid_t pid_ = -1;
  bool child_ = false;
  std::string events_;
  std::int64_t offset_ = 0;
};

// Whether `pid` is a live process (not a zombie) whose command line holds
// `marker`.
bool processRuns(pid_t pid, const std::string& marker);

}  // namespace hydrozoa::sched
