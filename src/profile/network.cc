#include "profile/network.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <time.h>
#include <thread>

#include "core/cpus.h"
#include "core/environment.h"
#include "core/files.h"
#include "core/paths.h"
#include "runtime/comm/control_store.h"
#include "runtime/comm/pipe.h"
#include "runtime/comm/shared_memory.h"
#include "runtime/comm/transport.h"
#include "runtime/trace.h"
#include "wire/control.h"

namespace hydrozoa::profile {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A compute thread like a training worker's: one intra-op thread, pinned to
// a core of the process's own (rank-th of those it may use), multiplying
// matrices until stopped.
class BusyCompute {
 public:
  explicit BusyCompute(int rank) {
    const std::vector<int> cpus = usableCpus();
    const int cpu = cpus[static_cast<size_t>(rank) % cpus.size()];
    thread_ = std::thread([this, cpu] {
      runThreadOn({cpu});  // best effort: unpinned is still busy
      setThreadSlice(std::chrono::microseconds(0));  // a compute thread's (NOTE [Helper threads wake at once])
      at::set_num_threads(1);
      torch::NoGradGuard noGrad;
      const at::Tensor a = torch::rand({256, 256});
      at::Tensor b = torch::rand({256, 256});
      while (!stop_.load(std::memory_order_relaxed)) b = torch::mm(a, b).div_(256);
    });
  }
  ~BusyCompute() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

double cpuSeconds(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// NOTE [What a message costs the cores]
// A pipeline's transfer is not only a delay on its link: each message takes
// CPU time from both workers. Gloo writes a tensor into the socket on the
// thread that sends it when the receiver is ready (the stage's compute
// thread), a channel's thread waits for the completion, and on the other
// side Gloo's thread reads it and the channel's thread hands it over.
// Measured on this project's 2-core machine, the sending thread spent
// 50–70 us per activation of a small CNN microbatch (bench/README.md,
// schedule_bench), the same order as the passes of a few samples. So rank 0
// sends kCount messages of each size to rank 1, which posted its receives
// first (ready, as a pipeline's channels post theirs ahead), the way a
// stage's channels do: the sends posted by one thread, their completions
// waited for by another, the receives waited for one by one. Per message:
// the sending thread's CPU time, the rest of the sender's process, the
// receiving thread's time posting the receive, and the rest of the receiving
// process (clock_gettime's thread and process CPU clocks). Measured here:
// 8–11 us sending and 5–14 us receiving up to 64 KB, ~0.2 ms a side at 1 MB.
Json timeMessages(c10d::ProcessGroupGloo& pg, int rank, const std::vector<Bytes>& sizes, int repeats) {
  constexpr int kCount = 32;
  constexpr int kTag = 2;
  Json rows = Json::array();
  for (Bytes n : sizes) {
    const std::int64_t floats = std::max<Bytes>(1, n / 4);
    std::vector<double> caller, sender, poster, receiver;
    for (int r = 0; r < repeats + 1; ++r) {
      if (rank == 0) {
        std::vector<at::Tensor> buf = {torch::ones({floats}, torch::kFloat)};
        pg.barrier()->wait();
        // The receiver reads its CPU clock as it leaves the barrier: start after.
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::mutex mu;
        std::condition_variable cv;
        std::deque<c10::intrusive_ptr<c10d::Work>> posted;
        int waited = 0;
        std::thread completions([&] {  // as a channel's outbound thread
          while (waited < kCount) {
            c10::intrusive_ptr<c10d::Work> w;
            {
              std::unique_lock<std::mutex> lock(mu);
              cv.wait(lock, [&] { return !posted.empty(); });
              w = posted.front();
              posted.pop_front();
            }
            w->wait();
            ++waited;
          }
        });
        const double process0 = cpuSeconds(CLOCK_PROCESS_CPUTIME_ID);
        const double thread0 = cpuSeconds(CLOCK_THREAD_CPUTIME_ID);
        for (int i = 0; i < kCount; ++i) {
          auto w = pg.send(buf, 1, kTag);
          {
            std::lock_guard<std::mutex> lock(mu);
            posted.push_back(std::move(w));
          }
          cv.notify_one();
        }
        const double thread1 = cpuSeconds(CLOCK_THREAD_CPUTIME_ID);
        completions.join();
        const double process1 = cpuSeconds(CLOCK_PROCESS_CPUTIME_ID);
        if (r > 0) {
          caller.push_back((thread1 - thread0) / kCount);
          sender.push_back((process1 - process0 - (thread1 - thread0)) / kCount);
        }
      } else if (rank == 1) {
        std::vector<std::vector<at::Tensor>> bufs;
        std::vector<c10::intrusive_ptr<c10d::Work>> works;
        for (int i = 0; i < kCount; ++i) bufs.push_back({torch::empty({floats}, torch::kFloat)});
        const double posting0 = cpuSeconds(CLOCK_THREAD_CPUTIME_ID);
        for (int i = 0; i < kCount; ++i) works.push_back(pg.recv(bufs[static_cast<size_t>(i)], 0, kTag));
        const double posting1 = cpuSeconds(CLOCK_THREAD_CPUTIME_ID);
        pg.barrier()->wait();  // the sender starts a millisecond after it
        const double process0 = cpuSeconds(CLOCK_PROCESS_CPUTIME_ID);
        for (auto& w : works) w->wait();
        const double process1 = cpuSeconds(CLOCK_PROCESS_CPUTIME_ID);
        if (r > 0) {
          poster.push_back((posting1 - posting0) / kCount);
          receiver.push_back((process1 - process0) / kCount);
        }
      } else {
        pg.barrier()->wait();
      }
    }
    if (rank == 0) rows.push_back({n, median(caller), median(sender)});
    if (rank == 1) rows.push_back({n, median(poster), median(receiver)});
  }
  return rows;
}

// The probe's process group as the pipeline's channels see it (Inbound and
// Outbound send through a runtime::Transport).
class ProbeTransport final : public runtime::Transport {
 public:
  explicit ProbeTransport(c10d::ProcessGroupGloo& pg) : pg_(pg) {}
  int rank() const override { return pg_.getRank(); }
  int worldSize() const override { return pg_.getSize(); }
  int stageReplicas() const override { return 1; }
  c10::intrusive_ptr<c10d::Work> send(torch::Tensor& tensor, int peer, int tag) override {
    std::vector<at::Tensor> v = {tensor};
    return pg_.send(v, peer, tag);
  }
  c10::intrusive_ptr<c10d::Work> recv(torch::Tensor& tensor, int peer, int tag) override {
    std::vector<at::Tensor> v = {tensor};
    return pg_.recv(v, peer, tag);
  }
  c10::intrusive_ptr<c10d::Work> allreduceStage(torch::Tensor& /*tensor*/) override {
    throw std::logic_error("the network probe's transport has no stage to sum over");
  }
  void barrier() override { pg_.barrier()->wait(); }
  bool anyWorker(bool /*mine*/) override { throw std::logic_error("the network probe's transport takes no vote"); }

 private:
  c10d::ProcessGroupGloo& pg_;
};

// Computes on the calling thread for `us` microseconds: small matrix
// products, as a pass touches its caches.
void computeFor(std::int64_t us) {
  torch::NoGradGuard noGrad;
  static thread_local const at::Tensor a = torch::rand({64, 64});
  static thread_local at::Tensor b = torch::rand({64, 64});
  const std::int64_t until = runtime::traceNowUs() + us;
  while (runtime::traceNowUs() < until) b = torch::mm(a, b).div_(64);
}

// NOTE [A message's delivery on busy cores]
// A pipeline's stage often waits for its neighbour's message while that
// neighbour already computes its next pass, and the message then travels
// through threads that need a core: the sender's channel thread, Gloo's
// transport threads on both sides, the receiver's channel thread, then the
// woken compute thread. Traced on this project's 2-core machine (interleaved
// 1F1B, the Fashion-MNIST CNN at 16 microbatches: 96 messages and ~29 such
// waits a step), a message the consumer waited for arrived a median
// 150–220 us and a mean 300–400 us after its pass ended, with a tail of
// milliseconds; the 8-byte ping-pong (latency_s) says 40 us, and a ping-pong
// beside busy compute threads 13 us: neither goes through the channels, nor
// sends one message at a time. And each message cost the workers' cores far
// more than the burst of NOTE [What a message costs the cores] says (perf:
// each worker's Gloo thread took 14% of a core, its channels' threads
// another 12%; NOTE [Messages one at a time], plan/profile_costs.cc).
//
// So the probe runs that case through the runtime's own channels
// (runtime/comm/pipe.h, posting on their threads), each rank's compute
// thread pinned as a worker's and its helpers with a worker's short slices:
// rank 0 computes, sends message i, computes its next pass and waits for
// rank 1's reply; rank 1 waits for message i, computes a shorter pass and
// replies. Rank 1 times each message from the send to the end of its wait
// (both ranks on one host: one monotonic clock); each rank adds up its
// other threads' CPU per message sent and received. Measured here: delivery
// median 90–140 us, mean 130–260 us (2–5% of the messages take 1–4 ms);
// helper CPU 115–270 us per message sent and received, 20–30 us of which the
// burst counts. (A one-off check timed rank 0's wall time beyond the work
// its compute thread got done at its rate alone: the loss per message sent
// and received was about the same, 180–230 us. The helpers' CPU comes out
// of the compute threads' cores.) The planner charges the mean delivery to
// every transfer between stages (plan/profile_costs.cc), and the helpers'
// CPU to the passes that send and receive (NOTE [Messages one at a time]).
Json timeDelivery(c10d::ProcessGroupGloo& pg, int rank) {
  constexpr std::int64_t kWords = 512;  // 4 KB
  constexpr int kCount = 400, kSkipped = 20, kWindow = 4;
  constexpr int kTag = 3, kReplyTag = 4;
  constexpr std::int64_t kBeforeSendUs = 300, kAfterSendUs = 1000, kReceiverPassUs = 300;
  const std::vector<int> cpus = usableCpus();
  auto message = [] { return torch::zeros({kWords}, torch::kLong); };
  Json row;  // rank 1: [bytes, mean, median, 90th percentile, helper CPU]; rank 0: [helper CPU]
  if (rank > 1) {
    pg.barrier()->wait();
  } else {
    ProbeTransport transport(pg);
    runtime::TraceRecorder trace(false);
    const int peer = 1 - rank;
    // The channels' threads keep the helper slice this thread has; the
    // compute thread the kernel's (NOTE [Helper threads wake at once]).
    runtime::Outbound out(transport, peer, trace, "probe", runtime::Posting::kChannel);
    runtime::Inbound in(transport, peer, trace, "probe", runtime::Posting::kChannel);
    const std::chrono::microseconds slice = threadSlice();
    (void)runThreadOn({cpus[static_cast<size_t>(rank) % cpus.size()]});
    setThreadSlice(std::chrono::microseconds(0));
    at::set_num_threads(1);  // as a worker's compute thread with threads: 1
    const int tag = rank == 0 ? kReplyTag : kTag;
    for (int k = 0; k < kWindow; ++k) in.expect(k, tag, message(), "m");
    computeFor(20000);  // warm
    pg.barrier()->wait();
    std::vector<double> delays;
    const double process0 = cpuSeconds(CLOCK_PROCESS_CPUTIME_ID), thread0 = cpuSeconds(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < kCount; ++i) {
      if (rank == 0) {
        computeFor(kBeforeSendUs);
        at::Tensor m = message();
        m[0] = runtime::traceNowUs();
        out.send(kTag, m, "m");
        computeFor(kAfterSendUs);
        (void)in.take(i);
      } else {
        const at::Tensor m = in.take(i);
        const std::int64_t arrived = runtime::traceNowUs();
        if (i >= kSkipped) delays.push_back(1e-6 * static_cast<double>(arrived - m[0].item<std::int64_t>()));
        computeFor(kReceiverPassUs);
        out.send(kReplyTag, message(), "r");
      }
      if (i + kWindow < kCount) in.expect(i + kWindow, tag, message(), "m");
    }
    out.flush();
    // What this rank's other threads took per message sent and received.
    const double helpers = ((cpuSeconds(CLOCK_PROCESS_CPUTIME_ID) - process0) -
                            (cpuSeconds(CLOCK_THREAD_CPUTIME_ID) - thread0)) / kCount;
    (void)runThreadOn(cpus);
    setThreadSlice(slice);
    if (rank == 1) {
      std::sort(delays.begin(), delays.end());
      double sum = 0;
      for (double d : delays) sum += d;
      row = {8 * kWords, sum / static_cast<double>(delays.size()), delays[delays.size() / 2],
             delays[delays.size() * 9 / 10], helpers};
    } else {
      row = {helpers};
    }
  }
  pg.barrier()->wait();
  return row;
}

// Rank 1's `value` on rank 0, through the store under `key`: rank 1 sets it,
// rank 0 waits for it and returns it; null on every rank but 0.
Json fromRankOne(c10d::Store& store, int rank, const std::string& key, const Json& value) {
  if (rank == 1) {
    const std::string text = value.dump();
    store.set(key, std::vector<uint8_t>(text.begin(), text.end()));
  }
  if (rank != 0) return Json();
  const std::vector<uint8_t> raw = store.get(key);
  return Json::parse(std::string(raw.begin(), raw.end()));
}

std::string joinSizes(const std::vector<Bytes>& sizes) {
  std::string s;
  for (Bytes b : sizes) s += (s.empty() ? "" : ",") + std::to_string(b);
  return s;
}

}  // namespace

void fitLine(const std::vector<double>& x, const std::vector<double>& y, double* slope, double* intercept, double* r2) {
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  const double denom = n * sxx - sx * sx;
  *slope = denom != 0 ? (n * sxy - sx * sy) / denom : 0;
  *intercept = (sy - *slope * sx) / n;
  double ssRes = 0, ssTot = 0;
  const double mean = sy / n;
  for (size_t i = 0; i < x.size(); ++i) {
    const double fit = *slope * x[i] + *intercept;
    ssRes += (y[i] - fit) * (y[i] - fit);
    ssTot += (y[i] - mean) * (y[i] - mean);
  }
  *r2 = ssTot > 0 ? 1 - ssRes / ssTot : 1;
}

Status runNetprobeWorker(const std::string& endpoint, const std::string& token, int rank, int world,
                         const std::vector<Bytes>& sizes, int repeats) {
  const auto scheme = endpoint.find("://"), colon = endpoint.rfind(':');
  if (scheme == std::string::npos || colon == std::string::npos || colon < scheme + 3) {
    return invalidArgument("--join must be tcp://host:port");
  }
  const std::string host = endpoint.substr(scheme + 3, colon - scheme - 3);
  HZ_ASSIGN_OR_RETURN(c10::intrusive_ptr<c10d::Store> store,
                      runtime::ControlStore::connect(endpoint, fmt::format("w{}.store", rank), token,
                                                     std::chrono::seconds(60)));
  // Helper threads (Gloo's, the channels') with a worker's short slices, the
  // compute threads with the kernel's (NOTE [Helper threads wake at once]).
  HZ_ASSIGN_OR_RETURN(const std::chrono::microseconds slice, helperThreadSlice());
  if (slice.count() > 0) setThreadSlice(slice);
  auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(60));
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(host));
  c10d::ProcessGroupGloo pg(store, rank, world, options);

