// Transport: how a worker talks to the other workers on the data plane.
//
// Point-to-point tensors between neighbouring pipeline stages, and an
// allreduce over the replicas of the worker's own stage. Operations are
// asynchronous: each returns a c10d::Work to wait on (wait() rethrows a
// failure; abort() gives up on a pending receive; once wait() returns, a
// received tensor is ready for the compute thread, on a GPU too). Two
// implementations: C10dTransport (ProcessGroupGloo on CPU, ProcessGroupNCCL
// where each worker has a GPU of its own, Gloo through host memory where
// workers share one, NOTE [Workers sharing a GPU] in runtime/worker/role.h;
// the stage allreduce through shared memory when the stage's replicas share
// a host, runtime/comm/shared_memory.h);
// storage-based channels for serverless functions come later (FuncPipe, Liu et al. 2022, §4).
//
// Thread-safety: send/recv may be called from different threads; the
// stage allreduce from one thread.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "runtime/comm/peer_lost.h"

namespace hydrozoa::runtime {

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;       // in the whole job: replica * stages + stage
  virtual int worldSize() const = 0;

  // Starts sending / receiving the whole of `tensor` to / from world rank
  // `peer`; messages with the same (peer, tag) arrive in order.
  virtual c10::intrusive_ptr<c10d::Work> send(torch::Tensor& tensor, int peer, int tag) = 0;
  virtual c10::intrusive_ptr<c10d::Work> recv(torch::Tensor& tensor, int peer, int tag) = 0;

  // Starts summing `tensor` in place over the replicas of this stage.
  // REQUIRES: stageReplicas() > 1.
  virtual c10::intrusive_ptr<c10d::Work> allreduceStage(torch::Tensor& tensor) = 0;
  // The same for `parts` taken as one tensor end to end (a bucket's
  // gradients, contiguous, one element type), each summed in place, when
  // this transport can do that without concatenating them first (the
  // shared-memory allreduce); nullptr when it cannot: then concatenate and
  // call allreduceStage.
  virtual c10::intrusive_ptr<c10d::Work> allreduceStageParts(const std::vector<torch::Tensor>& /*parts*/) {
    return {};
  }
  virtual int stageReplicas() const = 0;

  // The process group over this worker's tensor-parallel group (the t
  // workers holding slices of the same layers, model/tensor_parallel.h);
  // null without tensor parallelism.
  virtual c10::intrusive_ptr<c10d::Backend> tensorGroup() const { return {}; }

  // Starts sending `tensor` of world rank `root` into every other worker's
  // `tensor` (of its size and type); nullptr where this transport cannot
  // (the channel through a store).
  virtual c10::intrusive_ptr<c10d::Work> broadcast(torch::Tensor& /*tensor*/, int /*root*/) { return {}; }

  // Blocks until every worker of the job reaches it.
  virtual void barrier() = 0;
  // The same, and true when `mine` is true on any worker (every worker
  // learns the same answer: NOTE [Loss scaling], runtime/loss_scale.h).
  virtual bool anyWorker(bool mine) = 0;
};

struct TransportOptions {
  // The rendezvous: the coordinator's store over its control plane when
  // store_endpoint is set (runtime/comm/control_store.h: nothing shared but
  // the network, no listener of its own), else the TCPStore at
  // store_host:store_port (tests that run every rank in one process).
  std::string store_endpoint, store_name, store_token;
  std::string store_host = "127.0.0.1";
  int store_port = 0;
  std::string prefix = "gen0";           // one rendezvous namespace per generation
  std::string listen_host = "127.0.0.1"; // this worker's address for data connections
  int rank = 0, world_size = 1;
  int stage = 0, stages = 1, replica = 0, replicas = 1;
  // NOTE [Ranks of a 3D grid]: with t-way tensor parallelism, worker
  // (replica, stage, tensor rank) has rank (replica·stages + stage)·t +
  // tensor rank; the stage's allreduce is over the replicas holding the same
  // slice, and the tensor group over the t workers of (replica, stage).
  int tensor_rank = 0, tensor_parallel = 1;
  bool cuda = false;  // the tensors live on this worker's GPU
  // Through NCCL (REQUIRES cuda): every worker of the job has a GPU of its
  // own. Otherwise Gloo, a GPU's tensors staged through host memory.
  bool nccl = false;
  // The stage's replicas run on one host (a local launcher's processes):
  // their allreduce goes through a shared-memory segment of this many bytes
  // per replica (the stage's gradients) when they can all open it, and
  // through Gloo otherwise (NOTE [Shared-memory allreduce]). 0: Gloo.
  Bytes shared_memory_bytes = 0;
  // How a replica waits for the others there: spinning on its own core
  // (every worker has one), or sleeping (workers share cores).
  bool spin = true;
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};

// Joins the store and builds the process groups. Errors are unavailable()
// statuses naming the store.
Result<std::unique_ptr<Transport>> connectTransport(const TransportOptions& options);

// True when `e` says a peer went away: a PeerLostError, or one of c10d's
// and Gloo's errors for a connection closed or reset or a timeout (which
// they throw untyped, so these are told apart by their text).
bool isPeerLost(const std::exception& e);

}  // namespace hydrozoa::runtime
