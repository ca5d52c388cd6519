// Profile: what the planner knows about a model on a device, as a plain value
// with a versioned JSON form (schema "hydrozoa.profile/1", docs/formats.md).
//
// Per layer, fixed: parameter and optimizer-state bytes and the time of the
// optimizer's update. Per layer and per microbatch size: forward and
// backward milliseconds, the bytes a stage boundary after the layer sends,
// the bytes kept for backward, and transient workspace. A profile is measured (src/profile/measure.h), predicted from a
// device spec (predict.h), or imported from PipeDream's graph.txt
// (pipedream.h); the planner treats all three alike.
//
// Invariants after validation (loadProfile/profileFromJson enforce them):
// 1 to 2^20 layers (kLayersRange); at least one measurement; microbatch sizes
// unique, ascending and in kSamplesRange; every measurement has one entry per
// layer; every size from 0 to kMaxBytes, and so are the model's parameters and
// optimizer state together and each measurement's stashed and workspace bytes
// together; times (the updates' too) from 0 to 1e12 ms; stashed_bytes >= output_bytes
// (core/limits.h, profile/field_checks.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"
#include "core/units.h"

namespace hydrozoa::profile {

inline constexpr const char* kProfileSchema = "hydrozoa.profile/1";

struct LayerInfo {
  std::string name;
  std::string kind;                 // "conv", "transformer", "pipedream", "script", ...
  Bytes parameter_bytes = 0;        // weights (gradients take as much again)
  Bytes optimizer_state_bytes = 0;  // e.g. momentum: = parameter_bytes; Adam: 2x
  // The optimizer's update of this layer's parameters once per iteration, the
  // same at every microbatch size (0 for a layer without parameters, and in
  // profiles from before it was measured).
  double optimizer_ms = 0;
  // Copying this layer's parameters and optimizer state aside, as a worker
  // of a replicated pipeline does before each update so that recovery can
  // go back a step (docs/recovery.md); 0 in profiles from before it was
  // measured (NOTE [Timing the update], measure.cc).
  double snapshot_ms = 0;
};

struct LayerCost {
  double forward_ms = 0;
  double backward_ms = 0;
  Bytes output_bytes = 0;     // crosses a stage boundary placed after this layer
  Bytes stashed_bytes = 0;    // kept from forward until backward (includes the output)
  Bytes workspace_bytes = 0;  // transient peak on top of what is stashed
  // The same passes with none of their tensors in the core's own caches, as
  // they run after another chunk's passes under interleaving (NOTE [Passes
  // after another chunk's], measure.cc); 0 where not measured (profiles from
  // before, predicted ones, PipeDream's).
  double cold_forward_ms = 0;
  double cold_backward_ms = 0;
};

// All layers at one microbatch size.
struct Measurement {
  std::int64_t microbatch_size = 0;
  Bytes input_bytes = 0;  // one microbatch of model input (what stage 0 holds per microbatch)
  // What passes of this size leave in the process beyond what the smallest
  // size's do (Profile::runtime_bytes): the allocator's heap grows with the
  // tensors it has held (NOTE [A worker process's own memory], measure.cc).
  // 0 in profiles from before it was measured.
  Bytes heap_bytes = 0;
  std::vector<LayerCost> layers;
};

// The CPU a pipeline's message of `bytes` takes on either side, in seconds
// (NOTE [What a message costs the cores], profile/network.cc).
struct MessageCpu {
  Bytes bytes = 0;
  Seconds send = 0;          // the thread that sends it: a stage's compute thread
  Seconds send_threads = 0;  // the sender's other threads (the channel's, Gloo's)
  Seconds post = 0;          // the thread that posts the receive: the receiving stage's compute thread
  Seconds receive = 0;       // the receiver's other threads (reading it in, handing it over)
};

// Measured at a few sizes, ascending: between two, interpolated linearly;
// below the smallest, the smallest's; past the largest, along the last
// segment's slope (never below the largest's).
struct MessageCpuTable {
  std::vector<MessageCpu> rows;
  MessageCpu at(Bytes n) const;
};

// Network figures between two workers and the ring-allreduce fit of docs/plan.md ("Strategies").
// How long a message between two stages takes from its send to the end of
// the receiver's wait for it, while the sender computes its next pass and
// the receiver waits (NOTE [A message's delivery on busy cores], network.cc):
// over the probe's messages of `bytes`, in seconds. And the CPU a worker's
// threads other than the compute thread took per message it sent and one it
// received, with messages one at a time (MessageCpuTable's rows time them
// in bursts).
struct MessageDelivery {
  Bytes bytes = 0;
  Seconds mean = 0, median = 0, p90 = 0;
  Seconds helper_cpu = 0;
};

struct NetworkProfile {
  BytesPerSecond bandwidth = 0;  // point-to-point
  Seconds latency = 0;           // point-to-point, small message, one way
  double alpha = 0;              // seconds per byte per round, beyond bytes/bandwidth
  Seconds beta = 0;              // seconds per round
  int allreduce_workers = 0;     // group size the fit was measured with
  double fit_r2 = 0;             // goodness of the linear fit
  // The same processes' allreduce through shared memory (runtime/comm/
  // shared_memory.h), the way replicas on one host sum: seconds =
  // seconds_per_byte · n + seconds_per_allreduce, on the calling thread.
  // Absent in profiles from before it existed, and where /dev/shm could not
  // hold the probe's segment.
  struct SharedMemoryFit {
    double seconds_per_byte = 0;
    Seconds seconds_per_allreduce = 0;
    double r2 = 0;
  };
  std::optional<SharedMemoryFit> shared_memory;
  // Absent in profiles from before it was measured.
  std::optional<MessageCpuTable> messages;
  // Likewise.
  std::optional<MessageDelivery> delivery;
};

// How much slower one compute thread runs while every core of its host
// computes than alone (NOTE [Compute beside busy cores], plan/cost/
// pipeline.cc), measured by the profiler with the model's passes on every
// usable core at once (measure.cc). Absent in profiles from before it
// existed, measured on one core, on more than 64 or with more than one
// thread, where the copies would not fit a quarter of memory, predicted,
// and PipeDream's.
struct CorunProfile {
  int cores = 0;                     // the cores that computed at once, at least 2
  std::int64_t microbatch_size = 0;  // of the timed passes
  double slowdown = 1;               // a pass's median time with them all busy over alone, at least 1
};

struct Profile {
  std::string model;                                          // "resnet34", a TorchScript path, or graph.txt's name
  std::vector<std::pair<std::string, std::string>> options;  // resolved model options
  std::string source;                                         // "measured", "predicted", "pipedream"
  std::string device;                                         // "cpu", "k80", ... ("" when unknown)
  std::string device_kind;                                    // "cpu", "gpu" or "" when unknown
  std::optional<Bytes> device_memory;                         // memory of the profiled device, when known
  int threads = 0;                                            // compute threads when measured (0: n/a)
  std::string optimizer = "sgd_momentum";
  Bytes runtime_bytes = 0;  // fixed memory of a worker process (framework, buffers)
  std::vector<LayerInfo> layers;
  std::vector<Measurement> measurements;  // ascending microbatch_size
  std::optional<NetworkProfile> network;
  std::optional<CorunProfile> corun;

  size_t numLayers() const { return layers.size(); }
  // nullptr when that microbatch size was not profiled.
  const Measurement* at(std::int64_t microbatch_size) const;
  std::vector<std::int64_t> microbatchSizes() const;
};

Json profileToJson(const Profile& profile);
// `origin` names the source in errors (usually the file path).
Result<Profile> profileFromJson(const Json& j, const std::string& origin);

// Reads a profile file: hydrozoa JSON, or PipeDream's graph.txt (recognised
// by content, not by name). `graphBatchSize` is the microbatch size a
// graph.txt was profiled at (PipeDream does not record it).
Result<Profile> loadProfile(const std::string& path, std::int64_t graphBatchSize = 1);
// The same for a file's text; errors name `origin`.
Result<Profile> parseProfile(const std::string& text, const std::string& origin, std::int64_t graphBatchSize = 1);
Status saveProfile(const Profile& profile, const std::string& path);

// Re-checks the invariants above; used after building a profile in code.
Status validateProfile(const Profile& profile, const std::string& origin);

// Bytes of optimizer state per parameter byte: sgd 0, sgd_momentum 1, adam 2.
Result<double> optimizerStateFactor(const std::string& optimizer);

}  // namespace hydrozoa::profile
