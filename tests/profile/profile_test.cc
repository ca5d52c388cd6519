#include "profile/profile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/files.h"

namespace hydrozoa::profile {
namespace {

Profile sample() {
  Profile p;
  p.model = "toy";
  p.options = {{"width", "2"}};
  p.source = "measured";
  p.device = "cpu";
  p.device_kind = "cpu";
  p.device_memory = 24 * kGB;
  p.threads = 1;
  p.runtime_bytes = 100 * kMB;
  p.layers = {{"a", "conv", 400, 400, 0.25, 0.125}, {"b", "linear", 800, 800, 0.5, 0.25}};
  for (std::int64_t m : {1, 4}) {
    Measurement meas;
    meas.microbatch_size = m;
    meas.input_bytes = 100 * m;
    meas.heap_bytes = m == 4 ? 5 * kMB : 0;
    meas.layers = {{1.5 * m, 3.0 * m, 200 * m, 300 * m, 10}, {0.5 * m, 1.0 * m, 40 * m, 40 * m, 0}};
    meas.layers[0].cold_forward_ms = 2.0 * m;
    meas.layers[0].cold_backward_ms = 4.0 * m;
    p.measurements.push_back(meas);
  }
  p.network = NetworkProfile{1.25e9, 50e-6, 1e-10, 20e-6, 2, 0.99, NetworkProfile::SharedMemoryFit{2e-10, 30e-6, 0.98},
                             std::nullopt, std::nullopt};
  p.network->messages = MessageCpuTable{{{8, 40e-6, 10e-6, 5e-6, 30e-6}, {1000, 50e-6, 10e-6, 5e-6, 40e-6}}};
  p.network->delivery = MessageDelivery{4096, 200e-6, 90e-6, 140e-6, 120e-6};
  p.corun = CorunProfile{2, 4, 1.25};
  return p;
}

TEST(ProfileJson, RoundTrips) {
  const Profile p = sample();
  auto back = profileFromJson(profileToJson(p), "p.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(profileToJson(*back), profileToJson(p));
  EXPECT_EQ(back->at(4)->layers[0].forward_ms, 6.0);
  EXPECT_EQ(back->at(2), nullptr);
  EXPECT_EQ(back->microbatchSizes(), (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(back->layers[1].optimizer_ms, 0.5);
  EXPECT_EQ(back->at(4)->heap_bytes, 5 * kMB);
  EXPECT_EQ(back->layers[1].snapshot_ms, 0.25);
  // NOTE [Passes after another chunk's]: kept where measured, absent (0) where not.
  EXPECT_EQ(back->at(4)->layers[0].cold_backward_ms, 16.0);
  EXPECT_EQ(back->at(4)->layers[1].cold_forward_ms, 0);
  EXPECT_FALSE(profileToJson(p)["measurements"][0]["layers"][1].contains("cold_forward_ms"));
  // Profiles from before the update and the heap were measured: none.
  Json old = profileToJson(p);
  for (Json& l : old["layers"]) {
    l.erase("optimizer_ms");
    l.erase("snapshot_ms");
  }
  for (Json& m : old["measurements"]) m.erase("heap_bytes");
  old.erase("corun");
  auto before = profileFromJson(old, "old.json");
  ASSERT_TRUE(before.ok()) << before.status().message();
  EXPECT_EQ(before->layers[1].optimizer_ms, 0);
  EXPECT_EQ(before->layers[1].snapshot_ms, 0);
  EXPECT_EQ(before->at(4)->heap_bytes, 0);
  ASSERT_TRUE(back->network->shared_memory);
  EXPECT_EQ(back->network->shared_memory->seconds_per_byte, 2e-10);
  // Profiles from before the shared-memory allreduce was timed: none.
  Json noShm = profileToJson(p);
  noShm["network"].erase("shared_memory_allreduce");
  auto older = profileFromJson(noShm, "old.json");
  ASSERT_TRUE(older.ok()) << older.status().message();
  EXPECT_FALSE(older->network->shared_memory);
  // NOTE [What a message costs the cores]: kept as measured; absent before it was.
  ASSERT_TRUE(back->network->messages);
  EXPECT_EQ(back->network->messages->rows.size(), 2u);
  EXPECT_EQ(back->network->messages->rows[1].receive, 40e-6);
  // Between sizes, interpolated; below the smallest, the smallest's; past
  // the largest, along the last segment.
  EXPECT_DOUBLE_EQ(back->network->messages->at(504).send, 45e-6);
  EXPECT_DOUBLE_EQ(back->network->messages->at(1).receive, 30e-6);
  EXPECT_DOUBLE_EQ(back->network->messages->at(1992).receive, 50e-6);
  EXPECT_DOUBLE_EQ(back->network->messages->at(1992).post, 5e-6);
  noShm["network"].erase("messages");
  auto noMessages = profileFromJson(noShm, "old.json");
  ASSERT_TRUE(noMessages.ok()) << noMessages.status().message();
  EXPECT_FALSE(noMessages->network->messages);
  // NOTE [A message's delivery on busy cores]: likewise.
  ASSERT_TRUE(back->network->delivery);
  EXPECT_EQ(back->network->delivery->bytes, 4096);
  EXPECT_EQ(back->network->delivery->mean, 200e-6);
  EXPECT_EQ(back->network->delivery->median, 90e-6);
  EXPECT_EQ(back->network->delivery->p90, 140e-6);
  EXPECT_EQ(back->network->delivery->helper_cpu, 120e-6);
  noShm["network"].erase("delivery");
  auto noDelivery = profileFromJson(noShm, "old.json");
  ASSERT_TRUE(noDelivery.ok()) << noDelivery.status().message();
  EXPECT_FALSE(noDelivery->network->delivery);
  // NOTE [Compute beside busy cores]: kept as measured; absent before it was.
  ASSERT_TRUE(back->corun);
  EXPECT_EQ(back->corun->cores, 2);
  EXPECT_EQ(back->corun->slowdown, 1.25);
  EXPECT_FALSE(before->corun);
}

TEST(ProfileJson, SaveAndLoad) {
  const std::string path = std::filesystem::temp_directory_path() / ("prof." + std::to_string(::getpid()) + ".json");
  ASSERT_TRUE(saveProfile(sample(), path).ok());
  auto back = loadProfile(path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->numLayers(), 2u);
  std::filesystem::remove(path);
}

// Each corruption must be refused with a message naming the field.
TEST(ProfileJson, RejectsMalformedFieldsNamingThem) {
  struct Case {
    std::function<void(Json&)> corrupt;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {[](Json& j) { j["schema"] = "hydrozoa.profile/9"; }, "p.json.schema"},
      {[](Json& j) { j.erase("layers"); }, "p.json.layers: missing"},
      {[](Json& j) { j["layers"] = Json::array(); }, "p.json.layers: must not be empty"},
      {[](Json& j) { j["layers"][1]["parameter_bytes"] = -5; }, "p.json.layers[1].parameter_bytes: -5 is out of range; expected a whole number from 0"},
      {[](Json& j) { j["measurements"][0]["layers"][1]["forward_ms"] = "slow"; },
       "p.json.measurements[0].layers[1].forward_ms: expected a number"},
      {[](Json& j) { j["measurements"][1]["layers"].erase(1); }, "has 1 entries but the profile has 2 layers"},
      {[](Json& j) { j["measurements"][0]["microbatch_size"] = 0; }, "microbatch_size: 0 is out of range; expected a whole number from 1"},
      {[](Json& j) { j["measurements"][1]["microbatch_size"] = 1; }, "ascending"},
      {[](Json& j) { j["measurements"][0]["layers"][0]["stashed_bytes"] = 1; }, "stashed_bytes 1 does not include the output"},
      {[](Json& j) { j["optimizer"] = "lion"; }, "unknown optimizer"},
      {[](Json& j) { j["measurements"][1]["heap_bytes"] = -1; }, "p.json.measurements[1].heap_bytes: -1 is out of range"},
      {[](Json& j) { j["measurements"][0]["heap_bytes"] = "lots"; }, "p.json.measurements[0].heap_bytes: expected"},
      {[](Json& j) { j["layers"][0]["optimizer_ms"] = -1; }, "p.json.layers[0].optimizer_ms: -1 is out of range"},
      {[](Json& j) { j["layers"][1]["optimizer_ms"] = "fast"; }, "p.json.layers[1].optimizer_ms: expected a number"},
      {[](Json& j) { j["layers"][0]["snapshot_ms"] = -2; }, "p.json.layers[0].snapshot_ms: -2 is out of range"},
      {[](Json& j) { j["measurements"][1]["layers"][0]["cold_backward_ms"] = -3; },
       "p.json.measurements[1].layers[0].cold_backward_ms: -3 is out of range"},
      {[](Json& j) { j["measurements"][0]["layers"][0]["cold_forward_ms"] = "warm"; },
       "p.json.measurements[0].layers[0].cold_forward_ms: expected a number"},
      {[](Json& j) { j["network"]["bandwidth_bytes_per_s"] = 0; }, "network.bandwidth_bytes_per_s: 0 is out of range; expected bytes per second above 0"},
      {[](Json& j) { j["network"]["shared_memory_allreduce"]["s_per_byte"] = -1; }, "network.shared_memory_allreduce.s_per_byte: -1 is out of range"},
      {[](Json& j) { j["network"]["messages"][0]["post_s"] = -1; }, "network.messages[0].post_s: -1 is out of range"},
      {[](Json& j) { j["network"]["messages"][1].erase("receive_s"); }, "network.messages[1].receive_s: missing"},
      {[](Json& j) { j["network"]["messages"][1]["bytes"] = 8; }, "network.messages[1].bytes: 8 is not above the row before's 8"},
      {[](Json& j) { j["network"]["messages"] = Json::array(); }, "network.messages"},
      {[](Json& j) { j["network"]["delivery"]["mean_s"] = -1; }, "network.delivery.mean_s: -1 is out of range"},
      {[](Json& j) { j["network"]["delivery"]["bytes"] = 0; }, "network.delivery.bytes: 0 is out of range"},
      {[](Json& j) { j["network"]["delivery"].erase("p90_s"); }, "network.delivery.p90_s: missing"},
      {[](Json& j) { j["network"]["delivery"]["helper_cpu_s"] = "idle"; }, "network.delivery.helper_cpu_s: expected"},
      {[](Json& j) { j["corun"]["slowdown"] = 0.5; }, "p.json.corun.slowdown: 0.5 is out of range"},
      {[](Json& j) { j["corun"]["cores"] = 1; }, "p.json.corun.cores: 1 is out of range"},
      {[](Json& j) { j["corun"]["microbatch_size"] = "big"; }, "p.json.corun.microbatch_size: expected"},
  };
  for (const auto& c : cases) {
    Json j = profileToJson(sample());
    c.corrupt(j);
    auto r = profileFromJson(j, "p.json");
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
}

TEST(LoadProfile, TruncatedJsonSaysTruncated) {
  const std::string path = std::filesystem::temp_directory_path() / ("trunc." + std::to_string(::getpid()) + ".json");
  const std::string text = profileToJson(sample()).dump(1);
  ASSERT_TRUE(writeFileAtomically(path, text.substr(0, text.size() / 2)).ok());
  auto r = loadProfile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(path), std::string::npos);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(LoadProfile, NeitherJsonNorGraph) {
  const std::string path = std::filesystem::temp_directory_path() / ("junk." + std::to_string(::getpid()) + ".txt");
  ASSERT_TRUE(writeFileAtomically(path, "hello world\n").ok());
  auto r = loadProfile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("hydrozoa profile"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(OptimizerStateFactor, Known) {
  EXPECT_EQ(*optimizerStateFactor("sgd"), 0);
  EXPECT_EQ(*optimizerStateFactor("sgd_momentum"), 1);
  EXPECT_EQ(*optimizerStateFactor("adam"), 2);
  EXPECT_FALSE(optimizerStateFactor("lion").ok());
}

}  // namespace
}  // namespace hydrozoa::profile
