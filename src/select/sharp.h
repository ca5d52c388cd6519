// SHARP, shard alternator parallelism (Hydra, seed 004 §5; docs/select.md):
// each model is a sequence of shard units — one minibatch's forward through
// its shards, then its backward back through them, minibatch after
// minibatch — one unit of a model at a time, units of different models at
// once on different workers. Whenever a worker frees up, a scheduler gives
// it the next unit of some model that has none running: Sharded-LRTF (the
// model with the longest remaining time), random, or round-robin.
//
// Here the decision (ShardScheduler, which the executor also uses) and a
// simulation of it on K workers with each unit's load (spilling its shard
// in and out) and compute times, with or without double buffering; the
// exact optimum of Hydra's MILP (a job shop) for small instances; and the
// baseline of training the models one after another, each with all workers
// as a model-parallel pipeline (one unit at a time).
//
// Pure C++; thread-safety: none (one scheduler per executor thread).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"

namespace hydrozoa::select {

struct ShardUnit {
  Seconds load = 0;     // moving its shard (parameters, optimizer state) into a worker's budget and back out
  Seconds compute = 0;  // its forward or backward
};

struct ModelWork {
  std::string name;
  std::vector<ShardUnit> units;  // one minibatch's, in order (forward through its shards, backward back)
  std::int64_t minibatches = 1;  // in all: epochs × per epoch, each the same units
  std::vector<ShardUnit> tail;   // run once after the last minibatch's (its evaluation)

  std::int64_t totalUnits() const;
  const ShardUnit& unit(std::int64_t k) const;  // its k-th unit, 0 <= k < totalUnits()
};

// kSequential: one unit at a time over all workers, the models one after
// another (the baseline: each model a model-parallel pipeline on them all).
enum class Order { kLrtf, kRandom, kRoundRobin, kSequential };
Result<Order> parseOrder(const std::string& name);  // "lrtf", "random", "round_robin", "sequential"
const char* orderName(Order order);

// The live decision. Units are numbered per model 0.. across minibatches.
class ShardScheduler {
 public:
  ShardScheduler(std::vector<ModelWork> models, Order order, std::uint64_t seed = 0);
  // The model whose next unit an idle worker runs: one with units left and
  // none running, per the order; -1: none.
  int pick();
  void started(int model);   // its next unit is running (or being loaded)
  void finished(int model);  // … and is done
  void abandoned(int model);  // … was lost (its worker died): it is the model's next again
  void dropped(int model);    // none of its units left runs (it failed)
  // Restarts a model at its unit `next` (units before it done): a resumed run.
  void resumeAt(int model, std::int64_t next);
  bool done() const { return left_ == 0; }
  std::int64_t nextUnit(int model) const { return next_[static_cast<size_t>(model)]; }
  // Seconds of its units not yet finished (load + compute).
  Seconds remaining(int model) const;
  const std::vector<ModelWork>& models() const { return models_; }

 private:
  std::vector<ModelWork> models_;
  Order order_;
  std::mt19937_64 rng_;
  std::vector<std::int64_t> next_;   // each model's next unit to start
  std::vector<bool> running_;
  std::vector<Seconds> perMinibatch_;
  std::int64_t left_ = 0;            // units not yet finished
  int last_ = -1;                    // round-robin: the model picked last
};

struct UnitRun {
  int worker = 0, model = 0;
  std::int64_t unit = 0;
  Seconds start = 0, end = 0;  // of its compute
};

struct SharpResult {
  Seconds makespan = 0;
  double utilisation = 0;          // compute-busy worker-seconds / (workers · makespan)
  std::vector<UnitRun> timeline;   // when asked for (up to 100,000 units)
};

struct SharpOptions {
  int workers = 1;
  Order order = Order::kLrtf;
  bool double_buffer = true;  // load a worker's next unit while it computes this one
  std::uint64_t seed = 0;
  bool timeline = false;
};

// The schedule in virtual time. Without double buffering a unit holds its
// worker for load + compute; with it, a worker picks its next unit when it
// starts one and loads it meanwhile, so the next starts at the later of the
// two ends.
Result<SharpResult> simulateSharp(const std::vector<ModelWork>& models, const SharpOptions& options);

// Σ of every unit's load + compute: the models one after another, each a
// model-parallel pipeline over the workers that runs one unit at a time.
Seconds oneAfterAnother(const std::vector<ModelWork>& models);

// The least makespan by Hydra's MILP (units start after their model's last
// unit ends; at most one unit per worker at a time; load + compute each),
// solved by CBC within `limit`: small instances only (at most 40 units).
Result<SharpResult> optimalSharp(const std::vector<ModelWork>& models, int workers, Seconds limit = 60);

}  // namespace hydrozoa::select
