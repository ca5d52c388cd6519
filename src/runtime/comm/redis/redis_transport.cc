#include "runtime/comm/redis/redis_transport.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace hydrozoa::runtime::redis {

Result<SyncMethod> parseSyncMethod(const std::string& text, const std::string& what) {
  if (text == "pipelined") return SyncMethod::kPipelined;
  if (text == "lambdaml") return SyncMethod::kLambdaML;
  return invalidArgument(fmt::format("{}: unknown sync method \"{}\"; expected pipelined (FuncPipe's scatter-reduce) "
                                     "or lambdaml (LambdaML's)",
                                     what, text));
}

const char* syncMethodName(SyncMethod m) { return m == SyncMethod::kPipelined ? "pipelined" : "lambdaml"; }

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWindow = 8;                 // chunks in flight per transfer
constexpr const char* kPollSeconds = "1";  // a blocking read wakes this often to see an abort
const Seconds kSocketTimeout = 30;         // every reply comes within it (blocking reads: kPollSeconds)

[[noreturn]] void fail(const Status& s) { throw std::runtime_error(s.message()); }

template <typename T>
T orThrow(Result<T> r) {
  if (!r.ok()) fail(r.status());
  return std::move(r).value();
}

// One asynchronous operation, finished by the lane that runs it.
class RedisWork final : public c10d::Work {
 public:
  explicit RedisWork(c10d::OpType type) : c10d::Work(-1, type) {}
  void abort() override { aborted_.store(true); }
  void complete(std::exception_ptr e) { finish(std::move(e)); }
  const std::atomic<bool>& aborted() const { return aborted_; }

 private:
  std::atomic<bool> aborted_{false};
};

using Op = std::function<void(Connection&, const std::atomic<bool>& aborted)>;

// NOTE [A store's error ends every wait]
// A write the store refuses (full: maxmemory) fails its operation, which
// its caller may wait on only much later (a send is flushed at the step's
// end), while the worker blocks on a receive its peers cannot complete
// without that write: each would wait out the timeout. So the first such
// error breaks the whole transport: every wait in progress (at its next
// poll, within a second) or to come ends with that error, not as a lost
// peer (it would recur).
struct Broken {
  std::mutex mu;
  std::string why;
  std::atomic<bool> set{false};
  void fail(const std::string& message) {
    std::lock_guard<std::mutex> lock(mu);
    if (set.load()) return;
    why = message;
    set.store(true);
  }
  [[noreturn]] void rethrow() {
    std::lock_guard<std::mutex> lock(mu);
    throw std::runtime_error(why);
  }
};
// The transport's, for the lane thread running an operation.
thread_local Broken* tBroken = nullptr;

// Whether a wait should end: aborted, or the transport broken.
bool shouldEnd(const std::atomic<bool>& aborted) { return aborted.load() || (tBroken && tBroken->set.load()); }
// Ends a wait: with the store's error when the transport broke, else as aborted.
[[noreturn]] void endWait(const char* what) {
  if (tBroken && tBroken->set.load()) tBroken->rethrow();
  throw PeerLostError(what);
}

// A thread with a connection of its own that runs its operations in order.
class Lane {
 public:
  Lane(const ChannelOptions& o, std::string name, Broken* broken)
      : o_(o), name_(std::move(name)), broken_(broken), thread_([this] { run(); }) {}
  ~Lane() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      for (auto& [work, op] : queue_) work->abort();
      if (running_) running_->abort();
    }
    cv_.notify_all();
    thread_.join();
  }
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  c10::intrusive_ptr<RedisWork> post(c10d::OpType type, Op op) {
    auto work = c10::make_intrusive<RedisWork>(type);
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.emplace_back(work, std::move(op));
    }
    cv_.notify_all();
    return work;
  }

 private:
  void run() {
    tBroken = broken_;
    std::optional<Connection> conn;
    std::string connectError;
    for (;;) {
      c10::intrusive_ptr<RedisWork> work;
      Op op;
      bool stopping = false;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        work = queue_.front().first;
        op = std::move(queue_.front().second);
        queue_.pop_front();
        running_ = work;
        stopping = stop_;
      }
      try {
        if (stopping) throw PeerLostError("the Redis channel was closed (aborted)");
        if (!conn) {
          auto c = Connection::open(o_.address, o_.password, kSocketTimeout);
          if (!c.ok()) fail(c.status());
          conn.emplace(std::move(c).value());
        }
        if (broken_->set.load()) broken_->rethrow();
        op(*conn, work->aborted());
        work->complete(nullptr);
      } catch (const PeerLostError&) {
        conn.reset();  // a connection left mid-pipeline cannot take the next operation
        work->complete(std::current_exception());
      } catch (const std::exception& e) {
        conn.reset();
        broken_->fail(e.what());  // NOTE [A store's error ends every wait]
        work->complete(std::current_exception());
      }
      std::lock_guard<std::mutex> lock(mu_);
      running_.reset();
    }
  }

  const ChannelOptions& o_;
  std::string name_;
  Broken* broken_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<c10::intrusive_ptr<RedisWork>, Op>> queue_;
  c10::intrusive_ptr<RedisWork> running_;
  bool stop_ = false;
  std::thread thread_;
};