  Json result = {{"p2p", Json::array()}, {"allreduce", Json::array()}};
  // Point-to-point ping-pong between ranks 0 and 1; one way = round trip / 2.
  std::vector<Bytes> p2pSizes = {8};
  p2pSizes.insert(p2pSizes.end(), sizes.begin(), sizes.end());
  for (Bytes n : p2pSizes) {
    std::vector<at::Tensor> buf = {torch::zeros({std::max<Bytes>(1, n / 4)}, torch::kFloat)};
    std::vector<double> times;
    for (int r = 0; r < repeats + 1; ++r) {
      const auto t0 = Clock::now();
      if (rank == 0) {
        pg.send(buf, 1, 0)->wait();
        pg.recv(buf, 1, 1)->wait();
      } else if (rank == 1) {
        pg.recv(buf, 0, 0)->wait();
        pg.send(buf, 0, 1)->wait();
      }
      if (r > 0) times.push_back(seconds(t0) / 2);
    }
    if (rank == 0) result["p2p"].push_back({n, median(times)});
  }
  {
    // 8 bytes and the probe's sizes up to 4 MB (the receiver holds kCount
    // of them), ascending and each once, as the profile's table needs.
    std::vector<Bytes> messageSizes = {8};
    for (Bytes n : sizes) {
      if (n > 8 && n <= 4 * kMB) messageSizes.push_back(n);
    }
    std::sort(messageSizes.begin(), messageSizes.end());
    messageSizes.erase(std::unique(messageSizes.begin(), messageSizes.end()), messageSizes.end());
    const Json rows = timeMessages(pg, rank, messageSizes, repeats);
    const Json receiver = fromRankOne(*store, rank, "messages.receiver", rows);
    if (rank == 0) result["messages"] = {{"sender", rows}, {"receiver", receiver}};
  }
  {
    const Json row = timeDelivery(pg, rank);
    Json delivery = fromRankOne(*store, rank, "delivery.receiver", row);  // rank 1's timings
    if (rank == 0) {
      delivery[4] = (delivery[4].get<double>() + row[0].get<double>()) / 2;  // both ranks' helpers, averaged
      result["delivery"] = delivery;
    }
  }
  // The allreduce through shared memory, as co-located replicas sum: on the
  // calling thread (a worker's compute thread, which has no other work then),
  // from the copy in to the sum, so without a busy thread beside it. The
  // fastest of thrice the repeats (they are cheap): a rank that the kernel
  // preempts while its peer spins turns a copy of microseconds into one of a
  // scheduler's quantum, and on a loaded machine medians of a few such
  // times fitted a line falling with size.
  {
    runtime::SharedMemoryOptions so;
    so.rank = rank;
    so.size = world;
    so.capacity = *std::max_element(sizes.begin(), sizes.end());
    so.timeout = std::chrono::seconds(60);
    auto shmStore = c10::make_intrusive<c10d::PrefixStore>("shm", store);
    std::string why;
    auto group = runtime::SharedMemoryGroup::connect(*shmStore, so, &why);
    if (group) {
      result["shared_memory"] = Json::array();
      for (Bytes n : sizes) {
        at::Tensor buf = torch::ones({std::max<Bytes>(1, n / 4)}, torch::kFloat);
        std::vector<double> times;
        for (int r = 0; r < 3 * repeats + 1; ++r) {
          pg.barrier()->wait();
          const auto t0 = Clock::now();
          group->allreduce(buf)->wait();
          if (r > 0) times.push_back(seconds(t0));
        }
        if (rank == 0) result["shared_memory"].push_back({n, *std::min_element(times.begin(), times.end())});
      }
    } else if (rank == 0) {
      result["shared_memory_problem"] = why;
    }
  }
  // Allreduce over everyone, with every rank's compute thread busy (NOTE
  // [Allreduce on busy workers] in network.h).
  BusyCompute busy(rank);
  for (Bytes n : sizes) {
    std::vector<at::Tensor> buf = {torch::ones({std::max<Bytes>(1, n / 4)}, torch::kFloat)};
    std::vector<double> times;
    for (int r = 0; r < repeats + 1; ++r) {
      pg.barrier()->wait();
      const auto t0 = Clock::now();
      pg.allreduce(buf)->wait();
      if (r > 0) times.push_back(seconds(t0));
    }
    if (rank == 0) result["allreduce"].push_back({n, median(times)});
  }
  busy.stop();
  pg.barrier()->wait();
  if (rank == 0) {
    const std::string text = result.dump();
    store->set("result", std::vector<uint8_t>(text.begin(), text.end()));
  }
  return Status();
}

