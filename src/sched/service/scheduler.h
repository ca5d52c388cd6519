// The scheduler service's core (`hydrozoa cluster serve`; Gavel, seed 003
// §5.5; docs/cluster.md): the jobs users submitted, the policy's
// allocation over the pool's worker types, and the round-based mechanism
// that makes it real by starting, keeping (a lease extended), preempting and
// resuming each job's `hydrozoa train` process (job_process.h) on the
// workers of a type. Its state lives in the state directory
// (state.json, jobs/<id>/{job.yaml, run/, events.jsonl, log}) and is saved
// as it changes, so a scheduler restarted after any end — kill -9
// included — re-attaches to the job processes still running and resumes
// the others from their checkpoints.
//
// Thread-safety: none; the service (server.h) holds a mutex around it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"
#include "sched/policy.h"
#include "sched/rounds.h"
#include "sched/service/config.h"
#include "sched/service/job_process.h"

namespace hydrozoa::sched {

// How often a job whose process was killed without a word (not one that
// failed and said so) is put back to resume from its checkpoint.
inline constexpr int kCrashRestarts = 3;

struct ServiceJob {
  int id = 0;
  std::string name;
  double weight = 1;
  std::string entity;      // policy hierarchical: its entity's name
  double slo_hours = -1;   // < 0: none
  double budget = -1;      // USD; < 0: none
  // queued (never ran), starting, running, preempting, paused (preempted,
  // resumable), completed, failed, cancelled, stopped (its budget spent).
  std::string status = "queued";
  std::string reason;
  int scale = 1;                 // workers it needs at once
  double submitted = 0, finished = -1;  // seconds since the epoch
  int type = -1;                 // the worker type its process runs on; -1: none
  int target = -1;               // the type this round placed it on; -1: it waits
  bool cancel = false;           // cancelling: ends as "cancelled"
  bool over_budget = false;      // stopping: its budget is spent
  bool stop_sent = false;        // its running process was told to stop (preempted, cancelled, over budget)
  std::int64_t steps = 0, total_steps = 0;
  double accuracy = -1;          // the last evaluation's
  int rounds = 0, starts = 0, preemptions = 0, lease_extensions = 0;
  double cost = 0;               // USD: its workers at their type's price while its process ran
  double held_seconds = 0;       // its workers held
  std::vector<double> measured;  // steps/s on each type (0: not measured)
  pid_t pid = -1;                // its `hydrozoa train`, while one runs
  std::int64_t events_offset = 0;
  std::string outcome;           // its process's "finished" status, until the process is gone
  // The measurement under way: the first step event of this start.
  double first_t = -1;
  std::int64_t first_step = 0;
  double round_seconds = 0;      // on `type` in this round (the mechanism's record)
  // What its starts cost: from the start of the round it was placed in to
  // its first step there, summed over its starts (the simulator's
  // --preemption-cost, measured; bench/cluster_vs_sim_bench.sh).
  double start_seconds = 0;
  int starts_measured = 0;
  int crashes = 0;               // its process ended without a word and it was resumed (at most kCrashRestarts)
  int workers_lost = 0;          // workers its runs lost and recovered (its own recovery; the round re-decided)
  double placed_at = -1;         // the start of the round of its current start; -1: measured
  int round_type = -1;

  bool holdsWorkers() const { return status == "starting" || status == "running" || status == "preempting"; }
  bool ended() const {
    return status == "completed" || status == "failed" || status == "cancelled" || status == "stopped";
  }
};

// Seconds since the epoch (the clock of the scheduler's times).
double wallSeconds();

// A job's steps/s on `type` (NOTE [Throughput estimates], scheduler.cc):
// measured there, else scaled from its fastest measured type by the types'
// speed hints, else the hint itself. `measured`: per type, 0 where not.
double estimateThroughput(const std::vector<double>& measured, const std::vector<PoolType>& types, size_t type);

// A job as state.json and the API hold it (scheduler_state.cc).
Json jobToJson(const ServiceJob& j);

class Scheduler {
 public:
  // Opens the state in config.state_dir (made when new, private) and
  // re-attaches to the job processes an earlier scheduler left running.
  // `binary`: the hydrozoa executable that trains the jobs.
  static Result<std::unique_ptr<Scheduler>> open(ClusterConfig config, std::string binary, double now);

  // A job: its spec (JSON of a job YAML, checked here), weight, SLO in hours
  // and budget in USD (< 0: none). Returns its id.
  // `entity`: one of the config's entities (policy hierarchical), else "".
  Result<int> submit(const Json& spec, double weight, double sloHours, double budget, double now,
                     const std::string& entity = "");
  // Stops the job (a clean stop when it runs); it ends "cancelled".
  Status cancel(int id, double now);
  // Reads the jobs' events, bills their workers, begins a round when one
  // is due (or at once when jobs come to an idle pool), starts the
  // jobs placed on free workers, and saves the state.
  void tick(double now);
  // Every running job preempted (checkpointed), waiting up to `grace`
  // seconds for them to end: a restart resumes them.
  void shutdown(double grace);

  // {"cluster", "policy", "round_seconds", "types", "jobs", "allocation",
  //  "rounds" (the timeline), "cost_usd", "error"} for `hydrozoa jobs` and the page.
  Json toJson(double now) const;
  const ClusterConfig& config() const { return config_; }
  const std::string& stateDir() const { return config_.state_dir; }

 private:
  Scheduler() = default;
  std::string jobDir(int id) const;
  ServiceJob* find(int id);
  bool active(const ServiceJob& j) const;
  void onEvent(ServiceJob& j, const Json& e);
  void onExit(ServiceJob& j, double now);
  void readEvents(ServiceJob& j, double dt, double now);
  // onEvent() for each event `p` wrote since the last call.
  void drainEvents(ServiceJob& j, JobProcess& p);
  // NOTE [Throughput estimates]
  double estimate(const ServiceJob& j, size_t type) const;
  // The config's entity of that name: its index, or -1.
  int entityIndex(const std::string& name) const;
  void beginRound(double now);
  void startPlaced(double now);
  int freeWorkers(size_t type) const;
  bool waitingJobFits() const;
  bool idle() const;  // no job holds workers
  // scheduler_state.cc
  Status save();
  Status load(double now);

  ClusterConfig config_;
  std::string binary_;
  std::unique_ptr<Policy> policy_, fallback_;
  RoundMechanism mechanism_;
  std::vector<ServiceJob> jobs_;
  std::map<int, JobProcess> processes_;
  int nextId_ = 1;
  int round_ = 0;
  double roundStart_ = 0, roundEnd_ = 0, lastTick_ = 0, lastSave_ = 0;
  bool changed_ = false;     // jobs came or went since the last round
  bool reallocate_ = true;   // the allocation must be solved again
  bool dirty_ = true;        // the state to save
  std::vector<int> allocated_;                 // the jobs (ids) of the allocation, in its order
  Allocation allocation_;                      // theirs (x: [job][type]), until solved again
  std::string error_;                          // the policy's last failure, shown until it succeeds
  Json timeline_ = Json::array();              // the recent rounds
  double cost_ = 0;                            // USD, every job's
};

}  // namespace hydrozoa::sched