size_t chunksOf(size_t bytes, size_t chunk) { return std::max<size_t>(1, (bytes + chunk - 1) / chunk); }

// Appends [data, data + bytes) to list `key` in chunks, a window of them in
// flight (an empty message is one empty chunk, so it is still a message).
void push(Connection& c, const std::string& key, const char* data, size_t bytes, size_t chunk) {
  const size_t n = chunksOf(bytes, chunk);
  size_t sent = 0, acked = 0;
  while (acked < n) {
    while (sent < n && sent - acked < kWindow) {
      const size_t at = sent * chunk, len = std::min(chunk, bytes - std::min(bytes, at));
      c.append({"RPUSH", key, std::string_view(data + std::min(at, bytes), len)});
      ++sent;
    }
    orThrow(c.next());
    ++acked;
  }
}

// What a read that made no progress for `timeout` says.
[[noreturn]] void silent(const ChannelOptions& o, const std::string& from, const std::string& key) {
  throw PeerLostError(fmt::format(
      "Timed out: no message from {} for {:g} s on the Redis channel at {} (key {}): it stopped, or its message was "
      "lost from the store (evicted? the store must run with maxmemory-policy noeviction)",
      from, o.timeout, o.address.url(), key));
}

// Pops `bytes` bytes from list `key` into `dst`, chunk by chunk (at most a
// window of blocking reads in flight, never more than the message has
// chunks: a read too many would take the next message's first chunk).
void pop(Connection& c, const ChannelOptions& o, const std::string& key, char* dst, size_t bytes, size_t chunk,
         const std::atomic<bool>& aborted, const std::string& from) {
  const size_t n = chunksOf(bytes, chunk);
  size_t got = 0, inFlight = 0;
  auto lastProgress = Clock::now();
  bool stopping = false;
  while (got < n || inFlight > 0) {
    while (!stopping && got + inFlight < n && inFlight < kWindow) {
      c.append({"BLPOP", key, kPollSeconds});
      ++inFlight;
    }
    Reply r = orThrow(c.next());
    --inFlight;
    if (r.isNil()) {  // nothing within the poll: see whether to go on
      if (shouldEnd(aborted)) stopping = true;
      if (std::chrono::duration<double>(Clock::now() - lastProgress).count() > o.timeout) stopping = true;
      if (stopping && inFlight == 0) {
        if (shouldEnd(aborted)) endWait("the receive was aborted");
        silent(o, from, key);
      }
      continue;
    }
    if (r.type() != Reply::Type::kArray || r.size() != 2) fail(internalError("BLPOP answered an unexpected reply"));
    const std::string_view data = r.at(1).str();
    const size_t at = got * chunk, want = std::min(chunk, bytes - std::min(bytes, at));
    if (data.size() != want) {
      fail(internalError(fmt::format("a message from {} on the Redis channel (key {}) has a chunk of {} bytes where {} "
                                     "were expected: the peers disagree on the tensor's shape",
                                     from, key, data.size(), want)));
    }
    if (!stopping) std::memcpy(dst + at, data.data(), data.size());
    ++got;
    lastProgress = Clock::now();
  }
  if (stopping) endWait("the receive was aborted");
}

