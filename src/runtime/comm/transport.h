// Transport: how a worker talks to the other workers on the data plane.
//
// Point-to-point tensors between neighbouring pipeline stages, and an
// allreduce over the replicas of the worker's own stage. Operations are
// asynchronous: each returns a c10d::Work to wait on (wait() rethrows a
// failure; abort() gives up on a pending receive). One implementation today,
// C10dTransport (ProcessGroupGloo on CPU, ProcessGroupNCCL on CUDA builds);
// storage-based channels for serverless functions come later (FuncPipe, Liu et al. 2022, §4).
//
// Thread-safety: send/recv may be called from different threads; the
// stage allreduce from one thread.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>

#include "core/status.h"

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
  virtual int stageReplicas() const = 0;

  // Blocks until every worker of the job reaches it.
  virtual void barrier() = 0;
};

struct TransportOptions {
  // The rendezvous: a c10d FileStore at store_path when set (workers on one
  // machine: no listener at all), else the TCPStore at store_host:store_port.
  std::string store_path;
  std::string store_host = "127.0.0.1";
  int store_port = 0;
  std::string prefix = "gen0";           // one rendezvous namespace per generation
  std::string listen_host = "127.0.0.1"; // this worker's address for data connections
  int rank = 0, world_size = 1;
  int stage = 0, stages = 1, replica = 0, replicas = 1;
  bool cuda = false;
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};

// Joins the store and builds the process groups. Errors are unavailable()
// statuses naming the store.
Result<std::unique_ptr<Transport>> connectTransport(const TransportOptions& options);

// True when `e` says a peer went away (connection closed or reset, a
// timeout): recoverable by re-forming the job, unlike a bug.
bool isPeerLost(const std::exception& e);

}  // namespace hydrozoa::runtime
