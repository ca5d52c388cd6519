// Device specs for predicted profiles: peak FLOP/s, memory bandwidth and
// size, the fractions of peak that training achieves, and per layer kind a
// factor on that roofline time. Built in (data/devices/*.yaml): k80, v100,
// a100, h100; "cpu" is this machine, calibrated by a measurement
// (profile/calibrate.h); any YAML file of the same shape.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"

namespace hydrozoa::model {
struct LayerAnalysis;
}

namespace hydrozoa::profile {

// How much longer than its roofline a layer of one kind takes, per pass (the
// fixed per-layer overhead and fresh pages come on top: profile/predict.cc).
// At microbatch m the factor is `forward + forward_small / m`: small
// microbatches use the vector units worse (NOTE [Calibration kernels]).
struct KindFactors {
  double forward = 1.0;
  double backward = 1.0;
  double forward_small = 0;
  double backward_small = 0;

  double forwardAt(std::int64_t microbatch) const;
  double backwardAt(std::int64_t microbatch) const;
};

// What a layer's factors are kept under: its kind, except that a convolution
// over the input image (four channels or fewer) is an "input_conv": its
// kernel runs several times slower per FLOP than a convolution deeper in.
std::string factorKind(const model::LayerAnalysis& layer);
// model::layerKinds() and "input_conv".
const std::vector<std::string>& factorKinds();

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
  // Writing memory the process has not touched before: on a CPU every tensor
  // above glibc's mmap threshold is fresh pages each time it is allocated
  // (NOTE [glibc malloc and tensor-sized allocations]). 0: not modelled, as on
  // GPUs, whose caching allocator keeps its blocks.
  BytesPerSecond fresh_memory_bandwidth = 0;
  std::map<std::string, KindFactors> kinds;  // by factorKind(); absent: 1

  KindFactors factors(const std::string& layerKind) const;

  bool isGpu() const { return kind == "gpu"; }
  // The name pricing catalogs know this accelerator by ("" for CPUs).
  std::string accelerator() const { return isGpu() ? name : ""; }
};

// A built-in name ("k80") or a YAML file path.
Result<DeviceSpec> loadDevice(const std::string& nameOrPath);
Result<DeviceSpec> deviceFromYaml(const std::string& text, const std::string& origin);
std::string deviceToYaml(const DeviceSpec& device);
// "conv ×2.10 / ×0.85, linear ×1.95 / ×1.80": forward / backward at
// microbatch 8, or "none".
std::string describeKindFactors(const DeviceSpec& device);

}  // namespace hydrozoa::profile
