// One worker of bench/channel_bench.sh (issue 12 §3): the stage allreduce
// through the Redis channel, FuncPipe's pipelined scatter-reduce or
// LambdaML's, timed round by round; and the channel's own figures (upload
// and download bandwidth, one request's latency) that the formulas take.
//
//   channel_bench probe  URL PASSWORD_FILE NS BYTES
//   channel_bench reduce URL PASSWORD_FILE NS BYTES METHOD RANK N ROUNDS
//
// Prints one JSON line.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>

#include "runtime/comm/redis/redis_transport.h"

using namespace hydrozoa;
using namespace hydrozoa::runtime;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

[[noreturn]] void die(const std::string& m) {
  std::cerr << "channel_bench: " << m << "\n";
  std::exit(1);
}

template <typename T>
T orDie(Result<T> r) {
  if (!r.ok()) die(r.status().message());
  return std::move(r).value();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) die("usage: see the top of bench/channel_bench.cc");
  const std::string mode = argv[1];
  const redis::Address address = orDie(redis::parseUrl(argv[2], "url"));
  std::string password;
  std::getline(std::ifstream(argv[3]), password);
  const std::string ns = argv[4];
  const std::int64_t bytes = std::stoll(argv[5]);
  torch::set_num_threads(1);
  if (mode == "probe") {
    // Alone on the channel: one message up and down (the bandwidth, as a
    // worker's transfers see it) and small requests' round trips.
    redis::ChannelOptions o;
    o.address = address;
    o.password = password;
    o.ns = ns;
    o.world_size = 2;
    auto sender = orDie(redis::connectChannel(o));
    o.rank = 1;
    auto receiver = orDie(redis::connectChannel(o));
    torch::Tensor x = torch::ones({bytes / 4}), y = torch::empty({bytes / 4});
    torch::Tensor tiny = torch::ones({1}), tinyIn = torch::empty({1});
    sender->send(tiny, 1, 0)->wait();  // the lanes connected
    receiver->recv(tinyIn, 0, 0)->wait();
    std::vector<double> up, down, lat;
    for (int i = 0; i < 3; ++i) {
      auto t0 = Clock::now();
      sender->send(x, 1, 1)->wait();
      up.push_back(since(t0));
      t0 = Clock::now();
      receiver->recv(y, 0, 1)->wait();
      down.push_back(since(t0));
    }
    auto c = orDie(redis::Connection::open(address, password, 10));
    for (int i = 0; i < 50; ++i) {
      const auto t0 = Clock::now();
      (void)orDie(c.run({"PING"}));
      lat.push_back(since(t0));
    }
    std::cout << nlohmann::json{{"up_bytes_per_s", bytes / median(up)},
                                {"down_bytes_per_s", bytes / median(down)},
                                {"latency_s", median(lat)}}
                     .dump()
              << "\n";
    return 0;
  }
  if (mode != "reduce" || argc < 10) die("usage: see the top of bench/channel_bench.cc");
  redis::ChannelOptions o;
  o.address = address;
  o.password = password;
  o.ns = ns;
  o.sync = orDie(redis::parseSyncMethod(argv[6], "method"));
  o.rank = o.replica = std::stoi(argv[7]);
  o.world_size = o.replicas = std::stoi(argv[8]);
  o.timeout = 600;
  const int rounds = std::stoi(argv[9]);
  auto t = orDie(redis::connectChannel(o));
  torch::Tensor g = torch::full({bytes / 4}, static_cast<float>(o.rank + 1));
  std::vector<double> seconds;
  for (int r = 0; r < rounds; ++r) {
    g.fill_(static_cast<float>(o.rank + 1));
    t->barrier();
    const auto t0 = Clock::now();
    t->allreduceStage(g)->wait();
    seconds.push_back(since(t0));
    const float want = static_cast<float>(o.replicas * (o.replicas + 1) / 2);
    if (g[0].item<float>() != want || g[-1].item<float>() != want) die("the sum is wrong");
  }
  t->barrier();
  std::cout << nlohmann::json{{"rank", o.rank}, {"seconds", seconds}}.dump() << "\n";
  return 0;
}
