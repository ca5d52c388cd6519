// SharedMemoryGroup: allreduce among processes on one host through one
// shared-memory segment, in place of sockets (NOTE [Shared-memory allreduce],
// shared_memory.cc).
//
// The replicas of a stage that a local launcher starts on one machine sum
// their gradients through it: each copies its tensor into a slot of its own,
// sums a 1/N share of every slot, and copies the others' sums back. Nothing
// goes through the kernel, no helper thread runs, and a rank waiting for a
// peer spins on its own core instead of sleeping until woken.
//
//   std::string why;
//   auto group = SharedMemoryGroup::connect(store, options, &why);
//   if (!group) { /* not one host (why says so): use sockets */ }
//   auto work = group->allreduce(tensor);   // copies tensor in; returns at once
//   ...                                     // compute on
//   work->wait();                           // tensor holds the sum
//
// Contract: every rank issues the same allreduces (same sizes and element
// types) in the same order, as with any collective. A peer that exits or is
// killed while others wait for it makes their wait() throw PeerLostError
// within about 10 ms; a peer that is alive but does not come within
// `timeout` makes it throw one too (as Gloo's timeout does).
//
// Thread-safety: one thread issues allreduces and waits on them; the
// segment's counters are atomics shared with the peers' processes.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/units.h"
#include "runtime/comm/shm_segments.h"

namespace hydrozoa::runtime {

struct SharedMemoryOptions {
  int rank = 0, size = 1;
  // Bytes of this rank's slot: the most that allreduces in flight at once
  // may hold (a stage's gradients); a larger one goes through in pieces,
  // one after another. Rounded up to whole pages; at least 1 MB.
  Bytes capacity = 0;
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  // How a rank waits for its peers: spinning (and yielding the core to
  // anything else that wants it) when every worker has a core of its own,
  // which costs no wake-up; sleeping after a short spin when workers share
  // cores, so that a waiting rank does not take the core its peer needs.
  bool spin = true;
};

class SharedMemoryGroup {
 public:
  // Meets the group's other ranks through `store`: rank 0 makes the segment
  // and names it there, the others open it. Returns nullptr, with the reason
  // in *why, when some rank cannot open it (another host, another /dev/shm):
  // the caller then uses sockets; every rank comes to the same answer.
  // Throws what the store throws (a timeout, a lost store).
  static std::unique_ptr<SharedMemoryGroup> connect(c10d::Store& store, const SharedMemoryOptions& options,
                                                    std::string* why);
  ~SharedMemoryGroup();
  SharedMemoryGroup(const SharedMemoryGroup&) = delete;
  SharedMemoryGroup& operator=(const SharedMemoryGroup&) = delete;

  // Starts summing `tensor` (contiguous, on the CPU) in place over the
  // group: copies it into this rank's slot and returns. The sum is in
  // `tensor` once the returned work's wait() returns.
  c10::intrusive_ptr<c10d::Work> allreduce(at::Tensor& tensor);
  // The same for `parts` taken as one tensor, end to end (a bucket's
  // gradients, one element type): each is copied into the slot and its sum
  // back into it, with no concatenated copy in between.
  c10::intrusive_ptr<c10d::Work> allreduce(const std::vector<at::Tensor>& parts);

  int rank() const { return o_.rank; }
  int size() const { return o_.size; }
  Bytes capacity() const { return capacity_; }

  // Finishes every allreduce up to sequence number `seq` (its wait()).
  void complete(std::uint64_t seq);
  bool completed(std::uint64_t seq) const { return seq <= completed_; }

 private:
  struct Header;
  struct Op {
    std::uint64_t seq = 0;
    std::vector<at::Tensor> parts;  // the caller's, flattened, end to end
    std::int64_t numel = 0;         // theirs together
    at::ScalarType type = at::kFloat;
    Bytes offset = 0;  // in each rank's slot
  };
  SharedMemoryGroup(const SharedMemoryOptions& options, int fd, void* base, Bytes mapped, Bytes capacity);

  std::uint64_t post(std::vector<at::Tensor> parts);
  // Copies elements [lo, hi) of `op`'s parts taken end to end from (or, with
  // `in`, into) `slot`, which holds them in the same order.
  static void copyRange(const Op& op, const at::Tensor& slot, std::int64_t lo, std::int64_t hi, bool in);
  void finish(const Op& op);
  at::Tensor slot(int rank, Bytes offset, std::int64_t numel, at::ScalarType type) const;
  // Waits until counter `which` of rank `peer` reaches `seq`.
  void waitFor(int peer, int which, std::uint64_t seq);
  void publish(int which, std::uint64_t seq);
  bool alive(int peer) const;

  SharedMemoryOptions o_;
  int fd_ = -1;
  void* base_ = nullptr;
  Bytes mapped_ = 0, capacity_ = 0;
  Header* header_ = nullptr;
  std::deque<Op> pending_;
  std::uint64_t next_ = 1, completed_ = 0;
  Bytes head_ = 0;  // where the next allreduce goes in the slots
};

}  // namespace hydrozoa::runtime
