#include "profile/summary.h"

#include <fmt/format.h>

#include "core/table.h"

namespace hydrozoa::profile {

std::string renderProfileTable(const Profile& p) {
  const Measurement& m = p.measurements.back();
  std::string out = fmt::format("Profile of {} ({}{}), {} layers, optimizer {}; per layer at microbatch size {}:\n\n",
                                p.model, p.source, p.device.empty() ? "" : " on " + p.device, p.numLayers(),
                                p.optimizer, m.microbatch_size);
  TextTable t({"#", "layer", "kind", "params", "forward", "backward", "output", "kept for bwd", "workspace"},
              {true, false, false, true, true, true, true, true, true});
  for (size_t i = 0; i < p.numLayers(); ++i) {
    const LayerCost& c = m.layers[i];
    t.addRow({std::to_string(i), p.layers[i].name, p.layers[i].kind, formatBytes(p.layers[i].parameter_bytes),
              formatSeconds(c.forward_ms / 1e3), formatSeconds(c.backward_ms / 1e3), formatBytes(c.output_bytes),
              formatBytes(c.stashed_bytes), formatBytes(c.workspace_bytes)});
  }
  out += t.render();
  out += "\nTotals per microbatch size:\n";
  TextTable totals({"microbatch", "forward", "backward", "kept for bwd", "per sample fwd+bwd"},
                   {true, true, true, true, true});
  for (const Measurement& meas : p.measurements) {
    double f = 0, b = 0;
    Bytes kept = 0;
    for (const LayerCost& c : meas.layers) {
      f += c.forward_ms;
      b += c.backward_ms;
      kept += c.stashed_bytes;
    }
    totals.addRow({std::to_string(meas.microbatch_size), formatSeconds(f / 1e3), formatSeconds(b / 1e3),
                   formatBytes(kept), formatSeconds((f + b) / 1e3 / static_cast<double>(meas.microbatch_size))});
  }
  out += totals.render();
  Bytes params = 0;
  for (const auto& l : p.layers) params += l.parameter_bytes;
  out += fmt::format("Parameters: {} ({} values)\n", formatBytes(params), formatCount(static_cast<double>(params) / 4));
  if (p.network) {
    out += fmt::format("Network: {} point-to-point, {} latency; allreduce alpha {:.3g} s/B, beta {} ({} workers, R² "
                       "{:.3f})\n",
                       formatBandwidth(p.network->bandwidth), formatSeconds(p.network->latency), p.network->alpha,
                       formatSeconds(p.network->beta), p.network->allreduce_workers, p.network->fit_r2);
    if (const auto& shm = p.network->shared_memory) {
      out += fmt::format("Allreduce through shared memory (replicas on one machine): {:.3g} s/B + {} per allreduce "
                         "(R² {:.3f})\n",
                         shm->seconds_per_byte, formatSeconds(shm->seconds_per_allreduce), shm->r2);
    }
    if (const auto& table = p.network->messages) {
      const MessageCpu m = table->at(64 * kKB);
      out += fmt::format("CPU per message between stages (64 KB): {} on the sending thread, {} on its other threads; "
                         "{} posting the receive, {} receiving it\n",
                         formatSeconds(m.send), formatSeconds(m.send_threads), formatSeconds(m.post),
                         formatSeconds(m.receive));
    }
    if (const auto& d = p.network->delivery) {
      out += fmt::format("Delivery of a message between stages ({}) while the sender computes: mean {}, median {}, "
                         "90th percentile {} (the planner charges the mean per transfer); {} of the helper threads' "
                         "CPU per message sent and received, one at a time\n",
                         formatBytes(d->bytes), formatSeconds(d->mean), formatSeconds(d->median),
                         formatSeconds(d->p90), formatSeconds(d->helper_cpu));
    }
  }
  if (p.corun) {
    out += fmt::format("Beside busy cores: a pass at microbatch size {} took {:.2f}x its time alone while all {} cores "
                       "computed (the planner's slowdown for workers sharing a host of {} cores)\n",
                       p.corun->microbatch_size, p.corun->slowdown, p.corun->cores, p.corun->cores);
  }
  return out;
}

}  // namespace hydrozoa::profile
