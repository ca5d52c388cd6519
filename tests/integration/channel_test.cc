// Training through a Redis channel (docs/functions.md, "The channel") with
// the real binary: a server of the user's left as it was found, a killed
// coordinator's keys removed by `hydrozoa cleanup`, the user's mistakes
// named before anything starts, and a message lost from the store
// recovered like a lost worker.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "integration/harness.h"
#include "runtime/comm/redis/redis_server.h"

namespace hydrozoa {
namespace {

using runtime::redis::Connection;
using runtime::redis::LocalServer;
using testing::Outcome;
using testing::runHydrozoa;
using testing::ScratchDir;

std::string channelJob(int epochs, const std::string& cluster, int hidden = 32) {
  return "name: channel\n"
         "model: {name: mlp, options: {hidden: " + std::to_string(hidden) + ", depth: 2}}\n"
         "data: {dataset: synthetic, synthetic_train: 480, synthetic_test: 48}\n"
         "training: {epochs: " + std::to_string(epochs) + ", global_batch: 24, seed: 3, eval: false,\n"
         "           optimizer: {name: sgd, lr: 0.05, momentum: 0.9}}\n"
         "cluster: {workers: 4, bandwidth: 1Gbit/s, launcher: local" + cluster + "}\n"
         "plan: {data_parallel: 2, stages: 2, microbatches: 3}\n"
         "output: {checkpoint_every_epochs: 1}\n";
}

// A redis-server of the test's own, as a user's would be, and its password in a file.
class UsersRedis : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime::redis::ServerOptions so;
    so.dir = dir_ / "redis";
    so.password = "users-password-42";
    auto s = LocalServer::start(so);
    ASSERT_TRUE(s.ok()) << s.status().message();
    server_ = std::move(s).value();
    std::ofstream(dir_ / "pw") << so.password << "\n";
    auto c = Connection::open(server_->address(), so.password, 10);
    ASSERT_TRUE(c.ok());
    admin_.emplace(std::move(c).value());
  }
  std::string url() const { return server_->address().url(); }
  std::int64_t keys() { return admin_->run({"DBSIZE"})->integer(); }
  std::int64_t memory() {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // closed connections freed
    return *runtime::redis::usedMemory(*admin_);
  }
  Outcome train(const std::vector<std::string>& more) {
    std::vector<std::string> args = {"train", "job.yaml", "--no-progress", "--channel", url(),
                                     "--channel-password-file", "pw"};
    args.insert(args.end(), more.begin(), more.end());
    return runHydrozoa(dir_.path().string(), args);
  }

  ScratchDir dir_;
  std::unique_ptr<LocalServer> server_;
  std::optional<Connection> admin_;
};

TEST_F(UsersRedis, ARunLeavesTheStoreAsItFoundIt) {
  // hidden 256: a stage's gradients are 0.8 MB, so a part of them left in
  // the store would show in its memory, not only in its keys.
  std::ofstream(dir_ / "job.yaml") << channelJob(1, "", 256);
  // A first run of each method grows the server's own tables once.
  Outcome first = train({"--out", "a"});
  ASSERT_EQ(first.code, 0) << first.err;
  // Every message consumed, so deleted, by the workers themselves.
  auto summary = readJsonFile(dir_ / "a/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["channel"]["keys_left"], 0);
  EXPECT_NE(first.err.find("Redis channel at " + url()), std::string::npos) << first.err;
  EXPECT_EQ(keys(), 0);
  Outcome second = train({"--out", "b", "--channel-sync", "lambdaml"});
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_EQ(keys(), 0);
  // The same training either way (the sums' order differs: rounding).
  const auto a = testing::stepLosses(dir_ / "a"), b = testing::stepLosses(dir_ / "b");
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * std::fabs(a[i])) << "step " << i + 1;
  // After them, a run leaves the store's memory where it found it, but for
  // the server's own tables, which keep the size of the most keys they held
  // at once (tens of kB, whatever the data that went through).
  const std::int64_t baseline = memory();
  for (const char* sync : {"pipelined", "lambdaml"}) {
    Outcome again = train({"--out", std::string("again-") + sync, "--channel-sync", sync});
    ASSERT_EQ(again.code, 0) << again.err;
    auto s = readJsonFile(dir_ / (std::string("again-") + sync + "/summary.json"));
    ASSERT_TRUE(s.ok());
    EXPECT_EQ((*s)["channel"]["keys_left"], 0) << sync;
    EXPECT_EQ(keys(), 0);
    const std::int64_t now = memory();
    EXPECT_LT(std::abs(now - baseline), 64 * 1024) << baseline << " -> " << now << " " << sync << ": the store's memory did not return to its baseline";
  }
}

