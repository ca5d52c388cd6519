#include "profile/device.h"

#include <fmt/format.h>

#include "core/files.h"
#include "core/paths.h"

namespace hydrozoa::profile {

Result<DeviceSpec> deviceFromYaml(const std::string& text, const std::string& origin) {
  HZ_ASSIGN_OR_RETURN(Json j, parseYaml(text, origin));
  ObjectReader r(j, origin);
  DeviceSpec d;
  d.name = r.string("name");
  d.kind = r.string("kind");
  d.description = r.optString("description").value_or(d.name);
  d.peak_flops = r.positive("peak_flops");
  d.memory_bandwidth = r.bandwidth("memory_bandwidth");
  d.memory = r.bytes("memory");
  if (r.has("compute_efficiency")) d.compute_efficiency = r.fraction("compute_efficiency");
  if (r.has("memory_efficiency")) d.memory_efficiency = r.fraction("memory_efficiency");
  if (r.has("layer_overhead")) d.layer_overhead = r.seconds("layer_overhead");
  if (r.has("runtime_memory")) d.runtime_memory = r.bytes("runtime_memory");
  r.rejectUnknownKeys();
  HZ_RETURN_IF_ERROR(r.status());
  if (d.kind != "gpu" && d.kind != "cpu") {
    return parseError(fmt::format("{}.kind: is \"{}\"; use gpu or cpu", origin, d.kind));
  }
  for (auto [key, v] : {std::pair{"compute_efficiency", d.compute_efficiency}, {"memory_efficiency", d.memory_efficiency}}) {
    if (!(v > 0 && v <= 1)) return parseError(fmt::format("{}.{}: must be in (0, 1], got {}", origin, key, v));
  }
  if (d.memory <= 0 || d.memory_bandwidth <= 0) return parseError(origin + ": memory and memory_bandwidth must be positive");
  return d;
}

Result<DeviceSpec> loadDevice(const std::string& nameOrPath) {
  const std::string path = dataFile("devices", nameOrPath, ".yaml");
  auto text = readTextFile(path);
  if (!text.ok()) {
    if (text.status().code() == ErrorCode::kNotFound && path != nameOrPath) {
      return notFound(fmt::format("unknown device \"{}\" (built in: k80, v100, a100, h100, cpu; or a device YAML file)",
                                  nameOrPath));
    }
    return text.status();
  }
  return deviceFromYaml(*text, path);
}

std::string deviceToYaml(const DeviceSpec& d) {
  return fmt::format(
      "name: {}\nkind: {}\ndescription: \"{}\"\npeak_flops: {:.6g}\nmemory_bandwidth: {:.6g}GB/s\nmemory: {}\n"
      "compute_efficiency: {}\nmemory_efficiency: {}\nlayer_overhead: {:.6g}us\nruntime_memory: {}\n",
      d.name, d.kind, d.description, d.peak_flops, d.memory_bandwidth / 1e9, d.memory, d.compute_efficiency,
      d.memory_efficiency, d.layer_overhead * 1e6, d.runtime_memory);
}

}  // namespace hydrozoa::profile