// Waits for one (small) element of list `key`, polling for an abort; returns it.
std::string await(Connection& c, const ChannelOptions& o, const std::string& key, const std::atomic<bool>& aborted,
                  const std::string& from) {
  const auto t0 = Clock::now();
  for (;;) {
    Reply r = orThrow(c.run({"BLPOP", key, kPollSeconds}));
    if (!r.isNil()) return r.size() == 2 ? std::string(r.at(1).str()) : std::string();
    if (shouldEnd(aborted)) endWait("the wait was aborted");
    if (std::chrono::duration<double>(Clock::now() - t0).count() > o.timeout) silent(o, from, key);
  }
}

// Reads the chunks of list `key` without popping them (a merged split that
// every replica reads).
void read(Connection& c, const std::string& key, char* dst, size_t bytes, size_t chunk, const std::string& from) {
  const size_t n = chunksOf(bytes, chunk);
  for (size_t i = 0; i < n; ++i) c.append({"LINDEX", key, std::to_string(i)});
  for (size_t i = 0; i < n; ++i) {
    Reply r = orThrow(c.next());
    const size_t at = i * chunk, want = std::min(chunk, bytes - std::min(bytes, at));
    if (r.isNil()) {
      throw PeerLostError(fmt::format("the sum from {} on the Redis channel (key {}) was lost from the store (evicted? "
                                      "the store must run with maxmemory-policy noeviction)",
                                      from, key));
    }
    if (r.type() != Reply::Type::kString || r.str().size() != want) {
      fail(internalError(fmt::format("the sum from {} on the Redis channel (key {}) has the wrong size", from, key)));
    }
    std::memcpy(dst + at, r.str().data(), want);
  }
}

