// The scheduler service (`hydrozoa cluster serve`; docs/cluster.md): the
// Scheduler (scheduler.h) ticked a few times a second, and its HTTP API and
// read-only status page on 127.0.0.1 (cpp-httplib), every request
// authenticated with the token in <state>/token (0600, made at the first
// start and kept). <state>/service.json says where it listens; a lock on
// <state>/serve.lock keeps a second scheduler off the same state.
//
//   GET  /                      the status page (?token=TOKEN)
//   GET  /api/state             jobs, allocation, rounds, cost (JSON)
//   POST /api/jobs              {"spec": {job spec}, "weight", "slo_hours", "budget"} -> {"id"}
//   POST /api/jobs/ID/cancel
//
// The client side (`submit`, `jobs`, `cancel`): ServiceClient.
#pragma once

#include <atomic>
#include <string>

#include "core/files.h"
#include "core/status.h"
#include "sched/service/config.h"

namespace hydrozoa::sched {

// Serves until *stop is set (SIGINT, SIGTERM), then preempts the running
// jobs (checkpointed, resumed at the next start) and returns.
Status serve(ClusterConfig config, const std::string& binary, const std::atomic<int>* stop);

// The status page for a state (Scheduler::toJson).
std::string statusPage(const Json& state);

class ServiceClient {
 public:
  // The service whose state is in `stateDir` (its service.json and token).
  static Result<ServiceClient> connect(const std::string& stateDir);
  // A request; the answer's JSON, or its "error" as the Status.
  Result<Json> get(const std::string& path) const;
  Result<Json> post(const std::string& path, const Json& body) const;
  const std::string& url() const { return url_; }
  const std::string& token() const { return token_; }

 private:
  std::string stateDir_, url_, token_;
  int pid_ = -1;
};

}  // namespace hydrozoa::sched
