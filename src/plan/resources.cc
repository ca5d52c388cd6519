#include "plan/resources.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/files.h"
#include "core/paths.h"
#include "profile/field_checks.h"

namespace hydrozoa::plan {
namespace {

using profile::NumberRange;
using profile::numberIn;

// Up to a multiple of `increment`; past 2^62 (no worker has that) saturates
// instead of overflowing the conversion.
Bytes roundUp(double bytes, Bytes increment) {
  constexpr double kLarge = static_cast<double>(std::int64_t{1} << 62);
  if (!(bytes < kLarge)) return std::numeric_limits<Bytes>::max();
  if (increment <= 0) return static_cast<Bytes>(std::ceil(bytes));
  return saturatingMul(static_cast<Bytes>(std::ceil(bytes / static_cast<double>(increment) - 1e-9)), increment);
}

// A margin of 10 (1000%) is already far more headroom than anyone plans.
constexpr NumberRange kMarginRange{0, 10, "a fraction"};
constexpr NumberRange kVcpusPerGbRange{0, 1024, "vCPUs per GB", /*exclusive_min=*/true};
constexpr NumberRange kInstancePriceRange{0, profile::kUsdPerHourRange.max, "dollars per hour",
                                          /*exclusive_min=*/true};
// Accelerators (GPUs) in one VM instance.
constexpr Range kAcceleratorsRange{1, 1024};

// A size from `min` to kMaxBytes, with a unit or without ("16GB", 2e9).
Bytes sizeIn(ObjectReader& r, const char* key, Bytes min) {
  const Bytes v = r.bytes(key);
  if (r.ok() && v < min) {
    r.fail(key, fmt::format("{} is out of range; expected a size from {} to {} bytes", v, min, kMaxBytes));
  }
  return v;
}

double gb(Bytes b) { return static_cast<double>(b) / 1e9; }

// The tier at `key`, std::nullopt when absent; errors name the tier's field.
Result<std::optional<ContainerTier>> readTier(ObjectReader& parent, const char* key) {
  const Json* raw = parent.raw(key);
  if (!raw) return std::optional<ContainerTier>();
  ObjectReader r(*raw, parent.child(key));
  ContainerTier t;
  t.vcpus = numberIn(r, "vcpus", profile::kVcpusRange);
  t.max_memory = sizeIn(r, "max_memory", 1);
  if (r.has("host_memory")) t.host_memory = sizeIn(r, "host_memory", 0);
  t.vcpu_per_hour = numberIn(r, "vcpu_per_hour", profile::kUsdPerHourRange);
  t.memory_gb_per_hour = numberIn(r, "memory_gb_per_hour", profile::kUsdPerHourRange);
  if (const Json* acc = r.raw("accelerators")) {
    if (!acc->is_object()) {
      r.fail("accelerators", "expected a map of accelerator name to $/hour");
    } else {
      ObjectReader a(*acc, r.child("accelerators"));
      for (const auto& item : acc->items()) {
        t.accelerators.emplace_back(item.key(), numberIn(a, item.key().c_str(), profile::kUsdPerHourRange));
      }
      HZ_RETURN_IF_ERROR(r.status());
      HZ_RETURN_IF_ERROR(a.status());
    }
  }
  r.rejectUnknownKeys();
  HZ_RETURN_IF_ERROR(r.status());
  return std::optional<ContainerTier>(t);
}

std::string available(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none" : s;
}

}  // namespace

Result<std::vector<Bytes>> functionTiers(const Catalog& c) {
  std::vector<Bytes> tiers;
  for (Bytes t : c.tiers) {
    if (t >= c.min_memory && t <= c.max_memory) tiers.push_back(t);
  }
  if (tiers.empty()) {
    return invalidArgument(fmt::format("platform {}: none of its function sizes (tiers) lies from min_memory {} to "
                                       "max_memory {}; edit its catalog",
                                       c.name, formatBytes(c.min_memory), formatBytes(c.max_memory)));
  }
  return tiers;
}

Result<Catalog> loadCatalog(const std::string& nameOrPath) {
  const std::string path = dataFile("pricing", nameOrPath, ".yaml");
  auto text = readTextFile(path);
  if (!text.ok()) {
    if (text.status().code() == ErrorCode::kNotFound && path != nameOrPath) {
      return notFound(fmt::format("unknown platform \"{}\": no {} (built in: aci, lambda, alibaba-fc, azure-vm, "
                                  "aws-vm, gcp-vm; or give a catalog file path)",
                                  nameOrPath, path));
    }
    return text.status();
  }
  return catalogFromYaml(*text, path);
}

Result<Catalog> catalogFromYaml(const std::string& text, const std::string& origin) {
  HZ_ASSIGN_OR_RETURN(Json yaml, parseYaml(text, origin));
  ObjectReader r(yaml, origin);
  Catalog c;
  c.name = r.string("name");
  c.description = r.optString("description").value_or("");
  const std::string kind = r.string("kind");
  c.billing = r.string("billing");
  c.network_bandwidth = r.bandwidth("network_bandwidth");
  if (r.ok() && !(c.network_bandwidth > 0)) {
    r.fail("network_bandwidth", fmt::format("{} is out of range; expected bytes per second above 0 to {}",
                                            c.network_bandwidth, kMaxBytes));
  }
  if (r.has("memory_increment")) c.memory_increment = sizeIn(r, "memory_increment", 1);
  if (r.has("memory_margin")) {
    c.memory_margin = r.fraction("memory_margin");
    if (r.ok() && !profile::inNumberRange(c.memory_margin, kMarginRange)) {
      r.fail("memory_margin", fmt::format("{} is out of range; expected {}", c.memory_margin,
                                          profile::describeNumberRange(kMarginRange)));
    }
  }
  HZ_RETURN_IF_ERROR(r.status());
  if (kind == "container") {
    c.kind = PlatformKind::kContainer;
    HZ_ASSIGN_OR_RETURN(c.cpu, readTier(r, "cpu"));
    HZ_ASSIGN_OR_RETURN(c.gpu, readTier(r, "gpu"));
    if (r.ok() && !c.cpu && !c.gpu) r.fail("a container catalog needs a cpu: or gpu: section");
  } else if (kind == "function") {
    c.kind = PlatformKind::kFunction;
    c.min_memory = sizeIn(r, "min_memory", 0);
    c.max_memory = sizeIn(r, "max_memory", 1);
    c.memory_gb_per_hour = numberIn(r, "memory_gb_per_hour", profile::kUsdPerHourRange);
    c.vcpus_per_gb = numberIn(r, "vcpus_per_gb", kVcpusPerGbRange);
    if (r.ok() && c.min_memory > c.max_memory) {
      r.fail("min_memory", fmt::format("{} is above max_memory; expected at most {}", c.min_memory, c.max_memory));
    }
    if (r.has("tiers")) {
      const Json& list = r.array("tiers", /*nonEmpty=*/true);
      for (size_t i = 0; i < list.size() && r.ok(); ++i) {
        // A size as the other fields take it (a number of bytes, or "512MB"); the
        // planner uses those from min_memory to max_memory.
        Result<Bytes> size = invalidArgument("");
        if (list[i].is_number_integer()) size = list[i].get<Bytes>();
        if (list[i].is_string()) size = parseBytes(list[i].get<std::string>(), "a size");
        if (!size.ok() || *size < 1 || *size > kMaxBytes || (!c.tiers.empty() && *size <= c.tiers.back())) {
          r.fail("tiers", fmt::format("{} is not a size (such as 512MB or 10GB) above the one before it",
                                      list[i].dump()));
        } else {
          c.tiers.push_back(*size);
        }
      }
    } else {
      // FuncPipe's (§5.1: 512 MB to 10,240 MB), in this catalog format's decimal units.
      for (Bytes mb : {512, 1000, 2000, 3000, 4000, 6000, 8000, 10000}) c.tiers.push_back(mb * kMB);
    }
    if (r.has("storage_latency")) {
      const double latency = r.seconds("storage_latency");
      if (r.ok() && !(latency >= 0 && latency <= 60)) {
        r.fail("storage_latency", fmt::format("{} s is out of range; expected 0 to 60 s", latency));
      }
      c.storage_latency = latency;
    }
    c.cold_start = r.optString("cold_start").value_or("");
    if (r.has("request_fee")) {
      c.request_fee = r.nonNegative("request_fee");
      if (r.ok() && c.request_fee > 1) r.fail("request_fee", fmt::format("${} per invocation is out of range; expected $0 to $1", c.request_fee));
    }
  } else if (kind == "vm") {
    c.kind = PlatformKind::kVm;
    const Json& list = r.array("instances", /*nonEmpty=*/true);
    for (size_t i = 0; i < list.size() && r.ok(); ++i) {
      ObjectReader v(list[i], r.element("instances", i));
      VmInstance vm;
      vm.name = v.string("name");
      vm.accelerator = v.optString("accelerator").value_or("");
      const std::int64_t defaultAccelerators = vm.accelerator.empty() ? 0 : 1;
      vm.accelerators = static_cast<int>(v.optCount("accelerators", kAcceleratorsRange).value_or(defaultAccelerators));
      vm.vcpus = numberIn(v, "vcpus", profile::kVcpusRange);
      vm.memory = sizeIn(v, "memory", 1);
      vm.per_hour = numberIn(v, "per_hour", kInstancePriceRange);
      if (v.has("spot_per_hour")) vm.spot_per_hour = numberIn(v, "spot_per_hour", kInstancePriceRange);
      v.rejectUnknownKeys();
      HZ_RETURN_IF_ERROR(v.status());
      c.instances.push_back(vm);
    }
  } else if (r.ok()) {
    r.fail("kind", fmt::format("is \"{}\"; use container, function or vm", printable(kind)));
  }
  r.rejectUnknownKeys();
  HZ_RETURN_IF_ERROR(r.status());
  return c;
}

WorkerSpec rightSize(const Catalog& c, const WorkerNeeds& needs) {
  WorkerSpec w;
  w.accelerator = needs.accelerator;
  const bool gpu = !needs.accelerator.empty();
  // CPU workers hold everything in host memory; GPU workers hold their stage
  // on the device and need host memory for a copy of the parameters.
  const double margin = 1.0 + c.memory_margin;
  switch (c.kind) {
    case PlatformKind::kContainer: {
      const std::optional<ContainerTier>& tier = gpu ? c.gpu : c.cpu;
      if (!tier) {
        w.reason = fmt::format("{} has no {} containers", c.name, gpu ? "GPU" : "CPU-only");
        return w;
      }
      UsdPerHour accelerator = 0;
      if (gpu) {
        std::vector<std::string> names;
        bool found = false;
        for (const auto& [name, price] : tier->accelerators) {
          names.push_back(name);
          if (name == needs.accelerator) {
            accelerator = price;
            found = true;
          }
        }
        if (!found) {
          w.reason = fmt::format("{} offers no {} (it offers {}); choose another --platform or add it to the catalog",
                                 c.name, needs.accelerator, available(names));
          return w;
        }
      }
      const double need = gpu ? static_cast<double>(tier->host_memory) + needs.parameter_bytes * margin
                              : static_cast<double>(needs.memory) * margin;
      w.memory = roundUp(need, c.memory_increment);
      if (w.memory > tier->max_memory) {
        w.reason = fmt::format("a worker needs {} of memory but {} {} containers have at most {}", formatBytes(w.memory),
                               c.name, gpu ? "GPU" : "CPU", formatBytes(tier->max_memory));
        return w;
      }
      w.vcpus = tier->vcpus;
      w.cost_per_hour = tier->vcpus * tier->vcpu_per_hour + gb(w.memory) * tier->memory_gb_per_hour + accelerator;
      w.description = fmt::format("{} vCPU, {}{}", w.vcpus, formatBytes(w.memory), gpu ? ", 1x " + needs.accelerator : "");
      break;
    }
    case PlatformKind::kFunction: {
      if (gpu) {
        w.reason = fmt::format("{} functions have no accelerators; plan for --device cpu or another --platform", c.name);
        return w;
      }
      w.memory = roundUp(std::max<double>(static_cast<double>(c.min_memory), needs.memory * margin), c.memory_increment);
      if (w.memory > c.max_memory) {
        w.reason = fmt::format("a worker needs {} of memory but {} functions have at most {}", formatBytes(w.memory),
                               c.name, formatBytes(c.max_memory));
        return w;
      }
      w.vcpus = gb(w.memory) * c.vcpus_per_gb;
      w.cost_per_hour = gb(w.memory) * c.memory_gb_per_hour;
      w.description = fmt::format("function {}", formatBytes(w.memory));
      break;
    }
    case PlatformKind::kVm: {
      const VmInstance* best = nullptr;
      std::vector<std::string> names;
      for (const auto& vm : c.instances) {
        if (vm.accelerator != needs.accelerator) continue;
        names.push_back(vm.name);
        const int perInstance = std::max(1, vm.accelerators);
        const double hostPerWorker = static_cast<double>(vm.memory) / perInstance;
        const double need = gpu ? needs.parameter_bytes * margin : needs.memory * margin;
        if (need > hostPerWorker) continue;
        if (!best || vm.per_hour / perInstance < best->per_hour / std::max(1, best->accelerators)) best = &vm;
      }
      if (!best) {
        w.reason = names.empty() ? fmt::format("{} has no {} instances in its catalog", c.name,
                                               gpu ? needs.accelerator : std::string("CPU-only"))
                                 : fmt::format("no {} instance ({}) has the {} a worker needs", c.name,
                                               available(names), formatBytes(static_cast<Bytes>(needs.memory * margin)));
        return w;
      }
      w.instance = best->name;
      w.workers_per_instance = std::max(1, best->accelerators);
      w.vcpus = best->vcpus / w.workers_per_instance;
      w.memory = best->memory / w.workers_per_instance;
      w.cost_per_hour = best->per_hour / w.workers_per_instance;
      w.description = w.workers_per_instance > 1 ? fmt::format("1/{} of {}", w.workers_per_instance, best->name)
                                                 : best->name;
      break;
    }
  }
  w.feasible = true;
  return w;
}

std::optional<Bytes> platformMemoryLimit(const Catalog& c, const std::string& accelerator) {
  if (!accelerator.empty()) return std::nullopt;
  const double margin = 1.0 + c.memory_margin;
  Bytes max = 0;
  switch (c.kind) {
    case PlatformKind::kContainer:
      if (!c.cpu) return std::nullopt;
      max = c.cpu->max_memory;
      break;
    case PlatformKind::kFunction: max = c.max_memory; break;
    case PlatformKind::kVm:
      for (const auto& vm : c.instances) {
        if (vm.accelerator.empty()) max = std::max(max, vm.memory);
      }
      if (max == 0) return std::nullopt;
      break;
  }
  return static_cast<Bytes>(std::floor(static_cast<double>(max) / margin));
}

UsdPerHour totalCostPerHour(const Catalog& c, const std::vector<WorkerSpec>& specs) {
  if (c.kind != PlatformKind::kVm) {
    UsdPerHour total = 0;
    for (const auto& s : specs) total += s.cost_per_hour;
    return total;
  }
  // VMs are billed as whole instances.
  std::map<std::string, std::pair<int, const WorkerSpec*>> byInstance;
  for (const auto& s : specs) {
    auto& e = byInstance[s.instance];
    ++e.first;
    e.second = &s;
  }
  UsdPerHour total = 0;
  for (const auto& [name, e] : byInstance) {
    const int wpi = e.second->workers_per_instance;
    const int instances = (e.first + wpi - 1) / wpi;
    total += instances * e.second->cost_per_hour * wpi;
  }
  return total;
}

}  // namespace hydrozoa::plan
