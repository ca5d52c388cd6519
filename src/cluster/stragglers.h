// Stragglers: FlexRR's rapid reassignment among data-parallel replicas
// (`flexrr:` in a job spec, --flexrr) and the slow workers that experiments
// inject (`cluster.stragglers`, --stragglers). docs/stragglers.md. Pure C++.
#pragma once

#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"
#include "core/units.h"

namespace hydrozoa::cluster {

// FlexRR's settings (seed 002 Table 3.1: the defaults are the thesis's).
struct FlexrrSpec {
  bool enabled = false;
  int helper_group = 4;      // helpers per replica (capped at replicas − 1)
  double report_at = 0.75;   // progress report point, a fraction of a replica's microbatches
  double threshold = 0.2;    // straggler trigger: behind a helper by this fraction of a step
  double initial = 0.025;    // first offer: this fraction of the replica's microbatches (at least one)
  double follow_up = 0.05;   // each follow-up offer (at least one)
};

// One injected straggler. A slowdown s makes the worker run s times slower:
//   quota  its container's CPU quota cut to 1/s (launcher container);
//   pause  stopped (SIGSTOP) for (1 − 1/s) of every 20 ms, then continued;
//   sleep  its compute thread sleeps (s − 1) times each microbatch's compute
//          (FlexRR's Slow Worker Pattern, §3.4.1), the process responsive;
//   auto   quota in containers, else pause.
// Random pauses instead: stopped for `pause` at random moments, `every`
// apart on average (exponential gaps, seeded by the job's seed).
// From `start` after training starts, for `duration` (0: to the end:
// persistent; else transient).
struct StragglerSpec {
  int worker = 0;
  double slowdown = 1;
  std::string mode = "auto";
  Seconds pause = 0, every = 0;
  Seconds start = 0, duration = 0;
};

// "worker=1,slowdown=3x", "worker=1,slowdown=200%,mode=pause,start=10s,for=30s",
// "worker=2,pause=200ms,every=2s"; several separated by ';'. A slowdown is a
// factor ("3x", "3") or a delay ("200%": 3x).
Result<std::vector<StragglerSpec>> parseStragglers(const std::string& text, const std::string& what);
// The same from a job spec's cluster.stragglers: a list of such strings or
// maps {worker, slowdown, mode, pause, every, start, for}.
Result<std::vector<StragglerSpec>> readStragglers(const Json& j, const std::string& where);
std::string formatStraggler(const StragglerSpec& s);
// Each one's values, and each worker < workers (`what` names the field).
Status validateStragglers(const std::vector<StragglerSpec>& s, int workers, const std::string& what);

// `flexrr: true` or a map of the settings above (enabled unless
// `enabled: false`).
Result<FlexrrSpec> readFlexrr(const Json& j, const std::string& where);
Json flexrrToJson(const FlexrrSpec& f);
Status validateFlexrr(const FlexrrSpec& f, const std::string& what);

}  // namespace hydrozoa::cluster
