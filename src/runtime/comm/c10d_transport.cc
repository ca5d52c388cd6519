#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if defined(USE_C10D_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <spdlog/spdlog.h>

#include "runtime/comm/control_store.h"
#include "runtime/comm/shared_memory.h"
#include "runtime/comm/transport.h"

namespace hydrozoa::runtime {
namespace {

// A receive into host memory for a tensor on a GPU (NOTE [Workers sharing a
// GPU], runtime/worker/role.h): Gloo's receive lands in `host`; wait()
// copies it to the GPU's tensor before it returns, so the tensor is ready
// as a CPU tensor would be.
class StagedReceive final : public c10d::Work {
 public:
  StagedReceive(c10::intrusive_ptr<c10d::Work> inner, at::Tensor host, at::Tensor device)
      : c10d::Work(-1, c10d::OpType::RECV), inner_(std::move(inner)), host_(std::move(host)), device_(std::move(device)) {}
  bool wait(std::chrono::milliseconds timeout) override {
    const bool done = inner_->wait(timeout);
    if (done) device_.copy_(host_);
    return done;
  }
  bool isCompleted() override { return inner_->isCompleted(); }
  void abort() override { inner_->abort(); }

 private:
  c10::intrusive_ptr<c10d::Work> inner_;
  at::Tensor host_, device_;
};

// The data plane on c10d process groups: one group over the whole job for
// point-to-point traffic, one per stage over its replicas for allreduce
// (what torch.distributed.new_group builds: the same store under a prefix).
class C10dTransport final : public Transport {
 public:
  C10dTransport(const TransportOptions& o, c10::intrusive_ptr<c10d::Backend> world,
                c10::intrusive_ptr<c10d::Backend> stage, c10::intrusive_ptr<c10d::Backend> tensor,
                std::unique_ptr<SharedMemoryGroup> shared)
      : o_(o),
        world_(std::move(world)),
        stage_(std::move(stage)),
        tensor_(std::move(tensor)),
        shared_(std::move(shared)) {}

  int rank() const override { return o_.rank; }
  int worldSize() const override { return o_.world_size; }
  int stageReplicas() const override { return o_.replicas; }

