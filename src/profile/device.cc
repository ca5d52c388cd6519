#include "profile/device.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/files.h"
#include "core/paths.h"
#include "model/arch.h"
#include "profile/field_checks.h"

namespace hydrozoa::profile {

namespace {

// Peak FP32 FLOP/s: an exaflop is far beyond any single device.
constexpr NumberRange kPeakFlopsRange{0, 1e18, "FLOP/s", /*exclusive_min=*/true};
constexpr NumberRange kEfficiencyRange{0, 1, "a fraction", /*exclusive_min=*/true};
// Per layer and pass: kernel launches take microseconds; a minute is no overhead.
constexpr NumberRange kLayerOverheadRange{0, 60, "seconds"};
// A kind's time against its roofline: the calibration of this machine finds
// 0.5–5; three orders of magnitude either way is a typo.
constexpr NumberRange kKindFactorRange{1e-3, 1e3, "a factor"};
// The factor's part that falls with the microbatch (times the microbatch).
constexpr NumberRange kSmallFactorRange{0, 1e3, "a factor"};

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

// kinds: {conv: {forward: 2.1, backward: 0.9, forward_small: 4}, ...}
void readKinds(ObjectReader& r, std::map<std::string, KindFactors>* kinds) {
  if (!r.has("kinds")) return;
  const Json& j = r.object("kinds");
  if (!r.ok()) return;
  const auto& known = factorKinds();
  for (const auto& [name, value] : j.items()) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      r.fail("kinds", fmt::format("unknown layer kind \"{}\" (known: {})", printable(name), fmt::join(known, ", ")));
      return;
    }
    ObjectReader k(value, r.child("kinds") + "." + name);
    KindFactors f;
    if (k.has("forward")) f.forward = numberIn(k, "forward", kKindFactorRange);
    if (k.has("backward")) f.backward = numberIn(k, "backward", kKindFactorRange);
    if (k.has("forward_small")) f.forward_small = numberIn(k, "forward_small", kSmallFactorRange);
    if (k.has("backward_small")) f.backward_small = numberIn(k, "backward_small", kSmallFactorRange);
    k.rejectUnknownKeys();
    r.adopt(k.status());
    (*kinds)[name] = f;
  }
}

}  // namespace

double KindFactors::forwardAt(std::int64_t microbatch) const {
  return forward + forward_small / static_cast<double>(std::max<std::int64_t>(microbatch, 1));
}

double KindFactors::backwardAt(std::int64_t microbatch) const {
  return backward + backward_small / static_cast<double>(std::max<std::int64_t>(microbatch, 1));
}

std::string factorKind(const model::LayerAnalysis& layer) {
  const bool overInput = layer.input_shape.size() == 3 && layer.input_shape[0] <= 4;
  return layer.kind == "conv" && overInput ? "input_conv" : layer.kind;
}

const std::vector<std::string>& factorKinds() {
  static const std::vector<std::string> kinds = [] {
    std::vector<std::string> k = model::layerKinds();
    k.push_back("input_conv");
    return k;
  }();
  return kinds;
}

KindFactors DeviceSpec::factors(const std::string& layerKind) const {
  const auto it = kinds.find(layerKind);
  return it == kinds.end() ? KindFactors{} : it->second;
}

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
  if (r.has("fresh_memory_bandwidth")) {
    d.fresh_memory_bandwidth =
        positive(r, "fresh_memory_bandwidth", r.bandwidth("fresh_memory_bandwidth"), "bytes per second");
  }
  readKinds(r, &d.kinds);
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
  if (d.fresh_memory_bandwidth > 0) j["fresh_memory_bandwidth"] = fmt::format("{}GB/s", d.fresh_memory_bandwidth / 1e9);
  if (!d.kinds.empty()) {
    Json kinds = Json::object();
    for (const auto& [name, f] : d.kinds) {
      Json& k = kinds[name] = {{"forward", f.forward}, {"backward", f.backward}};
      if (f.forward_small > 0) k["forward_small"] = f.forward_small;
      if (f.backward_small > 0) k["backward_small"] = f.backward_small;
    }
    j["kinds"] = kinds;
  }
  return toYaml(j);
}

std::string describeKindFactors(const DeviceSpec& d) {
  if (d.kinds.empty()) return "none";
  std::string out;
  for (const auto& [name, f] : d.kinds) {
    out += fmt::format("{}{} ×{:.2f} / ×{:.2f}", out.empty() ? "" : ", ", name, f.forwardAt(8), f.backwardAt(8));
  }
  return out;
}

}  // namespace hydrozoa::profile
