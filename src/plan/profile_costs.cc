// The planner's costs from a profile (declared in plan/search.h): the
// chain's times and cuts, each layer's memory, and the transport's measured
// figures. The search itself is in search.cc.
#include <algorithm>

#include "plan/search.h"

namespace hydrozoa::plan {

ChainCosts chainCosts(const profile::Profile& profile, const profile::Measurement& m, BytesPerSecond bandwidth,
                      Seconds latency, bool afterOtherChunk) {
  HZ_CHECK(bandwidth > 0);
  ChainCosts c;
  const size_t L = profile.numLayers();
  for (size_t i = 0; i < L; ++i) {
    const profile::LayerCost& l = m.layers[i];
    const bool cold = afterOtherChunk && l.cold_forward_ms > 0 && l.cold_backward_ms > 0;
    c.forward.push_back((cold ? l.cold_forward_ms : l.forward_ms) / 1e3);
    c.backward.push_back((cold ? l.cold_backward_ms : l.backward_ms) / 1e3);
    if (i + 1 < L) c.cut.push_back(latency + static_cast<double>(m.layers[i].output_bytes) / bandwidth);
  }
  return c;
}

void addMessageCpu(ChainCosts& costs, const profile::Measurement& m, const profile::MessageCpuTable& cpu,
                   bool fullHost) {
  const int L = costs.numLayers();
  costs.send.assign(static_cast<size_t>(std::max(0, L - 1)), 0);
  costs.receive.assign(costs.send.size(), 0);
  for (int u = 0; u + 1 < L; ++u) {
    // The activation, and its gradient back: the same bytes.
    const profile::MessageCpu c = cpu.at(m.layers[static_cast<size_t>(u)].output_bytes);
    costs.send[u] = c.send + (fullHost ? c.send_threads : 0);
    costs.receive[u] = c.post + (fullHost ? c.receive : 0);
  }
}

MemoryCosts memoryCosts(const profile::Profile& profile, const profile::Measurement& m, bool stepBefore, Bytes data,
                        bool sharedSlot, int workingCopies) {
  MemoryCosts mem;
  mem.runtime = saturatingAdd(profile.runtime_bytes, m.heap_bytes);
  mem.data = data;
  for (size_t i = 0; i < profile.numLayers(); ++i) {
    const auto& info = profile.layers[i];
    // Weights, their gradients and the optimizer's state; with recovery's
    // copy, the weights and state once more; with a slot of shared memory,
    // the gradients once more (the slot's pages are the worker's own; its
    // resident size also counts what it reads of its peers' slots, which
    // the host holds once).
    const Bytes state = info.parameter_bytes + info.optimizer_state_bytes;
    mem.fixed.push_back(2 * info.parameter_bytes + info.optimizer_state_bytes + (stepBefore ? state : 0) +
                        (sharedSlot ? info.parameter_bytes : 0) + workingCopies * info.parameter_bytes);
    mem.stashed.push_back(m.layers[i].stashed_bytes);
    mem.workspace.push_back(m.layers[i].workspace_bytes);
    mem.input.push_back(i == 0 ? m.input_bytes : m.layers[i - 1].output_bytes);
  }
  return mem;
}

std::optional<SharedMemoryCost> sharedMemoryCost(const profile::NetworkProfile& network) {
  if (!network.shared_memory) return std::nullopt;
  return SharedMemoryCost{network.shared_memory->seconds_per_byte, network.shared_memory->seconds_per_allreduce,
                          std::max(2, network.allreduce_workers)};
}

// NOTE [Messages one at a time]
// The message table's rows (NOTE [What a message costs the cores],
// profile/network.cc) time 32 messages sent back to back, so the helper
// threads on either side wake once for several of them. A pipeline sends its
// messages one at a time, a pass apart, and each wakes Gloo's transport
// threads and a channel's thread on both sides by itself: sampled with perf
// on this project's 2-core machine (interleaved CNN, 16 microbatches), each
// worker's Gloo thread took 14% of a core and its channels' threads another
// 12%, some 70 us per message per side, where the table says 20–30 us for
// sending and receiving one. The delivery probe, sending one at a time,
// times it: helper CPU per message sent and received. What that exceeds the
// table's figure by at the probe's size is added to every row, half to each
// side (a wake-up's cost, whatever the size). The planner charges those
// figures to the passes where every core computes (addMessageCpu).
profile::MessageCpuTable messagesOneAtATime(const profile::MessageCpuTable& table,
                                            const profile::MessageDelivery& delivery) {
  const profile::MessageCpu burst = table.at(delivery.bytes);
  const Seconds extra = std::max(0.0, delivery.helper_cpu - (burst.send_threads + burst.receive));
  profile::MessageCpuTable apart = table;
  for (profile::MessageCpu& row : apart.rows) {
    row.send_threads += extra / 2;
    row.receive += extra / 2;
  }
  return apart;
}

void useMeasuredTransport(SearchOptions& o, const profile::NetworkProfile& network) {
  o.allreduce_alpha = std::max(0.0, network.alpha);
  o.allreduce_beta = network.beta;
  // A transfer between stages pays its delivery on busy cores where the
  // probe measured it (NOTE [A message's delivery on busy cores],
  // profile/network.cc), beyond its bytes over the bandwidth; else the
  // small-message ping-pong's latency.
  o.transfer_latency = network.latency;
  if (network.delivery && network.bandwidth > 0) {
    const Seconds beyondBytes =
        network.delivery->mean - static_cast<double>(network.delivery->bytes) / network.bandwidth;
    o.transfer_latency = std::max(o.transfer_latency, beyondBytes);
  }
  o.message_cpu = network.messages;
  if (o.message_cpu && network.delivery) *o.message_cpu = messagesOneAtATime(*o.message_cpu, *network.delivery);
}

}  // namespace hydrozoa::plan
