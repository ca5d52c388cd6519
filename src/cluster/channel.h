// The job's Redis channel, as the coordinator keeps it (docs/functions.md,
// "The channel"): a redis-server of the job's own beside the coordinator
// (cluster.channel: redis) or the user's (redis://host:port, its password
// in a file). The coordinator checks it before launching anything, tells
// each worker where it is in its assign message (over the authenticated
// control plane: the password goes to no one else), deletes a generation's
// keys when the generation ends and every key of the job at the end.
//
// When the coordinator is killed, its own server dies with it; keys left in
// a user's server are deleted by `hydrozoa cleanup` from a record written
// before the first worker starts (cluster/launch/records.h).
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>

#include "cluster/job_spec.h"
#include "core/files.h"
#include "core/status.h"
#include "runtime/comm/redis/redis_client.h"
#include "runtime/comm/redis/redis_server.h"

namespace hydrozoa::cluster {

class JobChannel {
 public:
  // `dir`: where an own server keeps its log; `host`: the address workers
  // reach the coordinator at, where an own server listens; `job`: names
  // this job's keys and record. A user's server on this machine's loopback
  // is out of reach of workers in network namespaces (containers,
  // functions: `host` is not a loopback address): it is relayed onto `host`
  // with socat, which workers then reach it through.
  static Result<std::unique_ptr<JobChannel>> open(const JobSpec& spec, const std::string& dir, const std::string& host,
                                                  const std::string& job);
  ~JobChannel();
  JobChannel(const JobChannel&) = delete;
  JobChannel& operator=(const JobChannel&) = delete;

  // The "channel" of a worker's assign message in `generation`, whose
  // workers restore from the checkpoint in `checkpoint` ("": none).
  Json assign(int generation, const std::string& checkpoint) const;

  // NOTE [State through the store] (cluster/coordinator.cc): a worker's
  // file `file` of step `step`, `bytes` long, copied from the store into
  // `dest`; the key stays as the restore point's until keepState() says
  // otherwise.
  Status fetchState(std::int64_t step, const std::string& file, Bytes bytes, const std::string& dest);
  // Step `step`'s checkpoint is complete in `dir`: its keys (if its files came
  // through the store) are where the next generation restores from; every
  // other step's are deleted.
  void keepState(std::int64_t step, const std::string& dir);
  // Step `step`'s checkpoint failed: its keys are deleted.
  void dropState(std::int64_t step);
  // Deletes the keys of `generation` (its workers are gone).
  void clearGeneration(int generation);
  // "redis://127.0.0.1:41234 (the job's own)"
  std::string describe() const;
  const runtime::redis::Address& address() const { return address_; }
  // The job's message keys in the store now, not the state it holds for a
  // restore (tests; -1 when it cannot say).
  std::int64_t keysLeft();

 private:
  JobChannel() = default;
  std::string prefix() const { return "hz:" + job_; }
  std::string statePrefix() const { return prefix() + ":state"; }
  void deleteState(std::int64_t step);

  std::unique_ptr<runtime::redis::LocalServer> server_;
  runtime::redis::Address address_;   // the coordinator's way to it
  runtime::redis::Address workers_;   // the workers' (a relay's, or the same)
  pid_t relay_ = -1;
  std::string password_, job_, sync_, record_;
  Seconds timeout_ = 120;
  std::optional<runtime::redis::Connection> admin_;
  std::set<std::int64_t> stateSteps_;  // steps with files in the store
  std::int64_t heldStep_ = -1;          // the restore point's, in heldDir_
  std::string heldDir_;
};

// Deletes what the channel record `record` (of a killed coordinator)
// lists: the job's keys in the user's server. For `hydrozoa cleanup`.
Result<std::vector<std::string>> removeChannelKeys(const Json& record);
// Where channel records are kept: <launcherStateDir()>/redis.
std::string channelRecordDir();

}  // namespace hydrozoa::cluster
