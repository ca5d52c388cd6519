#include "profile/predict.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/allocator.h"

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

// NOTE [Fresh pages]
// On a CPU, glibc serves a tensor of kMmapThreshold or more with a fresh
// mmap() and unmaps it when freed, so each such tensor page-faults on every
// allocation: a layer's output in forward, the gradient of its input and of
// its largest weight in backward (the weight's gradient is a new tensor each
// microbatch, added into the accumulated one). At about a microsecond or two
// per 4 KB page this is the whole difference between VGG-11's 100 MB dense
// layer's backward and its roofline (measured 100 ms, roofline 15 ms).
double freshSeconds(const DeviceSpec& device, Bytes bytes) {
  if (device.fresh_memory_bandwidth <= 0 || bytes < kMmapThreshold) return 0;
  return static_cast<double>(bytes) / device.fresh_memory_bandwidth;
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
      // Forward reads the parameters once. Backward reads them for the input's
      // gradient, writes the weights' gradient as a new tensor and adds it
      // into the accumulated one (read both, write one): five passes, which
      // is what a dense layer of a few MB takes here at small microbatches.
      const double paramBytes = static_cast<double>(p.layers[i].parameter_bytes);
      const double fwdTraffic = l.memory_traffic_bytes * dm + paramBytes;
      const double bwdTraffic = 2 * l.memory_traffic_bytes * dm + 5 * paramBytes;
      const KindFactors f = device.factors(factorKind(l));
      // The first layer's input needs no gradient (measure.cc does the same).
      const Bytes inputGradient = i == 0 ? 0 : meas.layers[i - 1].output_bytes;
      LayerCost c;
      c.output_bytes = l.output_bytes * m;
      const double forward = std::max(l.forward_flops * dm / flops, fwdTraffic / bandwidth);
      const double backward = std::max(l.backward_flops * dm / flops, bwdTraffic / bandwidth);
      // NOTE [Fresh pages]
      c.forward_ms = 1e3 * (f.forwardAt(m) * forward + device.layer_overhead + freshSeconds(device, c.output_bytes));
      c.backward_ms = 1e3 * (f.backwardAt(m) * backward + 2 * device.layer_overhead +
                             freshSeconds(device, 4 * l.largest_parameter) + freshSeconds(device, inputGradient));
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
