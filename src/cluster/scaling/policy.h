// Scaling policies (Hydrozoa §3.5, §5.4; docs/scaling.md): at epoch boundaries (and
// optionally every N steps) a policy says how many data-parallel replicas
// the job should run from now on, and by what factor the learning rate is
// scaled. The per-replica batch stays the same, so the global batch grows
// and shrinks with the replicas (the paper's AdaBatch adaptation: "the
// equivalent batch size scaling is achieved by increasing the number of
// workers and not the per-worker minibatch size").
//
// Built in: fixed (the plan's replicas throughout); schedule (epoch ->
// replicas); adabatch (start at min_replicas, double every k epochs up to
// max_replicas, learning rate x lr_decay at each doubling); rule (a muparser
// expression of the job's state, e.g. "test_accuracy < 0.85 ? replicas * 2 :
// replicas").
//
// Thread-safety: a policy is immutable after make(); decide() is const.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/status.h"

namespace hydrozoa::cluster {

struct ScalingSpec {
  std::string policy = "fixed";           // fixed | schedule | adabatch | rule
  int min_replicas = 1;
  int max_replicas = 0;                   // 0: the plan's replicas
  std::int64_t every_epochs = 1;          // adabatch: epochs between doublings
  double lr_decay = 0.75;                 // adabatch: learning rate x this at each doubling
  std::map<std::int64_t, int> schedule;   // schedule: from epoch (1-based) on, this many replicas
  std::string rule;                       // rule: replicas as an expression
  std::int64_t every_steps = 0;           // also decide every this many steps (0: epoch ends only)
  bool replan = false;                    // re-plan the pipeline for the new replicas at each change
};

// What a policy sees at a boundary.
struct ScalingInputs {
  std::int64_t epoch = 0;       // the epoch about to start, 1-based
  std::int64_t step = 0;        // global steps completed
  int replicas = 1;             // running now
  double test_accuracy = -1;    // of the last evaluation; -1: none
  double loss = 0;              // of the last step
  double epoch_seconds = 0;     // the last epoch's training time
  double samples_per_s = 0;
  double cost_usd = 0;          // so far
};

struct ScalingDecision {
  int replicas = 1;
  double lr_factor = 1;  // times the job's learning rate (cumulative)
  std::string why;       // "adabatch: epoch 3 doubles to 4 replicas"
  bool replan = false;   // plan the pipeline again for `replicas` (stages, split, microbatches)
};

class ScalingPolicy {
 public:
  virtual ~ScalingPolicy() = default;
  // `planReplicas`: the plan's data-parallel degree (fixed's, and the
  // default maximum). Errors name the field and the fix.
  static Result<std::unique_ptr<ScalingPolicy>> make(const ScalingSpec& spec, int planReplicas);

  virtual const char* name() const = 0;
  // The replicas of the first epoch.
  virtual int initialReplicas() const = 0;
  // Replicas and learning-rate factor from the boundary `in` describes on.
  virtual ScalingDecision decide(const ScalingInputs& in) const = 0;
  // Whether decide() depends on more than the epoch (the coordinator must
  // then ask at every boundary instead of computing the changes ahead).
  virtual bool usesMetrics() const { return false; }

 protected:
  // The decision for `replicas` at `in`: a re-plan is asked for when the
  // spec says so and the replicas change.
  ScalingDecision decision(const ScalingInputs& in, int replicas, double lrFactor, std::string why) const {
    return {replicas, lrFactor, std::move(why), replan_ && replicas != in.replicas};
  }

 private:
  bool replan_ = false;
};

// Checks a spec on its own (no plan yet): ranges, names, the rule's syntax.
Status validateScalingSpec(const ScalingSpec& spec, const std::string& origin);

}  // namespace hydrozoa::cluster
