// The worker process (`hydrozoa worker`): one (replica, stage) of a job
// (Hydrozoa §4.1; docs/train.md, "What happens").
//
// It registers with the coordinator over the control plane, receives its
// role and the job, builds only its stage's layers, joins the data plane
// (c10d store and process groups), learns its neighbours' tensor shapes,
// and trains: each step runs the schedule's forward and backward passes over
// its replica's microbatches (inputs from the prefetching loader on stage 0,
// labels on the last stage, activations and gradients from its neighbours
// through the inbound/outbound threads), allreduces the stage's gradients
// with the other replicas, and steps the optimizer. At epoch ends it
// evaluates through the same pipeline and checkpoints. It reports every step
// and a heartbeat, and stops when told to.
//
// Exit codes: 0 finished or stopped on request, 1 failed, 3 lost a peer
// (recoverable by re-forming the job).
#pragma once

#include <string>

namespace hydrozoa::runtime {

struct WorkerArgs {
  std::string join;   // the coordinator's control endpoint, tcp://host:port
  std::string token;  // the control credential, "TOKEN.KEY" (from $HYDROZOA_TOKEN)
  int id = 0;
  // A worker whose coordinator is gone — no connection to it for this long
  // ($HYDROZOA_COORDINATOR_TIMEOUT) — stops, and exits (issue 53: Slurm's
  // workers otherwise waited forever; a launcher's own ends did the rest).
  double coordinator_timeout = 30;
};

int runWorker(const WorkerArgs& args);

}  // namespace hydrozoa::runtime
