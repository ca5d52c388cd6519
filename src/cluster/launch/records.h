// Launcher records: what a launcher creates outside its own process
// (containers, Slurm allocations and steps) is written down first, in
// <state dir>/<kind>/..., with the coordinator's pid and start time, so that
// when a coordinator dies without cleaning up (kill -9) the next launcher of
// that kind, or `hydrozoa cleanup`, removes what it left.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"

namespace hydrozoa::cluster {

// The directory of launcher records: $HYDROZOA_STATE_DIR or /run/hydrozoa.
std::string launcherStateDir();

struct CleanupReport {
  std::vector<std::string> removed;  // "job 3fa2c1 (coordinator pid 1234, gone): bridge hzb3fa2c1, ..."
  std::vector<std::string> live;     // jobs whose coordinator still runs: left alone
  std::vector<std::string> errors;
};

// The kernel's start time of `pid` (field 22 of /proc/pid/stat), 0 if gone.
std::int64_t processStart(pid_t pid);

// {"job", "pid", "start_time"} of this process, the start of every record.
Json recordOwner(const std::string& job);
// Whether the coordinator that wrote `record` still runs (the same pid and
// start time: a reused pid is not it).
bool ownerAlive(const Json& record);

// Serializes jobs writing and cleaning records in `dir`, across processes.
class StateLock {
 public:
  explicit StateLock(const std::string& dir);
  ~StateLock();
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

 private:
  int fd_ = -1;
};

// Removes what each record in `dir` whose coordinator is gone lists, with
// `remove` (what it removed, in words, or why it could not: the record then
// stays for the next try), and then the record. `kind` names such a job in
// the report ("job", "Slurm job"). Records of live coordinators are left.
CleanupReport cleanupRecords(const std::string& dir, const std::string& kind,
                             const std::function<Result<std::vector<std::string>>(const Json&)>& remove);

// The *.json files in `dir`.
std::vector<std::string> recordFiles(const std::string& dir);
// Creates `dir` (mode 0700) when missing.
Status ensureDir(const std::string& dir);

}  // namespace hydrozoa::cluster
