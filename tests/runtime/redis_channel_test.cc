// The Redis channel against a real redis-server started by the test (a
// loopback port, a generated password): messages, chunking and order, both
// scatter-reduces against a plain sum, the store left empty, and the
// failures a user meets (unreachable, wrong or missing password, a store
// that evicts, a store full, a peer that never sends).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/files.h"
#include "runtime/comm/redis/redis_files.h"
#include "runtime/comm/redis/redis_server.h"
#include "runtime/comm/redis/redis_transport.h"

namespace hydrozoa::runtime::redis {
namespace {

class RedisChannel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions so;
    so.dir = dir();
    so.password = "test-password-0123456789";
    so.commands = kChannelCommands;  // as the job's own: every test below runs on what it allows
    auto s = LocalServer::start(so);
    ASSERT_TRUE(s.ok()) << s.status().message();
    server_ = std::move(s).value().release();
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) {
      delete server_;
      server_ = nullptr;
    }
    std::error_code ec;  // its config holds the password: leave nothing in /tmp
    std::filesystem::remove_all(dir(), ec);
  }
  static std::string dir() {
    return (std::filesystem::temp_directory_path() / ("hz-redis-test-" + std::to_string(::getpid()))).string();
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    auto c = Connection::open(server_->address(), server_->adminPassword(), 10, "admin");
    ASSERT_TRUE(c.ok()) << c.status().message();
    admin_.emplace(std::move(c).value());
  }

  ChannelOptions options(int rank, int world, int stages, SyncMethod sync = SyncMethod::kPipelined) const {
    ChannelOptions o;
    o.address = server_->address();
    o.password = server_->password();
    o.ns = "hz:test:" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
    o.rank = rank;
    o.world_size = world;
    o.stage = rank % stages;
    o.replica = rank / stages;
    o.replicas = world / stages;
    o.sync = sync;
    o.chunk_bytes = 1000;  // small: every test crosses chunks
    o.timeout = 20;
    return o;
  }

  // Runs body(rank, transport) on one thread per rank.
  void runRanks(int world, int stages, SyncMethod sync, const std::function<void(int, Transport&)>& body) {
    std::vector<std::thread> threads;
    std::vector<std::string> errors(world);
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        auto t = connectChannel(options(r, world, stages, sync));
        if (!t.ok()) {
          errors[r] = t.status().message();
          return;
        }
        try {
          body(r, **t);
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  }

  std::int64_t keys() {
    auto r = admin_->run({"DBSIZE"});
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->integer() : -1;
  }

  static LocalServer* server_;
  std::optional<Connection> admin_;
};
LocalServer* RedisChannel::server_ = nullptr;

TEST(RedisUrl, ParsesAndRefuses) {
  auto a = parseUrl("redis://10.0.0.2:6380", "--channel");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "10.0.0.2");
  EXPECT_EQ(a->port, 6380);
  EXPECT_EQ(parseUrl("redis://store", "--channel")->port, 6379);
  for (const char* bad : {"http://x:1", "redis://:6379", "redis://h:0", "redis://h:65536", "redis://h:x",
                          "redis://u:p@h:1", "redis://h:1/0", ""}) {
    auto r = parseUrl(bad, "--channel");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--channel"), std::string::npos);
    EXPECT_NE(r.status().message().find("redis://HOST:PORT"), std::string::npos);
  }
}

