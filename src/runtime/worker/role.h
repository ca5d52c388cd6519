// A worker's role in its generation: what the coordinator's "assign"
// message says (built by the coordinator, cluster/coordinator.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/job_spec.h"
#include "core/files.h"
#include "core/status.h"

namespace hydrozoa::runtime {

// What the coordinator assigns (the "assign" message).
struct Role {
  int generation = 0, rank = 0, world = 1;
  int replica = 0, replicas = 1, stage = 0, stages = 1;
  // Tensor parallelism: this worker's slice of its stage's layers, of t
  // (NOTE [Ranks of a 3D grid], runtime/comm/transport.h).
  int tensor_rank = 0, tensor_parallel = 1;
  // Stage boundaries sent 1/t per slice and all-gathered ("scatter_gather";
  // NOTE [Scatter/gather of stage boundaries], runtime/exec/step_executor.cc).
  bool scatter_gather = false;
  // Stages replicated unevenly: every stage's replicas ("stage_replicas";
  // empty: `replicas` each), the step's microbatches dealt round-robin
  // (NOTE [Round-robin over a stage's replicas], runtime/schedule/schedule.h).
  std::vector<int> stage_replicas;
  int first_layer = 0, last_layer = 0;
  // The stage's model chunks, in order: [first, last] layer ranges ("layer_ranges";
  // absent: the one range above). Interleaved: chunk c is virtual stage c·stages + stage.
  std::vector<std::pair<int, int>> layer_ranges;
  bool recompute = false;  // NOTE [Recomputation], runtime/stage.h
  std::int64_t microbatch_size = 1, microbatches = 1;
  // Replicas 0..idle_replicas−1 hold the state and compute nothing (AgileML's
  // third stage, NOTE [Reliable workers that compute nothing] in
  // cluster/tier_driver.cc): the others take `microbatches` each.
  int idle_replicas = 0;
  std::int64_t train_size = 0, test_size = 0;
  std::int64_t start_step = 0;  // global step to start from
  // Joining a running group (NOTE [State for joiners], stage_setup.cc): the
  // state comes from this replica of it after the rendezvous, not from
  // `checkpoint` ("state_from"); −1: not joining.
  int state_from = -1;
  std::int64_t total_steps = 0;  // the job's (the LR schedule runs over these)
  std::int64_t stop_step = 0;    // where this run stops
  // This generation's epochs (cluster/scaling/epochs.h): epoch first_epoch
  // begins at global step epoch_start_step, each has the sampler's steps at
  // global_batch; the learning rate is the schedule's times lr_factor.
  std::int64_t epoch_start_step = 0, first_epoch = 0, global_batch = 0;
  double lr_factor = 1;
  bool hold_at_epoch_end = false;  // NOTE [Holding at an epoch's end]
  bool shared_memory = false;      // the stage's replicas share this host (NOTE [Shared-memory allreduce])
  std::string listen_host, trace_path, checkpoint, schedule = "gpipe";
  // Where checkpoints go: a directory this worker reaches (output.checkpoint_dir,
  // a shared filesystem), or "" : shipped to the coordinator (wire/file_transfer.h).
  std::string checkpoint_root;
  std::vector<int> cpus;  // cores for the compute thread; empty: any
  // The data plane through a Redis store (docs/functions.md, "The channel"):
  // its address, password, this generation's key prefix and the stage
  // allreduce's method. url "": workers connect to each other (Gloo).
  // state: where shipped checkpoints go (<state>:<step>:<file>), restore:
  // where the assigned checkpoint's files are (<restore>:<file>), ""
  // : from the coordinator (NOTE [State through the store]).
  struct Channel {
    std::string url, password, ns, sync = "pipelined", state, restore;
    double timeout = 120;  // seconds
  } channel;
  bool cpus_shared = false;  // other workers' compute threads run on them too (NOTE [Cores for compute threads])
  cluster::JobSpec job;
};

// The assign message, every field checked (ranges from core/limits.h).
Result<Role> parseRole(const Json& assign);

// NOTE [A worker's GPU]
// A worker computes on GPU localRank() % (the GPUs it sees): its rank among
// the job's workers on its machine. That is SLURM_LOCALID in a Slurm step
// (each step one task: with its own --gres=gpu:1, CUDA_VISIBLE_DEVICES shows
// it its GPU as device 0), else LOCAL_RANK where whoever started the worker
// set it (torchrun's convention, for `hydrozoa worker --join` by hand), else
// the rank: every other launcher runs a job's workers on one machine.
// `getenv` is the environment's (a test passes its own); a value that is not
// a number from 0 to 2^20 is an error naming the variable.
Result<int> localRank(const Role& role, const char* (*getenv)(const char*) = nullptr);

// NOTE [Workers sharing a GPU]
// How many of the job's workers run on this worker's machine, and so share
// its GPUs: LOCAL_WORLD_SIZE where whoever started the worker set it
// (torchrun's), 1 in a Slurm step (each has its own --gres), else the whole
// job (one machine). NCCL refuses two ranks of one communicator on one GPU:
// when a machine's workers outnumber its GPUs, the workers keep their
// tensors on their (shared) GPU and talk through Gloo, a received tensor
// landing in host memory first (runtime/comm/c10d_transport.cc).
Result<int> localWorkers(const Role& role, const char* (*getenv)(const char*) = nullptr);

// A new data-parallel group of the running workers from a step on (the
// "regroup" message; NOTE [Regrouping at a step boundary],
// cluster/regroup.cc): this worker keeps its replica index, the group
// becomes `replicas` wide (its rank the replica's: one stage, no tensor
// groups), each replica but the first `idle_replicas` taking `microbatches`
// a step, its rendezvous under
// "gen<generation>/"; with `joiners` new workers in it, replica 0 sends them
// its state once the group is formed (NOTE [State for joiners]).
struct Regroup {
  std::int64_t at_step = 0;
  int generation = 0, replicas = 1, joiners = 0, idle_replicas = 0;
  std::int64_t microbatches = 1;
};

// The regroup message, checked against what of this worker's role stays
// (the control thread reads it while the compute thread regroups): its
// replica still in the group, a role that can regroup. The generation is
// checked when it happens (Worker::regroup).
Result<Regroup> parseRegroup(const Json& message, const Role& role);

}  // namespace hydrozoa::runtime
