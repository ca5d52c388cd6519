#include "runtime/checkpoint_manifest.h"

#include <fmt/format.h>

#include "core/limits.h"

namespace hydrozoa::runtime {
namespace {

// Step counters start at 0 (a checkpoint before the first step, the first
// epoch, its first step).
constexpr Range kStepIndexRange{0, kStepsRange.max};
// Samples so far: at most kStepsRange steps of kSamplesRange each would not
// fit; 2^62 is more than any run trains on.
constexpr Range kSamplesSeenRange{0, std::int64_t{1} << 62};
// As core/units.h's durations.
constexpr double kMaxSeconds = 1e9;
// Dollars spent by one run.
constexpr double kMaxCostUsd = 1e12;

}  // namespace

Json checkpointManifestToJson(const CheckpointManifest& m) {
  Json j = {{"step", m.step},
            {"epoch", m.epoch},
            {"step_in_epoch", m.step_in_epoch},
            {"model", m.model},
            {"training_seconds", m.training_seconds},
            {"samples", m.samples},
            {"cost_usd", m.cost_usd}};
  if (m.steps_per_epoch) j["steps_per_epoch"] = *m.steps_per_epoch;
  if (!m.scaling.is_null()) j["scaling"] = m.scaling;
  if (m.layers) j["layers"] = *m.layers;
  if (m.data_parallel || m.pipeline_stages) {
    j["plan"] = Json::object();
    if (m.data_parallel) j["plan"]["data_parallel"] = *m.data_parallel;
    if (m.pipeline_stages) j["plan"]["pipeline_stages"] = *m.pipeline_stages;
    if (m.tensor_parallel) j["plan"]["tensor_parallel"] = *m.tensor_parallel;
  }
  return j;
}

Result<CheckpointManifest> checkpointManifestFromJson(const Json& j, const std::string& origin) {
  CheckpointManifest m;
  ObjectReader r(j, origin);
  m.step = r.count("step", kStepIndexRange);
  m.epoch = r.optCount("epoch", kStepIndexRange).value_or(0);
  m.step_in_epoch = r.optCount("step_in_epoch", kStepIndexRange).value_or(0);
  m.steps_per_epoch = r.optCount("steps_per_epoch", kStepsRange);
  if (const Json* scaling = r.raw("scaling")) {
    if (!scaling->is_object()) {
      r.fail("scaling", "expected an object (the scaling record), got " + describeJson(*scaling));
    } else {
      m.scaling = *scaling;
    }
  }
  m.layers = r.optCount("layers", kLayersRange);
  m.model = r.optString("model").value_or("");
  if (const Json* plan = r.raw("plan")) {
    ObjectReader p(*plan, r.child("plan"));
    if (auto a = p.optCount("data_parallel", kWorkersRange)) m.data_parallel = static_cast<int>(*a);
    if (auto b = p.optCount("pipeline_stages", kWorkersRange)) m.pipeline_stages = static_cast<int>(*b);
    if (auto t = p.optCount("tensor_parallel", kWorkersRange)) m.tensor_parallel = static_cast<int>(*t);
    r.adopt(p.status());
  }
  if (r.has("training_seconds")) {
    m.training_seconds = r.number("training_seconds");
    if (r.ok() && !(m.training_seconds >= 0 && m.training_seconds <= kMaxSeconds)) {
      r.fail("training_seconds", fmt::format("{} is out of range; expected seconds from 0 to {}", m.training_seconds,
                                             formatCount(kMaxSeconds)));
    }
  }
  m.samples = r.optCount("samples", kSamplesSeenRange).value_or(0);
  if (r.has("cost_usd")) {
    m.cost_usd = r.number("cost_usd");
    if (r.ok() && !(m.cost_usd >= 0 && m.cost_usd <= kMaxCostUsd)) {
      r.fail("cost_usd",
             fmt::format("{} is out of range; expected dollars from 0 to {}", m.cost_usd, formatCount(kMaxCostUsd)));
    }
  }
  HZ_RETURN_IF_ERROR(r.status());
  return m;
}

Result<CheckpointManifest> parseCheckpointManifest(const std::string& text, const std::string& origin) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return parseError(origin + ": the file is empty");
  HZ_ASSIGN_OR_RETURN(Json j, parseJson(text, origin));
  return checkpointManifestFromJson(j, origin);
}

}  // namespace hydrozoa::runtime