TEST_F(RedisChannel, MessagesArriveWholeInOrderAndLeaveNothingBehind) {
  const std::int64_t before = keys();
  runRanks(2, 2, SyncMethod::kPipelined, [](int rank, Transport& t) {
    // 5 messages under one tag, of 1 element to several chunks, and an empty one.
    const std::vector<std::int64_t> sizes = {1, 250, 251, 2000, 0};
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (rank == 0) {
        torch::Tensor x = torch::arange(sizes[i], torch::kFloat32) + static_cast<float>(i);
        t.send(x, 1, 7)->wait();
      } else {
        torch::Tensor y = torch::empty({sizes[i]});
        t.recv(y, 0, 7)->wait();
        EXPECT_TRUE(torch::equal(y, torch::arange(sizes[i], torch::kFloat32) + static_cast<float>(i))) << i;
      }
    }
    // Both directions at once, many in flight.
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    std::vector<torch::Tensor> in(10);
    for (int i = 0; i < 10; ++i) {
      torch::Tensor x = torch::full({600}, static_cast<float>(100 * rank + i));
      works.push_back(t.send(x, 1 - rank, i % 3));
      in[i] = torch::empty({600});
    }
    for (int i = 0; i < 10; ++i) works.push_back(t.recv(in[i], 1 - rank, i % 3));
    for (auto& w : works) w->wait();
    for (int i = 0; i < 10; ++i) EXPECT_EQ(in[i][599].item<float>(), static_cast<float>(100 * (1 - rank) + i));
    t.barrier();
  });
  EXPECT_EQ(keys(), before);
}

// NOTE [Loss scaling]: the vote through the store, as through Gloo (the
// barrier is a vote nobody wins); its keys go with it.
TEST_F(RedisChannel, AnyWorkerTellsEveryWorkerTheSameAndLeavesNothingBehind) {
  const std::int64_t before = keys();
  runRanks(3, 3, SyncMethod::kPipelined, [](int rank, Transport& t) {
    for (int round = 0; round < 5; ++round) {
      const bool yes = (round < 3 && rank == round) || (round == 3 && rank != 1);
      EXPECT_EQ(t.anyWorker(yes), round < 4) << "rank " << rank << ", round " << round;
    }
    t.barrier();
  });
  EXPECT_EQ(keys(), before);
}

class ScatterReduce : public RedisChannel, public ::testing::WithParamInterface<std::tuple<SyncMethod, int>> {};

TEST_P(ScatterReduce, EveryReplicaGetsTheSumAndTheStoreEmpties) {
  const auto [sync, replicas] = GetParam();
  const int stages = 2, world = stages * replicas;
  const std::int64_t before = keys();
  std::vector<std::int64_t> memory;  // the store's, after each round
  for (int round = 0; round < 3; ++round) {
    std::vector<std::vector<torch::Tensor>> results(world);
    runRanks(world, stages, sync, [&, replicas = replicas](int rank, Transport& t) {
      ASSERT_EQ(t.stageReplicas(), replicas);
      // Three buckets in flight, of sizes that split unevenly (one smaller than n).
      for (std::int64_t n : {std::int64_t{1}, std::int64_t{1001}, std::int64_t{12345}}) {
        results[rank].push_back(torch::arange(n, torch::kFloat32).sin() * (rank + 1));
      }
      std::vector<c10::intrusive_ptr<c10d::Work>> works;
      for (auto& x : results[rank]) works.push_back(t.allreduceStage(x));
      for (auto& w : works) w->wait();
    });
    for (int r = 0; r < world; ++r) {
      for (size_t b = 0; b < results[r].size(); ++b) {
        const torch::Tensor base = torch::arange(results[r][b].numel(), torch::kFloat32).sin();
        float factor = 0;  // the ranks of this stage: r % stages + stages·k
        for (int k = 0; k < replicas; ++k) factor += static_cast<float>(r % stages + stages * k + 1);
        EXPECT_TRUE(torch::allclose(results[r][b], base * factor, 1e-5, 1e-5)) << "rank " << r << " bucket " << b;
        // Every replica of a stage holds exactly the same sums.
        EXPECT_TRUE(torch::equal(results[r][b], results[r % stages][b])) << "rank " << r << " bucket " << b;
      }
    }
    EXPECT_EQ(keys(), before) << "round " << round;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // closed connections freed
    auto m = usedMemory(*admin_);
    ASSERT_TRUE(m.ok());
    memory.push_back(*m);
  }
  // The first round may grow the server's own tables once; after it, a
  // round leaves the store's memory where it found it.
  EXPECT_LT(std::abs(memory[2] - memory[1]), 16 * 1024) << memory[1] << " -> " << memory[2];
}

