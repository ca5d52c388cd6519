#include "profile/predict.h"

#include <fmt/format.h>

#include <algorithm>

namespace hydrozoa::profile {
namespace {

// Bytes an update reads and writes per byte of parameters, as libtorch's
// elementwise operations make it (NOTE [Timing the update], measure.cc):
// SGD reads the weight and its gradient and writes the weight; momentum
// also updates its buffer (buf = m·buf + g; w −= lr·buf); Adam updates two
// moments and divides by the root of the second.
double updateTraffic(const std::string& optimizer) {
  if (optimizer == "sgd") return 3;
  if (optimizer == "sgd_momentum") return 6;
  return 14;  // adam, adamw
}

}  // namespace

Result<Profile> predictProfile(const model::Arch& arch, const DeviceSpec& device,
                               const std::vector<std::int64_t>& microbatchSizes, const std::string& optimizer) {
  HZ_ASSIGN_OR_RETURN(double stateFactor, optimizerStateFactor(optimizer));
  if (microbatchSizes.empty()) return invalidArgument("no microbatch sizes to predict");
  const auto layers = model::analyze(arch);
  Profile p;
  p.model = arch.name;
  p.options = arch.options;
  p.source = "predicted";
  p.device = device.name;
  p.device_kind = device.kind;
  p.device_memory = device.memory;
  p.optimizer = optimizer;
  p.runtime_bytes = device.runtime_memory;
  const double flops = device.peak_flops * device.compute_efficiency;
  const double bandwidth = device.memory_bandwidth * device.memory_efficiency;
  for (const auto& l : layers) {
    const Bytes params = 4 * l.parameters;
    LayerInfo info{l.name, l.kind, params, static_cast<Bytes>(stateFactor * static_cast<double>(params))};
    if (params > 0) {
      const double traffic = updateTraffic(optimizer) * static_cast<double>(params);
      info.optimizer_ms = 1e3 * (traffic / bandwidth + device.layer_overhead);
    }
    p.layers.push_back(std::move(info));
  }
  std::vector<std::int64_t> sizes = microbatchSizes;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  for (std::int64_t m : sizes) {
    if (m <= 0) return invalidArgument(fmt::format("microbatch size {} must be positive", m));
    Measurement meas;
    meas.microbatch_size = m;
    const Bytes elementBytes = arch.input.kind == model::InputKind::kTokens ? 8 : 4;
    meas.input_bytes = elementBytes * model::numel(arch.input.shape) * m;
    const double dm = static_cast<double>(m);
    for (size_t i = 0; i < layers.size(); ++i) {
      const auto& l = layers[i];
      // Parameters are read once per pass (and written by backward as gradients).
      const double paramBytes = static_cast<double>(p.layers[i].parameter_bytes);
      const double fwdTraffic = l.memory_traffic_bytes * dm + paramBytes;
      const double bwdTraffic = 2 * l.memory_traffic_bytes * dm + 2 * paramBytes;
      LayerCost c;
      c.forward_ms = 1e3 * (std::max(l.forward_flops * dm / flops, fwdTraffic / bandwidth) + device.layer_overhead);
      c.backward_ms = 1e3 * (std::max(l.backward_flops * dm / flops, bwdTraffic / bandwidth) + 2 * device.layer_overhead);
      c.output_bytes = l.output_bytes * m;
      c.stashed_bytes = std::max(l.stashed_bytes, l.output_bytes) * m;
      c.workspace_bytes = l.output_bytes * m;  // the incoming gradient during backward
      meas.layers.push_back(c);
    }
    p.measurements.push_back(std::move(meas));
  }
  HZ_RETURN_IF_ERROR(validateProfile(p, "predicted profile"));
  return p;
}

}  // namespace hydrozoa::profile