char* bytesOf(const torch::Tensor& t) { return static_cast<char*>(t.data_ptr()); }
size_t sizeOf(const torch::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

// NOTE [Scatter-reduce through storage]
// n replicas sum a flat tensor split into n parts; replica i owns part i: it
// downloads every other replica's part i, adds them to its own, uploads the
// sum once, and downloads the other n − 1 sums (FuncPipe §3.3, Fig. 4).
//   LambdaML:  upload the n − 1 parts (phase 1), then download and add
//              (phase 2), then upload the sum and download the others
//              (phase 3), one after the other on one connection.
//   Pipelined: phases 1 and 2 at once, in n steps: in step k replica i
//              uploads part i + k while downloading the part i that replica
//              i − (k − 1) uploaded in step k − 1; uploads and downloads go
//              on two connections (a link is duplex).
// Keys: <ns>:r:<stage>:<seq>:<part>:<from> (a part in flight), popped, so
// gone once added; <ns>:m:<stage>:<seq>:<part> (a sum), read in place by the
// n − 1 others, each told it is there by <ns>:n:…:<reader> and counting down
// <ns>:c:…, the last reader deleting both. Replica i adds in a fixed order
// (its own part, then i − 1, i − 2, … for the pipelined, 0, 1, … for
// LambdaML's), so a run is deterministic; each part is summed by one replica
// and read by the rest, so every replica ends with the same sums.
class ScatterReduce {
 public:
  ScatterReduce(const ChannelOptions& o, std::uint64_t seq, torch::Tensor flat)
      : o_(o), seq_(seq), flat_(std::move(flat)), n_(o.replicas), i_(o.replica) {}

  torch::Tensor part(int j) const {
    const std::int64_t N = flat_.numel();
    const std::int64_t a = N * j / n_, b = N * (j + 1) / n_;
    return flat_.narrow(0, a, b - a);
  }
  std::string key(char kind, int part) const { return fmt::format("{}:{}:{}:{}:{}", o_.ns, kind, o_.stage, seq_, part); }
  std::string partKey(int part, int from) const { return key('r', part) + ":" + std::to_string(from); }
  std::string who(int replica) const { return fmt::format("replica {} of stage {}", replica, o_.stage); }
  size_t chunk() const { return static_cast<size_t>(o_.chunk_bytes); }

  void upload(Connection& c, int j) const {
    const torch::Tensor p = part(j);
    push(c, partKey(j, i_), bytesOf(p), sizeOf(p), chunk());
  }
  void downloadAndAdd(Connection& c, int from, const std::atomic<bool>& aborted) {
    torch::Tensor mine = part(i_);
    if (!scratch_.defined() || scratch_.numel() < mine.numel()) scratch_ = torch::empty_like(mine);
    torch::Tensor other = scratch_.narrow(0, 0, mine.numel());
    pop(c, o_, partKey(i_, from), bytesOf(other), sizeOf(other), chunk(), aborted, who(from));
    mine.add_(other);
  }
  // Phase 3: the sum of part i up for the others, theirs down.
  void exchangeSums(Connection& c, const std::atomic<bool>& aborted) {
    const torch::Tensor mine = part(i_);
    push(c, key('m', i_), bytesOf(mine), sizeOf(mine), chunk());
    c.append({"SET", key('c', i_), std::to_string(n_ - 1)});
    for (int r = 0; r < n_; ++r) {
      if (r != i_) c.append({"RPUSH", key('n', i_) + ":" + std::to_string(r), "1"});
    }
    for (int r = 0; r < n_; ++r) orThrow(c.next());
    for (int k = 1; k < n_; ++k) {
      const int j = (i_ + k) % n_;
      await(c, o_, key('n', j) + ":" + std::to_string(i_), aborted, who(j));
      torch::Tensor p = part(j);
      read(c, key('m', j), bytesOf(p), sizeOf(p), chunk(), who(j));
      const Reply left = orThrow(c.run({"DECR", key('c', j)}));
      if (left.integer() <= 0) orThrow(c.run({"UNLINK", key('m', j), key('c', j)}));
    }
  }

 private:
  const ChannelOptions& o_;
  std::uint64_t seq_;
  torch::Tensor flat_, scratch_;
  int n_, i_;
};

class RedisTransport final : public Transport {
 public:
  explicit RedisTransport(const ChannelOptions& o)
      : o_(o),
        sync_(std::make_unique<Lane>(o_, "sync", &broken_)),
        syncUp_(std::make_unique<Lane>(o_, "sync upload", &broken_)) {}
  ~RedisTransport() override {
    // Lanes first: they use o_.
    std::lock_guard<std::mutex> lock(mu_);
    sends_.clear();
    recvs_.clear();
    sync_.reset();
    syncUp_.reset();
  }

  int rank() const override { return o_.rank; }
  int worldSize() const override { return o_.world_size; }
  int stageReplicas() const override { return o_.replicas; }

  c10::intrusive_ptr<c10d::Work> send(torch::Tensor& tensor, int peer, int tag) override {
    torch::Tensor t = tensor.is_cpu() ? tensor.contiguous() : tensor.cpu();
    const std::string key = p2pKey(o_.rank, peer, tag, sent_);
    const size_t chunk = static_cast<size_t>(o_.chunk_bytes);
    return lane(sends_, peer, "send").post(c10d::OpType::SEND, [t, key, chunk](Connection& c, const std::atomic<bool>&) {
      push(c, key, bytesOf(t), sizeOf(t), chunk);
    });
  }

  c10::intrusive_ptr<c10d::Work> recv(torch::Tensor& tensor, int peer, int tag) override {
    torch::Tensor dst = tensor;
    const std::string key = p2pKey(peer, o_.rank, tag, received_);
    const std::string from = fmt::format("rank {}", peer);
    return lane(recvs_, peer, "recv").post(
        c10d::OpType::RECV, [this, dst, key, from](Connection& c, const std::atomic<bool>& aborted) mutable {
          const bool direct = dst.is_cpu() && dst.is_contiguous();
          torch::Tensor buf = direct ? dst : torch::empty(dst.sizes(), dst.options().device(torch::kCPU));
          pop(c, o_, key, bytesOf(buf), sizeOf(buf), static_cast<size_t>(o_.chunk_bytes), aborted, from);
          if (!direct) dst.copy_(buf);
        });
  }

  c10::intrusive_ptr<c10d::Work> allreduceStage(torch::Tensor& tensor) override {
    HZ_CHECK(o_.replicas > 1);
    torch::Tensor dst = tensor;
    const std::uint64_t seq = syncSeq_++;
    return sync_->post(c10d::OpType::ALLREDUCE, [this, dst, seq](Connection& c, const std::atomic<bool>& aborted) {
      torch::Tensor flat = dst.is_cpu() && dst.is_contiguous() ? dst.view({-1}) : dst.cpu().contiguous().view({-1});
      ScatterReduce sr(o_, seq, flat);
      const int n = o_.replicas, i = o_.replica;
      if (o_.sync == SyncMethod::kPipelined) {
        auto up = syncUp_->post(c10d::OpType::SEND, [&sr, n, i](Connection& uc, const std::atomic<bool>&) {
          for (int k = 1; k < n; ++k) sr.upload(uc, (i + k) % n);
        });
        try {
          for (int k = 1; k < n; ++k) sr.downloadAndAdd(c, (i - k + n) % n, aborted);
        } catch (...) {
          up->abort();
          up->wait();  // sr is on this stack
          throw;
        }
        up->wait();
      } else {
        for (int j = 0; j < n; ++j) {
          if (j != i) sr.upload(c, j);
        }
        for (int j = 0; j < n; ++j) {
          if (j != i) sr.downloadAndAdd(c, j, aborted);
        }
      }
      sr.exchangeSums(c, aborted);
      if (flat.data_ptr() != dst.data_ptr()) dst.copy_(flat.view(dst.sizes()));
    });
  }

  void barrier() override { (void)anyWorker(false); }
  // Each worker adds 1 to the barrier's count, and the world size more
  // when `mine`: the count is a multiple of the world size at the last
  // arrival, and exceeds it when some worker's flag was set. The last tells
  // the others which.
  bool anyWorker(bool mine) override {
    const std::uint64_t seq = barrierSeq_++;
    bool any = false;
    sync_->post(c10d::OpType::BARRIER, [this, seq, mine, &any](Connection& c, const std::atomic<bool>& aborted) {
          const std::string count = fmt::format("{}:b:{}", o_.ns, seq);
          const std::int64_t world = o_.world_size;
          const Reply arrived = orThrow(c.run({"INCRBY", count, std::to_string(mine ? 1 + world : 1)}));
          if (arrived.integer() % world == 0) {
            any = arrived.integer() > world;
            for (int r = 0; r < o_.world_size; ++r) {
              if (r != o_.rank) c.append({"RPUSH", fmt::format("{}:{}", count, r), any ? "1" : "0"});
            }
            for (int r = 1; r < o_.world_size; ++r) orThrow(c.next());
            orThrow(c.run({"UNLINK", count}));
          } else {
            any = await(c, o_, fmt::format("{}:{}", count, o_.rank), aborted, "the other workers (a barrier)") == "1";
          }
        })
        ->wait();
    return any;
  }

 private:
  // The key of the next message between src and dst under `tag`: each
  // message has a key of its own (numbered by both sides alike), so one
  // lost from the store is waited for, never taken for the next.
  std::string p2pKey(int src, int dst, int tag, std::map<std::pair<int, int>, std::uint64_t>& count) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::uint64_t n = count[{src == o_.rank ? dst : src, tag}]++;
    return fmt::format("{}:p:{}:{}:{}:{}", o_.ns, src, dst, tag, n);
  }
  Lane& lane(std::map<int, std::unique_ptr<Lane>>& lanes, int peer, const char* what) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& l = lanes[peer];
    if (!l) l = std::make_unique<Lane>(o_, fmt::format("{} {}", what, peer), &broken_);
    return *l;
  }

  const ChannelOptions o_;
  Broken broken_;  // before the lanes, which use it
  std::mutex mu_;
  std::map<int, std::unique_ptr<Lane>> sends_, recvs_;
  std::map<std::pair<int, int>, std::uint64_t> sent_, received_;  // messages per (peer, tag)
  std::unique_ptr<Lane> sync_, syncUp_;
  std::uint64_t syncSeq_ = 0, barrierSeq_ = 0;
};

}  // namespace

Result<std::unique_ptr<Transport>> connectChannel(const ChannelOptions& o) {
  HZ_CHECK(o.chunk_bytes > 0 && o.replicas >= 1 && o.world_size >= 1);
  // The first connection says whether the store is there and takes the
  // password, with the fix in its message; the lanes connect when first used.
  HZ_ASSIGN_OR_RETURN(Connection c, Connection::open(o.address, o.password, 10));
  HZ_RETURN_IF_ERROR(checkStore(c));
  return std::unique_ptr<Transport>(new RedisTransport(o));
}

}  // namespace hydrozoa::runtime::redis
