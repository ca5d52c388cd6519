// The manifest of a complete checkpoint (checkpoints/step-N/manifest.json,
// cluster/run_dir.h): where training stood when every stage had saved its
// layers (runtime/checkpoint.h). The coordinator writes it when it finalizes
// a checkpoint and reads it back on --resume: the step to go on from, the
// epoch and scaling record it belongs to, and the time, samples and money
// spent so far, which the resumed run goes on counting from.
//
// Reading validates every field against an explicit range (core/limits.h);
// a value outside it is one error naming the file, the field, the value and
// the range. Only "step" is required: the other fields were added over time.
//
// Pure C++ (no libtorch). Thread-safety: values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/files.h"
#include "core/status.h"
#include "core/units.h"

namespace hydrozoa::runtime {

struct CheckpointManifest {
  std::int64_t step = 0;                        // global steps completed
  std::int64_t epoch = 0;                       // the epoch `step` is in, 0-based
  std::int64_t step_in_epoch = 0;
  std::optional<std::int64_t> steps_per_epoch;  // at the replicas of that epoch
  Json scaling;                                 // cluster::EpochSchedule::toJson(), or null
  std::optional<std::int64_t> layers;           // of the model
  std::string model;
  std::optional<int> data_parallel, pipeline_stages, tensor_parallel;  // of the plan it was taken under
  Seconds training_seconds = 0;
  std::int64_t samples = 0;  // trained on so far, every replica together
  Usd cost_usd = 0;
};

Json checkpointManifestToJson(const CheckpointManifest& manifest);
// `origin` (usually the path) names the file in errors.
Result<CheckpointManifest> checkpointManifestFromJson(const Json& j, const std::string& origin);
Result<CheckpointManifest> parseCheckpointManifest(const std::string& text, const std::string& origin);

}  // namespace hydrozoa::runtime
