// The market a simulated cluster buys its workers from (Gavel ch. 6;
// docs/simulate.md "Spot workers"): each worker type's price per hour, from
// a pricing catalog (on-demand, and spot for the types named TYPE:spot) or
// given, and a spot trace that replays how a spot type's price and the
// number of its workers to be had change with time — a worker reclaimed in
// the middle of a round stops the job on it there.
//
// Spot trace (one event per line, whitespace-separated, '#' comments, times
// not decreasing):
//   SECONDS  TYPE  price      USD_PER_HOUR
//   SECONDS  TYPE  available  WORKERS        (0 to the type's count in --cluster)
// SECONDS is on the job trace's clock (its arrival times).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "plan/resources.h"
#include "sched/problem.h"

namespace hydrozoa::sim {

struct SpotEvent {
  enum Kind { kPrice, kAvailable };
  Seconds time = 0;
  int type = 0;  // index into the cluster's types
  Kind kind = kPrice;
  double value = 0;  // USD per hour, or workers
};

Result<std::vector<SpotEvent>> parseSpotTrace(const std::string& text, const std::vector<sched::WorkerType>& types,
                                              const std::string& what);
Result<std::vector<SpotEvent>> loadSpotTrace(const std::string& path, const std::vector<sched::WorkerType>& types);
std::string formatSpotTrace(const std::vector<SpotEvent>& events, const std::vector<sched::WorkerType>& types);

// Spot workers that come and go: each worker of every TYPE:spot type stays
// up for an exponentially distributed time (mean `uptime`), is reclaimed,
// and another is to be had after an exponentially distributed wait (mean
// `downtime`), until `horizon`; one "available" event per change.
struct SpotTraceOptions {
  Seconds uptime = 4 * 3600, downtime = 1800, horizon = 0;
  std::uint64_t seed = 0;
};
Result<std::vector<SpotEvent>> generateSpotTrace(const std::vector<sched::WorkerType>& types,
                                                 const SpotTraceOptions& options);

// Each type's USD per worker-hour from a VM catalog: the cheapest instance
// with that accelerator, per accelerator; its spot price for TYPE:spot (an
// error naming the type when the catalog sells none).
Result<std::vector<double>> catalogPrices(const plan::Catalog& catalog, const std::vector<sched::WorkerType>& types);

// --prices: "v100=3.06,k80:spot=0.14" (sched::parsePrices), or a VM
// catalog's name or path (catalogPrices); errors name `what`.
Result<std::vector<double>> clusterPrices(const std::string& text, const std::vector<sched::WorkerType>& types,
                                          const std::string& what);

// Prices as step functions of time, for the bill: each type's price from
// `initial` until the trace's price events change it.
class PriceTrack {
 public:
  PriceTrack(const std::vector<double>& initial, const std::vector<SpotEvent>& events);
  // USD for one worker of type `type` from t0 to t1.
  double dollars(int type, Seconds t0, Seconds t1) const;

 private:
  std::vector<std::vector<std::pair<Seconds, double>>> steps_;  // per type: (from, USD/h), times increasing
};

}  // namespace hydrozoa::sim