INSTANTIATE_TEST_SUITE_P(Methods, ScatterReduce,
                         ::testing::Combine(::testing::Values(SyncMethod::kPipelined, SyncMethod::kLambdaML),
                                            ::testing::Values(2, 3, 4)),
                         [](const auto& info) {
                           return std::string(syncMethodName(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Issue 53: the workers' password (which every worker holds) runs the
// channel's commands and nothing else: no CONFIG SET, FLUSHALL, EVAL,
// MODULE, DEBUG, SHUTDOWN or KEYS; the admin user runs them. The config
// that held both passwords is gone once the server started.
TEST_F(RedisChannel, TheWorkersPasswordRunsTheChannelsCommandsAlone) {
  auto worker = Connection::open(server_->address(), server_->password(), 10);
  ASSERT_TRUE(worker.ok()) << worker.status().message();
  EXPECT_TRUE(worker->run({"SET", "t:k", "v"}).ok());
  EXPECT_TRUE(worker->run({"CONFIG", "GET", "maxmemory"}).ok());
  for (const std::vector<std::string>& refused :
       std::vector<std::vector<std::string>>{{"CONFIG", "SET", "maxmemory", "1"}, {"FLUSHALL"}, {"EVAL", "return 1", "0"},
                                             {"MODULE", "LIST"}, {"DEBUG", "SLEEP", "0"}, {"SHUTDOWN"}, {"KEYS", "*"},
                                             {"GET", "t:k"}, {"ACL", "LIST"}}) {
    const std::vector<std::string_view> words(refused.begin(), refused.end());
    auto reply = worker->run(words);
    ASSERT_FALSE(reply.ok()) << refused[0];
    const std::string why = reply.status().message();  // DEBUG: Redis's own guard answers first
    EXPECT_TRUE(why.find("NOPERM") != std::string::npos || why.find("DEBUG command not allowed") != std::string::npos)
        << why;
  }
  EXPECT_TRUE(admin_->run({"UNLINK", "t:k"}).ok());
  EXPECT_FALSE(std::filesystem::exists(dir() + "/redis.conf"));
}

TEST_F(RedisChannel, UnreachableWrongAndMissingPasswordsAreNamed) {
  ChannelOptions o = options(0, 1, 1);
  o.address.port = 1;  // nothing listens there
  auto r = connectChannel(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot reach the Redis channel at redis://127.0.0.1:1"), std::string::npos)
      << r.status().message();

  o = options(0, 1, 1);
  o.password = "wrong";
  r = connectChannel(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("refused the password"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("--channel-password-file"), std::string::npos);

  o.password = "";
  r = connectChannel(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("requires a password"), std::string::npos) << r.status().message();
}

TEST_F(RedisChannel, AStoreThatEvictsIsRefusedAndAFullOneNamed) {
  ASSERT_TRUE(admin_->run({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}).ok());
  auto r = connectChannel(options(0, 1, 1));
  ASSERT_TRUE(admin_->run({"CONFIG", "SET", "maxmemory-policy", "noeviction"}).ok());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("maxmemory-policy noeviction"), std::string::npos) << r.status().message();

  // Full: a message larger than what is left is refused, with the fix.
  auto used = usedMemory(*admin_);
  ASSERT_TRUE(used.ok());
  ASSERT_TRUE(admin_->run({"CONFIG", "SET", "maxmemory", std::to_string(*used + 200 * 1000)}).ok());
  auto t = connectChannel(options(0, 2, 2));
  ASSERT_TRUE(t.ok()) << t.status().message();
  torch::Tensor big = torch::zeros({1000 * 1000});
  torch::Tensor in = torch::empty({10});
  auto pending = (*t)->recv(in, 1, 0);  // a wait the refused write would leave hanging
  std::string error;
  try {
    (*t)->send(big, 1, 0)->wait();
  } catch (const std::exception& e) {
    error = e.what();
  }
  // NOTE [A store's error ends every wait]: the receive ends with it too, within a poll.
  const auto t0 = std::chrono::steady_clock::now();
  std::string ended;
  try {
    pending->wait();
  } catch (const std::exception& e) {
    ended = e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_NE(ended.find("is full"), std::string::npos) << ended;
  ASSERT_TRUE(admin_->run({"CONFIG", "SET", "maxmemory", "0"}).ok());
  EXPECT_NE(error.find("is full"), std::string::npos) << error;
  EXPECT_NE(error.find("maxmemory"), std::string::npos) << error;
  ASSERT_TRUE(deleteMatching(*admin_, "hz:test:*").ok());
}

// NOTE [State through the store]: a file of whole chunks, one of a part and
// an empty one come back byte for byte; a missing key is NotFound (the
// worker then fetches from the coordinator); a size other than announced,
// or past the bound, is refused and leaves no file behind.
TEST_F(RedisChannel, FilesComeBackByteForByteAndBadOnesAreRefused) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hz-redis-files-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const Bytes size : {Bytes{0}, Bytes{1}, kFileChunk, 2 * kFileChunk + 7, 9 * kFileChunk + 3}) {
    std::string bytes(static_cast<size_t>(size), '\0');
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 131 + size) % 251);
    const std::string in = (dir / "in").string(), out = (dir / "out").string();
    std::ofstream(in, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    auto put = putFile(*admin_, "hz:test:file", in);
    ASSERT_TRUE(put.ok()) << put.status().message();
    EXPECT_EQ(*put, size);
    ASSERT_TRUE(getFile(*admin_, "hz:test:file", out, size, std::int64_t{1} << 30).ok()) << size;
    auto back = readTextFile(out);
    ASSERT_TRUE(back.ok());
    EXPECT_TRUE(*back == bytes) << size;
    std::filesystem::remove(out);
    if (size < 2 * kFileChunk) continue;
    // Announced otherwise, or past the bound: refused, nothing written.
    Status s = getFile(*admin_, "hz:test:file", out, size - 1, std::int64_t{1} << 30);
    EXPECT_NE(s.message().find("bytes announced"), std::string::npos) << s.message();
    s = getFile(*admin_, "hz:test:file", out, size + 1, std::int64_t{1} << 30);
    EXPECT_NE(s.message().find("were announced"), std::string::npos) << s.message();
    s = getFile(*admin_, "hz:test:file", out, -1, kFileChunk);
    EXPECT_NE(s.message().find("more than"), std::string::npos) << s.message();
    EXPECT_FALSE(std::filesystem::exists(out));
    EXPECT_FALSE(std::filesystem::exists(out + ".part"));
  }
  const Status missing = getFile(*admin_, "hz:test:nothing", (dir / "x").string(), -1, 1 << 20);
  EXPECT_EQ(missing.code(), ErrorCode::kNotFound) << missing.message();
  ASSERT_TRUE(deleteMatching(*admin_, "hz:test:*").ok());
  std::filesystem::remove_all(dir);
}

TEST_F(RedisChannel, APeerThatNeverSendsTimesOutAndAnAbortEndsTheWait) {
  ChannelOptions o = options(1, 2, 2);
  o.timeout = 1.5;
  auto t = connectChannel(o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  torch::Tensor y = torch::empty({10});
  std::string error;
  try {
    (*t)->recv(y, 0, 0)->wait();
  } catch (const std::exception& e) {
    error = e.what();
    EXPECT_TRUE(isPeerLost(e)) << error;
  }
  EXPECT_NE(error.find("no message from rank 0"), std::string::npos) << error;

  o.timeout = 600;
  t = connectChannel(o);
  ASSERT_TRUE(t.ok());
  auto w = (*t)->recv(y, 0, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  w->abort();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(w->wait(), PeerLostError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
}

}  // namespace
}  // namespace hydrozoa::runtime::redis
