// The parsers of every input format as the program calls them, wrapped for
// the mutation tests (mutation_test.cc) and the libFuzzer targets (fuzz/):
// text in, an Outcome out. Each also checks what an accepted input must
// allow: its writer's output reads back the same, and the functions that
// read it first (the plan table, right-sizing on a catalog, the scaling
// record of a checkpoint manifest) run on it.
//
// Header-only; tests and fuzz targets only.
#pragma once

#include <string>
#include <vector>

#include "cluster/job_spec.h"
#include "cluster/scaling/epochs.h"
#include "core/files.h"
#include "plan/plan.h"
#include "plan/resources.h"
#include "profile/device.h"
#include "profile/pipedream.h"
#include "profile/profile.h"
#include "runtime/checkpoint_manifest.h"

namespace hydrozoa::fuzz {

// What one parse did. `broken` names a property that failed after the parser
// accepted the input (a round trip, a consumer).
struct Outcome {
  Status status;
  std::string broken;
};

using Parser = Outcome (*)(const std::string& text, const std::string& origin);

// An accepted value must read back through its writer as it was.
template <class T, class ToJson, class FromJson>
Outcome readsBack(const T& value, ToJson toJson, FromJson fromJson, const std::string& origin) {
  const Json j = toJson(value);
  auto back = fromJson(j, origin);
  if (!back.ok()) return {Status(), "does not read back: " + back.status().message()};
  if (toJson(*back) != j) return {Status(), "reads back different"};
  return {};
}

inline Outcome parseGraph(const std::string& text, const std::string& origin) {
  auto p = profile::importPipeDreamGraph(text, origin, 32);
  if (!p.ok()) return {p.status(), ""};
  return readsBack(*p, profile::profileToJson, profile::profileFromJson, origin);
}

inline Outcome parseProfileJson(const std::string& text, const std::string& origin) {
  auto p = profile::parseProfile(text, origin);
  if (!p.ok()) return {p.status(), ""};
  return readsBack(*p, profile::profileToJson, profile::profileFromJson, origin);
}

inline Outcome parsePlanJson(const std::string& text, const std::string& origin) {
  auto p = plan::parsePlan(text, origin);
  if (!p.ok()) return {p.status(), ""};
  (void)plan::renderPlanTable(*p);
  return readsBack(*p, plan::planToJson, plan::planFromJson, origin);
}

inline Outcome parseJobYaml(const std::string& text, const std::string& origin) {
  auto j = parseYaml(text, origin);
  if (!j.ok()) return {j.status(), ""};
  if (j->is_null()) return {parseError(origin + ": the file is empty"), ""};
  auto spec = cluster::parseJobSpec(*j, origin);
  if (!spec.ok()) return {spec.status(), ""};
  auto back = cluster::parseJobSpec(cluster::jobSpecToJson(*spec), origin);
  if (!back.ok()) return {Status(), "jobSpecToJson does not read back: " + back.status().message()};
  return {};
}

inline Outcome parseManifest(const std::string& text, const std::string& origin) {
  auto m = runtime::parseCheckpointManifest(text, origin);
  if (!m.ok()) return {m.status(), ""};
  return readsBack(*m, runtime::checkpointManifestToJson, runtime::checkpointManifestFromJson, origin);
}

// The scaling record inside a manifest, as --resume reads it
// (cluster/scaling/epochs.h): only what the manifest parser accepted.
inline Outcome parseScalingRecord(const std::string& text, const std::string& origin) {
  auto m = runtime::parseCheckpointManifest(text, origin);
  if (!m.ok() || !m->scaling.is_object()) return {};
  auto s = cluster::EpochSchedule::fromJson(m->scaling, 60000, false);
  // fromJson knows no file name; the coordinator's caller adds it.
  if (!s.ok()) return {parseError(origin + ": scaling: " + s.status().message()), ""};
  return {};
}

inline Outcome parseCatalog(const std::string& text, const std::string& origin) {
  auto c = plan::catalogFromYaml(text, origin);
  if (!c.ok()) return {c.status(), ""};
  // What the planner asks of a catalog first.
  std::vector<plan::WorkerSpec> specs;
  for (const char* accelerator : {"", "k80", "v100"}) {
    (void)plan::platformMemoryLimit(*c, accelerator);
    for (Bytes memory : {Bytes{0}, 3 * kGB, 1000 * kGB, kMaxBytes}) {
      specs.push_back(plan::rightSize(*c, {memory, memory / 4, accelerator}));
    }
  }
  (void)plan::totalCostPerHour(*c, specs);
  return {};
}

inline Outcome parseDevice(const std::string& text, const std::string& origin) {
  auto d = profile::deviceFromYaml(text, origin);
  if (!d.ok()) return {d.status(), ""};
  auto back = profile::deviceFromYaml(profile::deviceToYaml(*d), origin);
  if (!back.ok()) return {Status(), "deviceToYaml does not read back: " + back.status().message()};
  return {};
}

// What is wrong with an outcome for input from `origin`; "" when nothing:
// an accepted input must pass its checks, a refused one must say why in one
// line that names `origin` (a newline, carriage return or NUL from the file
// would break it; printable() in profile/field_checks.h escapes them).
inline std::string violation(const Outcome& o, const std::string& origin) {
  if (!o.broken.empty()) return "accepted, but " + o.broken;
  if (o.status.ok()) return "";
  const std::string& m = o.status.message();
  const bool oneLine = m.find_first_of(std::string("\n\r\0", 3)) == std::string::npos;
  if (m.find(origin) == std::string::npos || !oneLine) {
    return "the error does not name " + origin + " in one line: " +
           Json(m).dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  return "";
}

}  // namespace hydrozoa::fuzz
