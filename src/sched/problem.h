// What a multi-job policy decides on (Gavel, seed 003 §5.3): worker types
// and how many of each, the active jobs and each one's throughput on each
// type, and the allocation it returns — X[job][type], the fraction of time
// the job spends on that type until the next decision (docs/cluster.md).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace hydrozoa::sched {

// A type named BASE:spot is BASE's workers bought on the spot market (Gavel
// ch. 6): BASE's throughputs, a price and an availability of its own (in the
// simulator, replayed from a spot trace: sim/market.h).
struct WorkerType {
  std::string name;
  int count = 0;  // workers now (0: none to be had at the moment)
};

// "v100:spot" -> "v100"; "v100" -> "v100".
std::string baseType(const std::string& name);
bool isSpot(const std::string& name);

struct JobDemand {
  std::string type;                 // a job type of the throughputs
  int scale_factor = 1;             // workers it needs at once
  double weight = 1;                // its priority weight (weighted policies)
  double steps_remaining = 0;       // makespan, finish-time fairness
  double elapsed = 0;               // finish-time fairness: seconds since it arrived
  double isolated_elapsed = 0;      //   … and what they would have been on 1/n of the cluster
  double slo_left = -1;             // seconds until its deadline (SLO); < 0: none
  int entity = -1;                  // hierarchical: its entity in Problem::entities; -1: none
  std::vector<double> throughput;   // steps/s per worker type; 0: it cannot run there
};

// Two jobs of one scale factor sharing the same workers at once (space
// sharing, Gavel §5.3.1), each at its own rate when they do.
struct JobPair {
  int a = 0, b = 0;                   // indices into Problem::jobs, a < b
  std::vector<double> throughput_a;   // steps/s of a on each type while sharing with b; 0: they cannot share there
  std::vector<double> throughput_b;   // … and of b
};

struct Problem {
  std::vector<WorkerType> types;
  std::vector<JobDemand> jobs;      // in arrival order (FIFO)
  std::vector<JobPair> pairs;       // space sharing: the pairs a policy may place together; empty: none
  std::vector<double> price;        // USD per hour of one worker of each type; empty: none given
  double budget = -1;               // USD for the jobs' remaining steps (min_makespan_budget); < 0: none
  // hierarchical: the entities sharing the cluster by weight, each sharing
  // its part among its jobs by fairness (by their weights) or FIFO.
  struct Entity {
    std::string name;
    double weight = 1;
    bool fifo = false;
  };
  std::vector<Entity> entities;
};

// "v100=3.06,k80=0.9": USD per worker-hour for each of `types`, every one.
Result<std::vector<double>> parsePrices(const std::string& text, const std::vector<WorkerType>& types,
                                        const std::string& what);

struct Allocation {
  std::vector<std::vector<double>> x;  // [job][type]
  double objective = 0;                // the policy's (see each policy's comment)
  // The workers of each type it leaves idle are meant to be idle (a budget):
  // the mechanism then uses, over rounds, no more of a type than X does.
  bool capped = false;
  std::vector<std::vector<double>> pairs{};  // [pair][type]: the time Problem::pairs[c] shares a type; empty: none
};

// "v100=4,p100=4,k80=4" (counts 1 to 100,000; names as in the throughputs,
// each may end in ":spot").
Result<std::vector<WorkerType>> parseCluster(const std::string& text, const std::string& what);

// "product=2:fairness:0-10,research=1:fifo:10-20": entities, each with its
// weight, its policy inside (fairness or fifo) and the jobs it holds (trace
// indices FIRST-LAST, LAST not included). Returns each of `jobs`' entity
// (-1: none) and fills `entities`.
Result<std::vector<int>> parseEntities(const std::string& text, size_t jobs, std::vector<Problem::Entity>* entities,
                                       const std::string& what);

// Σ_type throughput·X: steps per second averaged over the allocation's time.
double effectiveThroughput(const JobDemand& job, const std::vector<double>& x);
// Σ_type throughput·X of job m, its time in pairs included.
double effectiveThroughput(const Problem& problem, const Allocation& allocation, int m);
// Steps/s on its fastest type (0 with no throughputs).
double fastestThroughput(const JobDemand& job);

// Every job has a throughput per type and some type with the workers it
// needs can run it; counts not negative.
Status checkProblem(const Problem& problem);

}  // namespace hydrozoa::sched
