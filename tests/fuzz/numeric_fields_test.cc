// Every numeric field of the profile, plan, checkpoint manifest, catalog,
// device and graph.txt formats, set in turn to each of {0, -1, 2^31, 2^32,
// 2^63-1, 1e30, NaN, "abc"} in an otherwise valid file: the parser accepts
// exactly the values in the field's range (the `accepts` column) and refuses
// the others with one line that names the field and what it expected.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

#include "core/files.h"
#include "core/limits.h"
#include "plan/plan.h"
#include "plan/resources.h"
#include "profile/device.h"
#include "profile/pipedream.h"
#include "profile/profile.h"
#include "runtime/checkpoint_manifest.h"

namespace hydrozoa::fuzz {
namespace {

enum Value { k0, kMinus1, k2p31, k2p32, k2p63, k1e30, kNan, kAbc };
constexpr Value kValues[] = {k0, kMinus1, k2p31, k2p32, k2p63, k1e30, kNan, kAbc};
// As a file spells them (graph.txt).
constexpr const char* kText[] = {"0", "-1", "2147483648", "4294967296", "9223372036854775807", "1e30", "nan", "abc"};

Json asJson(Value v) {
  switch (v) {
    case k0: return 0;
    case kMinus1: return -1;
    case k2p31: return std::int64_t{1} << 31;
    case k2p32: return std::int64_t{1} << 32;
    case k2p63: return std::numeric_limits<std::int64_t>::max();
    case k1e30: return 1e30;
    case kNan: return std::numeric_limits<double>::quiet_NaN();
    case kAbc: return "abc";
  }
  return nullptr;
}

using Accepts = std::set<Value>;
const Accepts kNone{};                                  // counts of workers, samples, layers; vCPUs; fractions above 0
const Accepts kZero{k0};                                // prices, fractions, "0: none" counts
const Accepts kNonNegative{k0, k2p31, k2p32};           // sizes, seconds, step indices
const Accepts kPositive{k2p31, k2p32};                  // sizes above 0, bandwidths, FLOP/s
const Accepts kSigned{k0, kMinus1};                     // the allreduce fit's slope and r²
const Accepts kSeconds{k0};                             // durations: at most 1e9 s

struct Field {
  std::string file;     // a fixture under the source tree
  std::string pointer;  // JSON pointer; graph.txt: "node4/forward_compute_time" or "node6/activation_size[0]"
  Accepts accepts;
};

std::string sourceFile(const std::string& relative) { return std::string(HYDROZOA_SOURCE_DIR) + "/" + relative; }

// clang-format off
const std::vector<Field> kFields = {
    // profile JSON
    {"tests/fixtures/profile_cnn_k80.json", "/device/memory_bytes", kPositive},
    {"tests/fixtures/profile_cnn_k80.json", "/device/threads", kNone},
    {"tests/fixtures/profile_cnn_k80.json", "/runtime_bytes", kNonNegative},
    {"tests/fixtures/profile_cnn_k80.json", "/layers/1/parameter_bytes", kNonNegative},
    {"tests/fixtures/profile_cnn_k80.json", "/layers/1/optimizer_state_bytes", kNonNegative},
    {"tests/fixtures/profile_cnn_k80.json", "/measurements/0/microbatch_size", kNone},
    {"tests/fixtures/profile_cnn_k80.json", "/measurements/3/microbatch_size", kNone},
    {"tests/fixtures/profile_cnn_k80.json", "/measurements/1/input_bytes", kNonNegative},
    {"tests/fixtures/profile_cnn_k80.json", "/measurements/1/layers/2/forward_ms", kNonNegative},
    {"tests/fixtures/profile_cnn_k80.json", "/measurements/1/layers/2/backward_ms", kNonNegative},
    {"tests/fixtures/profile_cnn_k80.json", "/measurements/1/layers/2/output_bytes", kZero},  // above stashed_bytes
    {"tests/fixtures/profile_cnn_k80.json", "/measurements/1/layers/2/stashed_bytes", kPositive},  // below output_bytes
    {"tests/fixtures/profile_cnn_k80.json", "/measurements/1/layers/2/workspace_bytes", kNonNegative},
    {"tests/fixtures/profile_cnn_k80.json", "/measurements/1/layers/2/cold_forward_ms", kNonNegative},
    {"tests/fixtures/profile_cnn_k80.json", "/measurements/1/layers/2/cold_backward_ms", kNonNegative},
    {"tests/fixtures/profile_cnn_k80.json", "/network/bandwidth_bytes_per_s", kPositive},
    {"tests/fixtures/profile_cnn_k80.json", "/network/latency_s", kSeconds},
    {"tests/fixtures/profile_cnn_k80.json", "/network/allreduce/alpha_s_per_byte", kSigned},
    {"tests/fixtures/profile_cnn_k80.json", "/network/allreduce/beta_s", kSeconds},
    {"tests/fixtures/profile_cnn_k80.json", "/network/allreduce/workers", kNone},
    {"tests/fixtures/profile_cnn_k80.json", "/network/allreduce/r2", kSigned},
    {"tests/fixtures/profile_cnn_k80.json", "/network/shared_memory_allreduce/s_per_byte", kZero},
    {"tests/fixtures/profile_cnn_k80.json", "/network/shared_memory_allreduce/s_per_allreduce", kSeconds},
    {"tests/fixtures/profile_cnn_k80.json", "/network/shared_memory_allreduce/r2", kSigned},
    {"tests/fixtures/profile_cnn_k80.json", "/network/messages/0/bytes", kPositive},
    {"tests/fixtures/profile_cnn_k80.json", "/network/messages/0/send_s", kSeconds},
    {"tests/fixtures/profile_cnn_k80.json", "/network/messages/0/send_threads_s", kSeconds},
    {"tests/fixtures/profile_cnn_k80.json", "/network/messages/0/post_s", kSeconds},
    {"tests/fixtures/profile_cnn_k80.json", "/network/messages/0/receive_s", kSeconds},
    // plan.json (1 × 4 stages of one layer each, 8 microbatches of 4)
    {"tests/fixtures/plan_cnn_k80.json", "/strategy/data_parallel", kNone},
    {"tests/fixtures/plan_cnn_k80.json", "/strategy/pipeline_stages", kNone},
    {"tests/fixtures/plan_cnn_k80.json", "/microbatch_size", kNone},
    {"tests/fixtures/plan_cnn_k80.json", "/num_microbatches", kNone},
    {"tests/fixtures/plan_cnn_k80.json", "/global_batch", kNone},
    {"tests/fixtures/plan_cnn_k80.json", "/stages/1/first_layer", kNone},
    {"tests/fixtures/plan_cnn_k80.json", "/stages/1/last_layer", kNone},
    {"tests/fixtures/plan_cnn_k80.json", "/stages/3/last_layer", kNone},
    {"tests/fixtures/plan_cnn_k80.json", "/stages/1/memory_bytes", kNonNegative},
    {"tests/fixtures/plan_cnn_k80.json", "/stages/1/parameter_bytes", kNonNegative},
    {"tests/fixtures/plan_cnn_k80.json", "/stages/1/forward_seconds", kSeconds},
    {"tests/fixtures/plan_cnn_k80.json", "/stages/1/backward_seconds", kSeconds},
    {"tests/fixtures/plan_cnn_k80.json", "/stages/1/allreduce_seconds", kSeconds},
    {"tests/fixtures/plan_cnn_k80.json", "/stages/1/worker/vcpus", kZero},
    {"tests/fixtures/plan_cnn_k80.json", "/stages/1/worker/memory_bytes", kNonNegative},
    {"tests/fixtures/plan_cnn_k80.json", "/stages/1/worker/cost_per_hour", kZero},
    {"tests/fixtures/plan_cnn_k80.json", "/predicted/iteration_seconds", kSeconds},
    {"tests/fixtures/plan_cnn_k80.json", "/predicted/pipeline_seconds", kSeconds},
    {"tests/fixtures/plan_cnn_k80.json", "/predicted/allreduce_seconds", kSeconds},
    {"tests/fixtures/plan_cnn_k80.json", "/predicted/partition_gap_seconds", kSeconds},
    {"tests/fixtures/plan_cnn_k80.json", "/predicted/samples_per_second", kNonNegative},
    {"tests/fixtures/plan_cnn_k80.json", "/predicted/samples_per_dollar", kNonNegative},
    {"tests/fixtures/plan_cnn_k80.json", "/predicted/cost_per_hour", kZero},
    {"tests/fixtures/plan_cnn_k80.json", "/predicted/bubble_fraction", kZero},
    {"tests/fixtures/plan_cnn_k80.json", "/inputs/workers", kNone},
    {"tests/fixtures/plan_cnn_k80.json", "/inputs/memory_limit_bytes", kPositive},
    {"tests/fixtures/plan_cnn_k80.json", "/inputs/bandwidth_bytes_per_s", kNonNegative},
    {"tests/fixtures/plan_cnn_k80.json", "/inputs/allreduce_alpha_s_per_byte", kSigned},
    {"tests/fixtures/plan_cnn_k80.json", "/inputs/allreduce_beta_s", kSeconds},
    {"tests/fixtures/plan_cnn_k80.json", "/inputs/latency_s", kSeconds},
    {"tests/fixtures/plan_cnn_k80.json", "/inputs/shared_memory_allreduce/s_per_byte", kZero},
    {"tests/fixtures/plan_cnn_k80.json", "/inputs/shared_memory_allreduce/s_per_allreduce", kSeconds},
    {"tests/fixtures/plan_cnn_k80.json", "/inputs/shared_memory_allreduce/replicas", kNone},
    {"tests/fixtures/plan_cnn_k80.json", "/inputs/global_batch", kNone},
    {"tests/fixtures/plan_cnn_k80.json", "/alternatives/0/data_parallel", kNone},
    {"tests/fixtures/plan_cnn_k80.json", "/alternatives/0/pipeline_stages", kNone},
    {"tests/fixtures/plan_cnn_k80.json", "/alternatives/0/microbatch_size", kZero},
    {"tests/fixtures/plan_cnn_k80.json", "/alternatives/0/num_microbatches", kZero},
    {"tests/fixtures/plan_cnn_k80.json", "/alternatives/0/iteration_seconds", kSeconds},
    {"tests/fixtures/plan_cnn_k80.json", "/alternatives/0/samples_per_second", kNonNegative},
    {"tests/fixtures/plan_cnn_k80.json", "/alternatives/0/samples_per_dollar", kNonNegative},
    {"tests/fixtures/plan_cnn_k80.json", "/alternatives/0/cost_per_hour", kZero},
    {"tests/fixtures/plan_cnn_k80.json", "/alternatives/0/max_worker_memory_bytes", kNonNegative},
    // checkpoint manifest
    {"tests/fixtures/checkpoint_manifest.json", "/step", kNonNegative},
    {"tests/fixtures/checkpoint_manifest.json", "/epoch", kNonNegative},
    {"tests/fixtures/checkpoint_manifest.json", "/step_in_epoch", kNonNegative},
    {"tests/fixtures/checkpoint_manifest.json", "/steps_per_epoch", kPositive},
    {"tests/fixtures/checkpoint_manifest.json", "/layers", kNone},
    {"tests/fixtures/checkpoint_manifest.json", "/plan/data_parallel", kNone},
    {"tests/fixtures/checkpoint_manifest.json", "/plan/pipeline_stages", kNone},
    {"tests/fixtures/checkpoint_manifest.json", "/training_seconds", kSeconds},
    {"tests/fixtures/checkpoint_manifest.json", "/samples", kNonNegative},
    {"tests/fixtures/checkpoint_manifest.json", "/cost_usd", kNonNegative},
    // pricing catalogs
    {"data/pricing/aci.yaml", "/network_bandwidth", kPositive},
    {"data/pricing/aci.yaml", "/memory_increment", kPositive},
    {"data/pricing/aci.yaml", "/memory_margin", kZero},
    {"data/pricing/aci.yaml", "/cpu/vcpus", kNone},
    {"data/pricing/aci.yaml", "/cpu/max_memory", kPositive},
    {"data/pricing/aci.yaml", "/cpu/vcpu_per_hour", kZero},
    {"data/pricing/aci.yaml", "/cpu/memory_gb_per_hour", kZero},
    {"data/pricing/aci.yaml", "/gpu/host_memory", kNonNegative},
    {"data/pricing/aci.yaml", "/gpu/accelerators/k80", kZero},
    {"data/pricing/lambda.yaml", "/min_memory", kNonNegative},
    {"data/pricing/lambda.yaml", "/max_memory", kPositive},
    {"data/pricing/lambda.yaml", "/memory_gb_per_hour", kZero},
    {"data/pricing/lambda.yaml", "/vcpus_per_gb", kNone},
    {"data/pricing/lambda.yaml", "/storage_latency", kSeconds},
    {"data/pricing/aws-vm.yaml", "/instances/0/accelerators", kNone},
    {"data/pricing/aws-vm.yaml", "/instances/0/vcpus", kNone},
    {"data/pricing/aws-vm.yaml", "/instances/0/memory", kPositive},
    {"data/pricing/aws-vm.yaml", "/instances/0/per_hour", kNone},
    {"data/pricing/gcp-vm.yaml", "/instances/0/spot_per_hour", kNone},
    // device specs
    {"data/devices/k80.yaml", "/peak_flops", kPositive},
    {"data/devices/k80.yaml", "/memory_bandwidth", kPositive},
    {"data/devices/k80.yaml", "/memory", kPositive},
    {"data/devices/k80.yaml", "/compute_efficiency", kNone},
    {"data/devices/k80.yaml", "/memory_efficiency", kNone},
    {"data/devices/k80.yaml", "/layer_overhead", kZero},
    {"data/devices/k80.yaml", "/runtime_memory", kNonNegative},
    {"tests/fixtures/device_cpu.yaml", "/fresh_memory_bandwidth", kPositive},
    {"tests/fixtures/device_cpu.yaml", "/kinds/conv/forward", kNone},
    {"tests/fixtures/device_cpu.yaml", "/kinds/transformer/backward", kNone},
    {"tests/fixtures/device_cpu.yaml", "/kinds/linear/forward_small", kZero},
    {"tests/fixtures/device_cpu.yaml", "/kinds/input_conv/forward", kNone},
    // PipeDream graph.txt
    {"tests/fixtures/pipedream_small.txt", "node4/forward_compute_time", kNonNegative},
    {"tests/fixtures/pipedream_small.txt", "node4/backward_compute_time", kNonNegative},
    {"tests/fixtures/pipedream_small.txt", "node4/activation_size", kNonNegative},
    {"tests/fixtures/pipedream_small.txt", "node4/parameter_size", kNonNegative},
    {"tests/fixtures/pipedream_small.txt", "node6/activation_size[0]", kNonNegative},
};
// clang-format on

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// graph.txt: the line of node `node`, its `key=` value (or its list's first
// entry) replaced by `text`.
std::string editGraph(std::string graph, const std::string& pointer, const std::string& text) {
  const std::string node = pointer.substr(0, pointer.find('/'));
  std::string key = pointer.substr(pointer.find('/') + 1);
  const bool listEntry = endsWith(key, "[0]");
  if (listEntry) key.resize(key.size() - 3);
  const size_t line = graph.find(node + " -- ");
  const size_t at = graph.find(key + "=", line);
  EXPECT_NE(at, std::string::npos) << pointer;
  const size_t begin = at + key.size() + 1 + (listEntry ? 1 : 0);
  const size_t end = graph.find_first_of(listEntry ? ";]" : ",\n", begin);
  return graph.replace(begin, end - begin, text);
}

// Parses the fixture with `pointer` set to `v`; the message on failure.
Status parseWith(const Field& f, Value v) {
  const std::string path = sourceFile(f.file);
  auto text = readTextFile(path);
  if (!text.ok()) return text.status();
  const std::string name = f.file.substr(f.file.rfind('/') + 1);
  if (endsWith(f.file, ".txt")) {
    return profile::importPipeDreamGraph(editGraph(*text, f.pointer, kText[v]), name, 32).status();
  }
  auto j = endsWith(f.file, ".json") ? parseJson(*text, path) : parseYaml(*text, path);
  if (!j.ok()) return j.status();
  const Json::json_pointer pointer(f.pointer);
  EXPECT_TRUE(j->contains(pointer)) << f.file << " has no " << f.pointer;
  (*j)[pointer] = asJson(v);
  if (f.file.find("profile") != std::string::npos) return profile::profileFromJson(*j, name).status();
  if (f.file.find("plan") != std::string::npos) return plan::planFromJson(*j, name).status();
  if (f.file.find("manifest") != std::string::npos) return runtime::checkpointManifestFromJson(*j, name).status();
  // YAML: written back as text the way a user would (NaN as .nan).
  if (f.file.find("pricing") != std::string::npos) return plan::catalogFromYaml(toYaml(*j), name).status();
  return profile::deviceFromYaml(toYaml(*j), name).status();
}

TEST(NumericFields, FixturesParse) {
  for (const char* file : {"tests/fixtures/profile_cnn_k80.json", "tests/fixtures/plan_cnn_k80.json",
                           "tests/fixtures/checkpoint_manifest.json"}) {
    auto text = readTextFile(sourceFile(file));
    ASSERT_TRUE(text.ok()) << text.status().message();
    auto j = parseJson(*text, file);
    ASSERT_TRUE(j.ok()) << j.status().message();
  }
  EXPECT_TRUE(profile::loadProfile(sourceFile("tests/fixtures/profile_cnn_k80.json")).ok());
  EXPECT_TRUE(plan::loadPlan(sourceFile("tests/fixtures/plan_cnn_k80.json")).ok());
}

TEST(NumericFields, InRangeValuesPassOthersFailNamingTheField) {
  for (const Field& f : kFields) {
    // The last name in the pointer is what the message must name.
    std::string key = f.pointer.substr(f.pointer.rfind('/') + 1);
    if (endsWith(key, "[0]")) key.resize(key.size() - 3);
    for (Value v : kValues) {
      const std::string what = fmt::format("{} {} = {}", f.file, f.pointer, kText[v]);
      Status s;
      try {
        s = parseWith(f, v);
      } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": escaped exception: " << e.what();
        continue;
      }
      if (f.accepts.count(v)) {
        EXPECT_TRUE(s.ok()) << what << ": refused a value in range: " << s.message();
        continue;
      }
      if (s.ok()) {
        ADD_FAILURE() << what << ": accepted";
        continue;
      }
      const std::string& m = s.message();
      EXPECT_NE(m.find(key), std::string::npos) << what << ": the message does not name " << key << ": " << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << what << ": more than one line: " << m;
      // "... is out of range; expected ...", "expected a number, got ...",
      // "\"abc\" is not a size; use a size like 512MB, ...".
      EXPECT_TRUE(m.find("expected") != std::string::npos || m.find("range") != std::string::npos ||
                  m.find("use a") != std::string::npos)
          << what << ": the message does not say what is expected: " << m;
    }
  }
}

// Products of counts in range can leave it: every worker runs A·B and loops
// over A·M·m samples.
TEST(NumericFields, ProductsOfCountsAreChecked) {
  auto text = readTextFile(sourceFile("tests/fixtures/plan_cnn_k80.json"));
  ASSERT_TRUE(text.ok()) << text.status().message();
  const Json plan = *parseJson(*text, "plan.json");
  {
    Json j = plan;
    j["strategy"]["data_parallel"] = kWorkersRange.max;
    j["strategy"]["pipeline_stages"] = kWorkersRange.max;
    j["microbatch_size"] = 1;
    j["num_microbatches"] = 1;
    j.erase("global_batch");
    auto r = plan::planFromJson(j, "plan.json");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("4294967296 workers, out of range"), std::string::npos) << r.status().message();
  }
  {
    Json j = plan;
    j["microbatch_size"] = kSamplesRange.max;
    j["num_microbatches"] = kMicrobatchesRange.max;
    j.erase("global_batch");
    auto r = plan::planFromJson(j, "plan.json");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("global batch"), std::string::npos) << r.status().message();
  }
  {
    Json j = plan;
    j["global_batch"] = 64;  // 8 microbatches of 4
    auto r = plan::planFromJson(j, "plan.json");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("plan.json.global_batch: is 64"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace hydrozoa::fuzz
