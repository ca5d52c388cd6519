#include "runtime/exec/channels.h"

namespace hydrozoa::runtime {
namespace {

const char* payloadName(Payload p) {
  return p == Payload::kActivation ? "activation" : p == Payload::kGradient ? "gradient" : "control";
}

}  // namespace

Channels::Channels(Transport& transport, TraceRecorder& trace, std::function<int(int, int)> rankOf,
                   Posting posting)
    : transport_(transport), trace_(trace), rankOf_(std::move(rankOf)), posting_(posting) {}

Inbound& Channels::in(int peerStage, int peerReplica, Payload payload) {
  auto& slot = in_[{peerStage, peerReplica, payload}];
  if (!slot) {
    slot = std::make_unique<Inbound>(transport_, rankOf_(peerStage, peerReplica), trace_, payloadName(payload),
                                     posting_);
  }
  return *slot;
}

Outbound& Channels::out(int peerStage, int peerReplica, Payload payload) {
  auto& slot = out_[{peerStage, peerReplica, payload}];
  if (!slot) {
    slot = std::make_unique<Outbound>(transport_, rankOf_(peerStage, peerReplica), trace_, payloadName(payload),
                                      posting_);
  }
  return *slot;
}

void Channels::flush() {
  for (auto& [key, o] : out_) o->flush();
}

std::int64_t Channels::bytesSent() const {
  std::int64_t bytes = 0;
  for (const auto& [key, o] : out_) {
    if (std::get<2>(key) != Payload::kControl) bytes += o->bytesSent();
  }
  return bytes;
}

std::vector<int> listeners(const PipelineShape& shape, int to) {
  if (!shape.roundRobin()) return {shape.replica};
  std::vector<int> out;
  for (int j = shape.replica; j < shape.replicasOf(to); j += shape.replicasOf(shape.stage)) out.push_back(j);
  return out;
}

int speaker(const PipelineShape& shape, int from) {
  return shape.roundRobin() ? shape.replica % shape.replicasOf(from) : shape.replica;
}

}  // namespace hydrozoa::runtime
