// The point-to-point queues between a stage's worker and the workers of its
// neighbouring stages, and which of those hear what is not per microbatch.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "runtime/comm/pipe.h"
#include "runtime/comm/transport.h"
#include "runtime/schedule/schedule.h"
#include "runtime/trace.h"

namespace hydrozoa::runtime {

// The point-to-point queues of a stage: one inbound and one outbound per
// (worker of a neighbouring stage, payload), made on first use.
class Channels {
 public:
  // `rankOf(stage, replica)`: the rank of that worker; `posting`: who posts
  // each transfer (NOTE [Posting transfers on the channel's thread]).
  Channels(Transport& transport, TraceRecorder& trace, std::function<int(int, int)> rankOf,
           Posting posting = Posting::kCaller);
  Inbound& in(int peerStage, int peerReplica, Payload payload);
  Outbound& out(int peerStage, int peerReplica, Payload payload);
  // Waits until everything sent so far has left.
  void flush();
  // Bytes of activations and gradients sent so far (not the control words).
  std::int64_t bytesSent() const;

 private:
  using Key = std::tuple<int, int, Payload>;
  Transport& transport_;
  TraceRecorder& trace_;
  std::function<int(int, int)> rankOf_;
  Posting posting_;
  std::map<Key, std::unique_ptr<Inbound>> in_;
  std::map<Key, std::unique_ptr<Outbound>> out_;
};

// The workers of stage `to` (a neighbour of the shape's) that hear from
// this one what is not per microbatch (the drain word, shapes): its own
// replica when every stage has the same copies; round-robin, the next
// stage's replicas j' with j' mod r_s = this replica, and on the previous
// stage, replica (this replica mod r_{s−1}).
std::vector<int> listeners(const PipelineShape& shape, int to);
int speaker(const PipelineShape& shape, int from);

}  // namespace hydrozoa::runtime