// Function workers cannot reach this machine's loopback from their
// namespaces: a server there is relayed onto their one route (socat).
TEST_F(UsersRedis, FunctionWorkersReachALoopbackServerThroughARelay) {
  REQUIRE_CONTAINERS();
  std::ofstream(dir_ / "job.yaml") << channelJob(1, ", memory_limit: 1769MB");
  Outcome r = train({"--out", "f", "--launcher", "function", "--platform", "lambda"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("(relayed to the workers at redis://"), std::string::npos) << r.err;
  auto summary = readJsonFile(dir_ / "f/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["launcher"]["kind"], "function");
  EXPECT_EQ((*summary)["channel"]["keys_left"], 0);
  EXPECT_EQ(keys(), 0);
}

// kill -9 of the coordinator: the keys it left are `hydrozoa cleanup`'s,
// found by the record it wrote before starting any worker.
TEST_F(UsersRedis, CleanupDeletesTheKeysOfAKilledCoordinator) {
  const std::string state = dir_ / "state";
  ::setenv("HYDROZOA_STATE_DIR", state.c_str(), 1);
  std::ofstream(dir_ / "job.yaml") << channelJob(1000, "");
  const pid_t pid = testing::spawnHydrozoa(dir_.path().string(),
                                           {"train", "job.yaml", "--no-progress", "--out", "run", "--channel", url(),
                                            "--channel-password-file", "pw"});
  ASSERT_NE(testing::waitForSteps(dir_ / "run", 5), "");
  std::vector<std::string> records;
  for (const auto& e : std::filesystem::directory_iterator(state + "/redis")) records.push_back(e.path());
  ASSERT_EQ(records.size(), 1u);
  ::kill(pid, SIGKILL);
  (void)testing::waitHydrozoa(dir_.path().string(), pid);
  EXPECT_TRUE(testing::noWorkersLeft(dir_ / "run"));
  // Whatever was in flight, and one more key of the job's for certain.
  auto record = readJsonFile(records[0]);
  ASSERT_TRUE(record.ok());
  const std::string prefix = (*record)["prefix"];
  ASSERT_TRUE(admin_->run({"SET", prefix + ":g0:left", "x"}).ok());
  ASSERT_TRUE(admin_->run({"SET", "not-the-jobs", "x"}).ok());
  Outcome r = runHydrozoa(dir_.path().string(), {"cleanup"});
  ::unsetenv("HYDROZOA_STATE_DIR");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Removed job"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("keys in " + url()), std::string::npos) << r.out;
  EXPECT_EQ(keys(), 1) << "only the key that is not the job's stays";
  EXPECT_FALSE(std::filesystem::exists(records[0]));
}

// Mistakes are named before any worker starts, and nothing is left.
TEST_F(UsersRedis, MistakesAreNamedBeforeAnythingStarts) {
  std::ofstream(dir_ / "job.yaml") << channelJob(1, "");
  std::ofstream(dir_ / "wrong") << "not-the-password\n";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--channel", url(), "--channel-password-file", "wrong"}, "refused the password"},
      {{"--channel", url()}, "requires a password: give it with --channel-password-file"},
      {{"--channel", url(), "--channel-password-file", "missing"}, "cluster.channel_password_file"},
      {{"--channel", "redis://127.0.0.1:1", "--channel-password-file", "pw"},
       "cannot reach the Redis channel at redis://127.0.0.1:1"},
      {{"--channel", "http://127.0.0.1:1"}, "expected redis://HOST:PORT"},
      {{"--channel", "redis", "--channel-password-file", "pw"}, "generates one"},
      {{"--channel", "redis", "--channel-sync", "ring"}, "unknown method \"ring\""},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"train", "job.yaml", "--no-progress", "--out", "bad"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Outcome r = runHydrozoa(dir_.path().string(), args);
    EXPECT_NE(r.code, 0) << c.message;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir_ / "bad/workers/worker-0.log")) << c.message;
    std::filesystem::remove_all(dir_ / "bad");
  }
  // A store that evicts keys would lose messages.
  ASSERT_TRUE(admin_->run({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}).ok());
  Outcome r = train({"--out", "bad"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("set maxmemory-policy noeviction"), std::string::npos) << r.err;
  EXPECT_EQ(keys(), 0);
}

// A store too small for the job's messages (maxmemory): the first write
// it refuses fails the job with the store named and the fix, and the
// job's keys are deleted all the same.
TEST_F(UsersRedis, AFullStoreFailsTheJobWithTheFix) {
  std::ofstream(dir_ / "job.yaml") << channelJob(1, ", max_recoveries: 0", 256);
  auto used = runtime::redis::usedMemory(*admin_);
  ASSERT_TRUE(used.ok());
  ASSERT_TRUE(admin_->run({"CONFIG", "SET", "maxmemory", std::to_string(*used + 300 * 1000)}).ok());
  Outcome r = train({"--out", "full"});
  ASSERT_TRUE(admin_->run({"CONFIG", "SET", "maxmemory", "0"}).ok());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("the Redis channel at " + url() + " is full"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("give it more memory"), std::string::npos) << r.err;
  EXPECT_EQ(keys(), 0);
}

// A message lost from the store mid-step: its receiver waits
// cluster.channel_timeout, gives up as if its peer were lost, and the job
// recovers from its live replicas; no key of the job is left.
TEST_F(UsersRedis, AMessageLostFromTheStoreIsRecoveredLikeALostWorker) {
  std::ofstream(dir_ / "job.yaml") << channelJob(6, ", channel_timeout: 3s");
  const pid_t pid = testing::spawnHydrozoa(dir_.path().string(),
                                           {"train", "job.yaml", "--no-progress", "--out", "run", "--channel", url(),
                                            "--channel-password-file", "pw"});
  ASSERT_NE(testing::waitForSteps(dir_ / "run", 20), "");
  // Delete one message's key as soon as one is seen in flight.
  bool deleted = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!deleted && std::chrono::steady_clock::now() < until) {
    auto r = admin_->run({"SCAN", "0", "MATCH", "hz:*:p:*", "COUNT", "1000"});
    ASSERT_TRUE(r.ok());
    if (r->at(1).size() > 0) deleted = admin_->run({"DEL", std::string(r->at(1).at(0).str())})->integer() == 1;
  }
  ASSERT_TRUE(deleted);
  Outcome r = testing::waitHydrozoa(dir_.path().string(), pid);
  ASSERT_EQ(r.code, 0) << r.err;
  auto summary = readJsonFile(dir_ / "run/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["status"], "completed");
  ASSERT_GE((*summary)["recoveries"].size(), 1u) << r.err;
  EXPECT_NE(r.err.find("no message from"), std::string::npos) << r.err;
  EXPECT_EQ(keys(), 0);
}

}  // namespace
}  // namespace hydrozoa
