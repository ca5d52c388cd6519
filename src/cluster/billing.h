// Billing: what a job's workers cost, worker by worker (Hydrozoa §3.1, §5.2).
// Pure C++.
//
// A worker is billed from the moment it is running (registered with the
// coordinator: a container still starting or a worker not yet launched costs
// nothing) until it ends, at its own hourly rate, rounded the way its
// platform bills: per second (containers), per millisecond (functions), or
// per started hour (VMs, at least one hour). The ledger answers "how much so
// far" at any time, so the progress line can show it live.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"
#include "core/units.h"

namespace hydrozoa::cluster {

enum class BillingUnit { kSecond, kMillisecond, kHour };

// "per_second", "per_millisecond", "per_hour" (a catalog's billing field).
Result<BillingUnit> parseBillingUnit(const std::string& text, const std::string& origin);
const char* billingUnitName(BillingUnit unit);

// Seconds `running` billed as: rounded up to the unit, an hour at least for
// per-hour billing.
Seconds billedSeconds(Seconds running, BillingUnit unit);

class Ledger {
 public:
  // `request_fee`: charged once per run (a function's invocation).
  explicit Ledger(BillingUnit unit = BillingUnit::kSecond, Usd request_fee = 0) : unit_(unit), fee_(request_fee) {}

  // Worker `id` starts running at time `t` (seconds on any one clock) at
  // `usd_per_hour`. A worker that is already running is left as it is.
  void start(int id, Seconds t, UsdPerHour usd_per_hour);
  // Worker `id` ended (or was released) at `t`; a worker not running is ignored.
  void stop(int id, Seconds t);
  bool running(int id) const;

  // Dollars billed up to `t`: ended runs in full, running ones up to `t`.
  Usd cost(Seconds t) const;
  Usd cost(int id, Seconds t) const;
  // Billed worker-seconds up to `t`, all workers.
  Seconds workerSeconds(Seconds t) const;

  // The system the workers ran on accounted for them (slurm/: sacct): the
  // running time of each run of worker `id`, in the order they started,
  // replaces the coordinator's clock for the ended runs, where the numbers
  // of runs agree (a worker launched but never running has no run here);
  // `source` names it in toJson(). Returns the runs corrected.
  int useAccounted(const std::map<int, std::vector<Seconds>>& seconds, const std::string& source);

  // {"unit": ..., "usd": ..., "source": ..., "workers": [{"id", "usd_per_hour", "seconds", "usd"}...]}
  Json toJson(Seconds t) const;

 private:
  struct Run {
    Seconds start = 0, stop = -1;  // stop < 0: running
    UsdPerHour rate = 0;
  };
  Seconds billed(const Run& r, Seconds t) const;

  BillingUnit unit_;
  Usd fee_ = 0;
  std::multimap<int, Run> runs_;  // a worker id may run more than once, in the order they started
  std::string source_ = "the coordinator's clock";
};

}  // namespace hydrozoa::cluster