Result<NetworkProfile> probeNetwork(const NetworkProbeOptions& o) {
  if (o.workers < 2) return invalidArgument("the network probe needs at least 2 workers");
  if (o.sizes.size() < 2) return invalidArgument("the network probe needs at least 2 message sizes to fit a line");
  // The rendezvous: a store served on a control socket of the probe's own
  // (wire/store.h), bound to the address measured, as a job's coordinator
  // serves its workers; the token reaches the workers in their environment.
  const std::string token = wire::newToken();
  auto server = wire::ControlServer::bind(o.host, 0, token);
  if (!server.ok()) return unavailable(fmt::format("cannot host the probe's rendezvous on {}: {}", o.host, server.status().message()));
  wire::StoreService store;
  const std::string endpoint = (*server)->endpoint();
  const std::string exe = o.executable.empty() ? "/proc/self/exe" : o.executable;
  std::vector<std::string> env = environmentWith({{"HYDROZOA_TOKEN", (*server)->credential(token)}});
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  std::vector<pid_t> children;
  auto reapAll = [&](bool kill) {
    for (pid_t pid : children) {
      if (kill) ::kill(pid, SIGKILL);
      int st = 0;
      ::waitpid(pid, &st, 0);
    }
    children.clear();
  };
  for (int r = 0; r < o.workers; ++r) {
    std::vector<std::string> args = {"hydrozoa",         "--log-level",     "warn",
                                     "netprobe-worker",  "--join",          endpoint,
                                     "--rank",           std::to_string(r), "--world",
                                     std::to_string(o.workers), "--sizes", joinSizes(o.sizes),
                                     "--repeats",        std::to_string(o.repeats)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int err = ::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), envp.data());
    if (err != 0) {
      reapAll(true);
      return unavailable(fmt::format("cannot start a probe worker ({}): {}", exe, std::strerror(err)));
    }
    children.push_back(pid);
  }
  // Wait for the result, watching for a worker that dies first.
  const auto t0 = Clock::now();
  while (!store.find("result")) {
    std::string from;
    Json m;
    const bool got = (*server)->receive(&from, &m, 20);
    wire::serveStore(**server, store, from, got ? &m : nullptr);
    for (pid_t pid : children) {
      int st = 0;
      if (::waitpid(pid, &st, WNOHANG) == pid) {
        children.erase(std::find(children.begin(), children.end(), pid));
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
          reapAll(true);
          return unavailable(fmt::format("a network probe worker (pid {}) failed; its message is above", pid));
        }
        break;
      }
    }
    if (seconds(t0) > o.timeout) {
      reapAll(true);
      return unavailable(fmt::format("the network probe did not finish within {}", formatSeconds(o.timeout)));
    }
  }
  // Rank 0 published the result after the last barrier: the workers are done with the store.
  const std::string raw = *store.find("result");
  reapAll(false);
  HZ_ASSIGN_OR_RETURN(Json result, parseJson(raw, "network probe result"));

  NetworkProfile net;
  std::vector<double> x, y;
  for (const auto& e : result["p2p"]) {
    const double n = e[0].get<double>(), t = e[1].get<double>();
    if (n <= 8) {
      net.latency = t;
    } else {
      x.push_back(n);
      y.push_back(t);
    }
  }
  double slope = 0, intercept = 0, r2 = 0;
  fitLine(x, y, &slope, &intercept, &r2);
  net.bandwidth = slope > 0 ? 1.0 / slope : x.back() / y.back();
  x.clear();
  y.clear();
  const double A = o.workers;
  for (const auto& e : result["allreduce"]) {
    x.push_back(e[0].get<double>() / A);
    y.push_back(e[1].get<double>() / (2 * (A - 1)));
  }
  fitLine(x, y, &slope, &intercept, &r2);
  net.alpha = slope - 1.0 / net.bandwidth;
  net.beta = std::max(0.0, intercept);
  net.allreduce_workers = o.workers;
  net.fit_r2 = r2;
  if (result.contains("shared_memory") && result["shared_memory"].size() >= 2) {
    x.clear();
    y.clear();
    for (const auto& e : result["shared_memory"]) {
      x.push_back(e[0].get<double>());
      y.push_back(e[1].get<double>());
    }
    NetworkProfile::SharedMemoryFit fit;
    fitLine(x, y, &slope, &intercept, &fit.r2);
    fit.seconds_per_byte = std::max(0.0, slope);
    fit.seconds_per_allreduce = std::max(0.0, intercept);
    net.shared_memory = fit;
  } else {
    spdlog::warn("the network probe could not time an allreduce through shared memory ({}): replicas on this host "
                 "will be planned as summing over the network",
                 result.value("shared_memory_problem", std::string("no result")));
  }
  if (const Json& d = result.value("delivery", Json()); d.is_array() && d.size() == 5) {
    net.delivery = MessageDelivery{d[0].get<Bytes>(), d[1].get<double>(), d[2].get<double>(), d[3].get<double>(),
                                   std::max(0.0, d[4].get<double>())};
  }
  if (result.contains("messages")) {
    const Json& sender = result["messages"]["sender"];      // [n, sending thread, the sender's other threads]
    const Json& receiver = result["messages"]["receiver"];  // [n, posting thread, the receiver's other threads]
    MessageCpuTable table;
    for (size_t i = 0; i < sender.size() && i < receiver.size(); ++i) {
      auto at = [](const Json& row, size_t k) { return std::max(0.0, row[k].get<double>()); };
      table.rows.push_back({sender[i][0].get<Bytes>(), at(sender[i], 1), at(sender[i], 2), at(receiver[i], 1),
                            at(receiver[i], 2)});
    }
    if (!table.rows.empty()) net.messages = table;
  }
  return net;
}

}  // namespace hydrozoa::profile