  c10::intrusive_ptr<c10d::Work> send(torch::Tensor& tensor, int peer, int tag) override {
    // Gloo reads host memory only: a GPU's tensor goes through a host copy
    // (which the send holds until it is done).
    std::vector<at::Tensor> v = {staged(tensor) ? tensor.to(torch::kCPU) : tensor};
    return world_->send(v, peer, tag);
  }
  c10::intrusive_ptr<c10d::Work> recv(torch::Tensor& tensor, int peer, int tag) override {
    if (!staged(tensor)) {
      std::vector<at::Tensor> v = {tensor};
      return world_->recv(v, peer, tag);
    }
    at::Tensor host = torch::empty_like(tensor, torch::TensorOptions().device(torch::kCPU).pinned_memory(true));
    std::vector<at::Tensor> v = {host};
    return c10::make_intrusive<StagedReceive>(world_->recv(v, peer, tag), host, tensor);
  }
  c10::intrusive_ptr<c10d::Work> allreduceStage(torch::Tensor& tensor) override {
    if (shared_) return shared_->allreduce(tensor);
    HZ_CHECK(stage_);
    std::vector<at::Tensor> v = {tensor};
    return stage_->allreduce(v);
  }
  c10::intrusive_ptr<c10d::Work> allreduceStageParts(const std::vector<torch::Tensor>& parts) override {
    if (shared_) return shared_->allreduce(parts);
    return {};
  }
  c10::intrusive_ptr<c10d::Backend> tensorGroup() const override { return tensor_; }
  c10::intrusive_ptr<c10d::Work> broadcast(torch::Tensor& tensor, int root) override {
    std::vector<at::Tensor> v = {tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return world_->broadcast(v, options);
  }
  void barrier() override { world_->barrier()->wait(); }
  bool anyWorker(bool mine) override {
    std::vector<at::Tensor> v = {torch::full({1}, mine ? 1 : 0, torch::TensorOptions().dtype(torch::kInt))};
    if (o_.nccl) v[0] = v[0].to(torch::kCUDA);  // NCCL reduces device memory only
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::MAX;
    world_->allreduce(v, options)->wait();
    return v[0].item<int>() != 0;
  }

 private:
  bool staged(const torch::Tensor& t) const { return t.is_cuda() && !o_.nccl; }

  TransportOptions o_;
  c10::intrusive_ptr<c10d::Backend> world_, stage_, tensor_;
  std::unique_ptr<SharedMemoryGroup> shared_;
};

c10::intrusive_ptr<c10d::Backend> makeGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                            const TransportOptions& o) {
#if defined(USE_C10D_NCCL)
  if (o.nccl) {
    // NOTE [NCCL's waits]: NCCL runs each operation on a stream of its own;
    // its Work::wait() only orders the caller's stream after it, unless
    // waits block. The channels' threads wait and then hand the tensor to
    // the compute thread, so a wait must mean done (the compute thread's
    // stream is another thread's): `hydrozoa worker` sets
    // TORCH_NCCL_BLOCKING_WAIT=1 at its start (cli/cmd_worker.cc), which
    // ProcessGroupNCCL reads when it is made.
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = o.timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
  }
#endif
  auto options = c10d::ProcessGroupGloo::Options::create(o.timeout);
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(o.listen_host));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

}  // namespace

Result<std::unique_ptr<Transport>> connectTransport(const TransportOptions& o) {
#if !defined(USE_C10D_NCCL)
  if (o.nccl) return invalidArgument("this hydrozoa was built against a libtorch without NCCL; use device: cpu");
#endif
  if (o.nccl && !o.cuda) return invalidArgument("NCCL moves tensors on GPUs: this worker's are on its CPU");
  const std::string where = !o.store_endpoint.empty() ? "the coordinator's store at " + o.store_endpoint
                                                      : fmt::format("store {}:{}", o.store_host, o.store_port);
  try {
    c10::intrusive_ptr<c10d::Store> tcp;
    if (!o.store_endpoint.empty()) {
      HZ_ASSIGN_OR_RETURN(tcp, ControlStore::connect(o.store_endpoint, o.store_name, o.store_token, o.timeout));
    } else {
      c10d::TCPStoreOptions so;
      so.port = static_cast<std::uint16_t>(o.store_port);
      so.isServer = false;
      so.waitWorkers = false;
      so.timeout = o.timeout;
      tcp = c10::make_intrusive<c10d::TCPStore>(o.store_host, so);
    }
    auto store = c10::make_intrusive<c10d::PrefixStore>(o.prefix, tcp);
    auto world = makeGroup(store, o.rank, o.world_size, o);
    c10::intrusive_ptr<c10d::Backend> stage;
    std::unique_ptr<SharedMemoryGroup> shared;
    if (o.replicas > 1) {
      // NOTE [Ranks of a 3D grid]: one group per stage and slice.
      const std::string group = o.tensor_parallel > 1 ? fmt::format("/stage{}.t{}", o.stage, o.tensor_rank)
                                                      : fmt::format("/stage{}", o.stage);
      auto stageStore = c10::make_intrusive<c10d::PrefixStore>(o.prefix + group, tcp);
      if (o.shared_memory_bytes > 0 && !o.cuda) {
        SharedMemoryOptions so;
        so.rank = o.replica;
        so.size = o.replicas;
        so.capacity = o.shared_memory_bytes;
        so.timeout = o.timeout;
        so.spin = o.spin;
        std::string why;
        shared = SharedMemoryGroup::connect(*stageStore, so, &why);
        if (shared) {
          spdlog::info("the stage's allreduce goes through shared memory ({} per replica)",
                       formatBytes(shared->capacity()));
        } else {
          spdlog::info("the stage's allreduce goes through Gloo: no shared memory ({})", why);
        }
      }
      if (!shared) stage = makeGroup(stageStore, o.replica, o.replicas, o);
    }
    c10::intrusive_ptr<c10d::Backend> tensor;
    if (o.tensor_parallel > 1) {
      auto tensorStore = c10::make_intrusive<c10d::PrefixStore>(
          fmt::format("{}/tensor{}.{}", o.prefix, o.replica, o.stage), tcp);
      tensor = makeGroup(tensorStore, o.tensor_rank, o.tensor_parallel, o);
    }
    return std::unique_ptr<Transport>(
        new C10dTransport(o, std::move(world), std::move(stage), std::move(tensor), std::move(shared)));
  } catch (const std::exception& e) {
    std::string what = e.what();
    return unavailable(fmt::format("cannot join the job's data plane ({}): {}", where, what.substr(0, what.find('\n'))));
  }
}

bool isPeerLost(const std::exception& e) {
  if (dynamic_cast<const PeerLostError*>(&e)) return true;
  const std::string what = e.what();
  for (const char* sign : {"Connection reset", "Connection closed", "Connection refused", "Broken pipe", "Timed out",
                           "timed out", "Timeout", "closed by peer", "EOF", "Socket Timeout", "aborted"}) {
    if (what.find(sign) != std::string::npos) return true;
  }
  return false;
}

}  // namespace hydrozoa::runtime
