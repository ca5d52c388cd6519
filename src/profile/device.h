// Device specs for predicted profiles: peak FLOP/s, memory bandwidth and
// size, and the fractions of peak that training achieves. Built in (data/
// devices/*.yaml): k80, v100, a100, h100; "cpu" is this machine, calibrated
// by a measurement (profile/calibrate.h); any YAML file of the same shape.
#pragma once

#include <string>

#include "core/status.h"
#include "core/units.h"

namespace hydrozoa::profile {

struct DeviceSpec {
  std::string name;         // "k80"
  std::string kind;         // "gpu" or "cpu"
  std::string description;
  double peak_flops = 0;             // FLOP/s, FP32
  BytesPerSecond memory_bandwidth = 0;
  Bytes memory = 0;
  double compute_efficiency = 1.0;   // achieved fraction of peak_flops
  double memory_efficiency = 1.0;    // achieved fraction of memory_bandwidth
  Seconds layer_overhead = 0;        // fixed cost per layer and pass (kernel launches)
  Bytes runtime_memory = 0;          // framework memory per worker on the device

  bool isGpu() const { return kind == "gpu"; }
  // The name pricing catalogs know this accelerator by ("" for CPUs).
  std::string accelerator() const { return isGpu() ? name : ""; }
};

// A built-in name ("k80") or a YAML file path.
Result<DeviceSpec> loadDevice(const std::string& nameOrPath);
Result<DeviceSpec> deviceFromYaml(const std::string& text, const std::string& origin);
std::string deviceToYaml(const DeviceSpec& device);

}  // namespace hydrozoa::profile
