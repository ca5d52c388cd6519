#include "profile/device.h"

#include <fmt/format.h>

#include "core/files.h"
#include "core/paths.h"
#include "profile/field_checks.h"

namespace hydrozoa::profile {

namespace {

// Peak FP32 FLOP/s: an exaflop is far beyond any single device.
constexpr NumberRange kPeakFlopsRange{0, 1e18, "FLOP/s", /*exclusive_min=*/true};
constexpr NumberRange kEfficiencyRange{0, 1, "a fraction", /*exclusive_min=*/true};
// Per layer and pass: kernel launches take microseconds; a minute is no overhead.
constexpr NumberRange kLayerOverheadRange{0, 60, "seconds"};

// A quantity read with ObjectReader::bytes/bandwidth (at most kMaxBytes) that
// must also be above 0.
template <class T>
T positive(ObjectReader& r, const char* key, T value, const char* what) {
  if (r.ok() && !(value > 0)) {
    r.fail(key, fmt::format("{} is out of range; expected {} above 0 to {}", value, what, kMaxBytes));
  }
  return value;
}

void checkIn(ObjectReader& r, const char* key, double value, const NumberRange& range) {
  if (r.ok() && !inNumberRange(value, range)) {
    r.fail(key, fmt::format("{} is out of range; expected {}", value, describeNumberRange(range)));
  }
}

}  // namespace

Result<DeviceSpec> deviceFromYaml(const std::string& text, const std::string& origin) {
  HZ_ASSIGN_OR_RETURN(Json j, parseYaml(text, origin));
  ObjectReader r(j, origin);
  DeviceSpec d;
  d.name = r.string("name");
  d.kind = r.string("kind");
  d.description = r.optString("description").value_or(d.name);
  d.peak_flops = numberIn(r, "peak_flops", kPeakFlopsRange);
  d.memory_bandwidth = positive(r, "memory_bandwidth", r.bandwidth("memory_bandwidth"), "bytes per second");
  d.memory = positive(r, "memory", r.bytes("memory"), "bytes");
  if (r.has("compute_efficiency")) d.compute_efficiency = r.fraction("compute_efficiency");
  checkIn(r, "compute_efficiency", d.compute_efficiency, kEfficiencyRange);
  if (r.has("memory_efficiency")) d.memory_efficiency = r.fraction("memory_efficiency");
  checkIn(r, "memory_efficiency", d.memory_efficiency, kEfficiencyRange);
  if (r.has("layer_overhead")) d.layer_overhead = r.seconds("layer_overhead");
  checkIn(r, "layer_overhead", d.layer_overhead, kLayerOverheadRange);
  if (r.has("runtime_memory")) d.runtime_memory = r.bytes("runtime_memory");
  r.rejectUnknownKeys();
  HZ_RETURN_IF_ERROR(r.status());
  if (d.kind != "gpu" && d.kind != "cpu") {
    return parseError(fmt::format("{}.kind: is \"{}\"; use gpu or cpu", origin, printable(d.kind)));
  }
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
  // Through toYaml so that any name or description reads back as it was;
  // "{}" prints the shortest decimal that reads back as the same double.
  Json j = Json::object();
  j["name"] = d.name;
  j["kind"] = d.kind;
  j["description"] = d.description;
  j["peak_flops"] = d.peak_flops;
  j["memory_bandwidth"] = fmt::format("{}GB/s", d.memory_bandwidth / 1e9);
  j["memory"] = d.memory;
  j["compute_efficiency"] = d.compute_efficiency;
  j["memory_efficiency"] = d.memory_efficiency;
  j["layer_overhead"] = fmt::format("{}us", d.layer_overhead * 1e6);
  j["runtime_memory"] = d.runtime_memory;
  return toYaml(j);
}

}  // namespace hydrozoa::profile
