#include "runtime/comm/shared_memory.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <random>
#include <thread>

#include "core/status.h"
#include "runtime/comm/peer_lost.h"

namespace hydrozoa::runtime {

// NOTE [Shared-memory allreduce]
// Replicas on one host summed their gradients through Gloo's TCP sockets
// over loopback: every byte copied into and out of the kernel twice per
// ring round, by Gloo's own threads, which on a host whose cores all
// compute take them from the backward pass; and each round waits for a
// sleeping thread to be woken. Measured on this project's 2-core VM, a
// Gloo allreduce of 1.3 KB between two busy workers took 1-1.8 ms and one
// of 1.6 MB held its bucket for 11 ms (bench/README.md, train_bench).
//
// Here the group shares one segment in /dev/shm: a header of counters and
// one slot per rank. Allreduce number s of `n` elements, at the same offset
// in every slot:
//   1. post: a rank copies its tensor into its slot and sets posted[r] = s;
//   2. reduce: once every posted[q] >= s, rank r sums its share of the
//      elements (the r-th of N near-equal ranges) from every slot into its
//      own slot and sets reduced[r] = s;
//   3. gather: once every reduced[q] >= s, it copies each rank q's share
//      from slot q into its tensor and sets done[r] = s.
// Each element is summed once, by one rank, so every rank gets the same
// bits. post() returns after step 1; wait() does 2 and 3, so a bucket is
// copied in while the backward pass goes on and summed at its end. A
// bucket's gradients go into the slot one after another and their sums
// straight back into them (GradientSync, allreduceStageParts): the copy
// into one concatenated tensor and back out of it that Gloo's allreduce
// needs is not made, which halves the bytes a worker copies per step.
// Allreduces in flight take consecutive ranges of the slots; when the next
// does not fit, the ones pending are finished and the slots are reused from
// the start once every rank's done[] says nobody reads them any more.
//
// Waiting: a rank spins on the peer's counter (with the pause instruction,
// then sched_yield, so a helper thread that wants the core gets it) when
// every worker has a core of its own; it sleeps on a futex in the header
// after a short spin when workers share cores. Publishing wakes sleepers
// only when the header says there are some.
//
// A lost peer: each rank holds an open-file-description lock on byte r of
// the segment's file, which the kernel drops when the process ends however
// it ends. A waiting rank tests the peer's lock every 10 ms and throws
// PeerLostError when it is gone, as Gloo's closed socket makes its wait
// throw. Rank 0 unlinks the file once every rank has it open, so nothing
// is left in /dev/shm whichever process dies.

namespace {

constexpr std::uint64_t kMagic = 0x687a73686d617231ULL;  // "hzshmar1"
constexpr Bytes kHeaderBytes = 64 * 1024;
constexpr Bytes kPage = 4096;
constexpr int kMaxRanks = 256;
enum Counter { kPosted = 0, kReduced = 1, kDone = 2 };

Bytes roundUp(Bytes n, Bytes to) { return (n + to - 1) / to * to; }

long futex(std::atomic<std::uint32_t>* word, int op, std::uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), op, value, timeout, nullptr, 0);
}

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Takes (lock) or tests (test) the write lock on byte `rank` of `fd`.
bool lockByte(int fd, int rank) {
  struct flock l {};
  l.l_type = F_WRLCK;
  l.l_whence = SEEK_SET;
  l.l_start = rank;
  l.l_len = 1;
  return ::fcntl(fd, F_OFD_SETLK, &l) == 0;
}

std::string hex(std::uint64_t a, std::uint64_t b) { return fmt::format("{:016x}{:016x}", a, b); }

void setKey(c10d::Store& store, const std::string& key, const std::string& value) {
  store.set(key, std::vector<std::uint8_t>(value.begin(), value.end()));
}
std::string getKey(c10d::Store& store, const std::string& key) {
  const std::vector<std::uint8_t> v = store.get(key);
  return std::string(v.begin(), v.end());
}

}  // namespace

struct SharedMemoryGroup::Header {
  std::uint64_t magic;
  std::uint64_t nonce[2];
  std::int64_t size;
  std::int64_t capacity;
  alignas(64) std::atomic<std::uint32_t> event;  // futex word, bumped by every publish
  std::atomic<std::uint32_t> sleepers;           // ranks asleep on it
  struct alignas(64) Rank {
    std::atomic<std::uint64_t> counter[3];  // posted, reduced, done
  } ranks[kMaxRanks];
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free && std::atomic<std::uint32_t>::is_always_lock_free,
              "counters shared between processes must be lock-free");

std::unique_ptr<SharedMemoryGroup> SharedMemoryGroup::connect(c10d::Store& store, const SharedMemoryOptions& o,
                                                              std::string* why) {
  HZ_CHECK(o.size >= 1 && o.size <= kMaxRanks && o.rank >= 0 && o.rank < o.size);
  const Bytes capacity = roundUp(std::max<Bytes>(o.capacity, kMB), kPage);
  const Bytes bytes = kHeaderBytes + capacity * o.size;
  std::string problem;
  int fd = -1;
  void* base = nullptr;
  auto fail = [&](const std::string& what) {
    if (problem.empty()) problem = fmt::format("{}: {}", what, std::strerror(errno));
  };
  std::uint64_t nonce[2] = {0, 0};
  std::string name;
  bool created = false;  // by this rank, and not unlinked yet
  // Whatever the store throws (a timeout, a lost store) leaves nothing
  // behind: no mapping, no descriptor, no file in /dev/shm.
  struct Release {
    int& fd;
    void*& base;
    Bytes bytes;
    const std::string& name;
    bool& created;
    bool armed = true;
    ~Release() {
      if (!armed) return;
      if (base) ::munmap(base, static_cast<size_t>(bytes));
      if (fd >= 0) ::close(fd);
      if (created) ::shm_unlink(name.c_str());
    }
  } release{fd, base, bytes, name, created};
  auto map = [&] {
    base = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      base = nullptr;
      fail("cannot map /dev/shm" + name);
    }
  };
  if (o.rank == 0) {
    std::random_device rd;
    for (auto& n : nonce) n = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    name = "/hydrozoa-" + hex(nonce[0], nonce[1]);
    fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) fail("cannot create /dev/shm" + name);
    created = fd >= 0;
    // Held from the start, so that `hydrozoa cleanup` never takes a segment
    // in the making for one that a dead job left (removeAbandonedSegments).
    if (created && !lockByte(fd, 0)) fail("cannot lock its byte of the segment");
    if (problem.empty() && ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) fail("cannot size /dev/shm" + name);
    if (problem.empty()) map();
    if (base) {
      auto* h = new (base) Header();
      h->nonce[0] = nonce[0];
      h->nonce[1] = nonce[1];
      h->size = o.size;
      h->capacity = capacity;
      std::atomic_thread_fence(std::memory_order_release);
      h->magic = kMagic;
    }
    setKey(store, "shm/name", problem.empty() ? name : "-");
  } else {
    name = getKey(store, "shm/name");
    if (name == "-") {
      problem = "rank 0 could not make the segment";
    } else if (name.size() != 42 || name.rfind("/hydrozoa-", 0) != 0) {
      problem = fmt::format("the store names no segment of ours (\"{}\")", name.substr(0, 64));
    } else {
      fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
      if (fd < 0) fail("cannot open /dev/shm" + name + " (another host or another /dev/shm)");
      struct stat st {};
      if (problem.empty() && (::fstat(fd, &st) != 0 || st.st_size != static_cast<off_t>(bytes))) {
        problem = fmt::format("/dev/shm{} is not the group's segment (its size differs)", name);
      }
      if (problem.empty()) map();
      if (base) {
        const auto* h = static_cast<const Header*>(base);
        if (h->magic != kMagic || h->size != o.size || h->capacity != capacity ||
            name != "/hydrozoa-" + hex(h->nonce[0], h->nonce[1])) {
          problem = fmt::format("/dev/shm{} is not the group's segment", name);
        }
      }
    }
  }
  // Each rank reserves its own slot's pages now (they are its memory, as
  // its gradients are): a /dev/shm too small for the group (a container's
  // 64 MB, say) is an answer here rather than a SIGBUS mid-training.
  if (problem.empty()) {
    const Bytes from = o.rank == 0 ? 0 : kHeaderBytes + o.rank * capacity;
    const Bytes to = kHeaderBytes + (o.rank + 1) * capacity;
    if (const int err = ::posix_fallocate(fd, static_cast<off_t>(from), static_cast<off_t>(to - from)); err != 0) {
      problem = fmt::format("cannot reserve {} in /dev/shm: {}", formatBytes(to - from), std::strerror(err));
    }
  }
  if (problem.empty() && o.rank != 0 && !lockByte(fd, o.rank)) fail("cannot lock its byte of the segment");
  setKey(store, fmt::format("shm/ok{}", o.rank), problem.empty() ? "ok" : problem);
  std::string verdict;
  if (o.rank == 0) {
    // Everyone has the file open (or has given up): unlink it now, so that
    // it goes with the last process however the processes end.
    for (int r = 0; r < o.size && verdict.empty(); ++r) {
      const std::string said = getKey(store, fmt::format("shm/ok{}", r));
      if (said != "ok") verdict = fmt::format("rank {}: {}", r, said);
    }
    if (created) ::shm_unlink(name.c_str());
    created = false;
    setKey(store, "shm/verdict", verdict.empty() ? "ok" : verdict);
  } else {
    verdict = getKey(store, "shm/verdict");
    if (verdict == "ok") verdict.clear();
  }
  if (!verdict.empty()) {
    if (why) *why = verdict;
    return nullptr;  // `release` unmaps and closes
  }
  // Every page of the segment into this process's page tables now, while
  // nothing waits for it: the first allreduces through a region would
  // otherwise take a fault per page of every slot (measured here: a first
  // 1 MB allreduce of two ranks 5 ms; with the pages mapped, 0.12 ms).
  {
    volatile const char* p = static_cast<const char*>(base);
    for (Bytes at = 0; at < bytes; at += kPage) (void)p[at];
  }
  release.armed = false;
  return std::unique_ptr<SharedMemoryGroup>(new SharedMemoryGroup(o, fd, base, bytes, capacity));
}

SharedMemoryGroup::SharedMemoryGroup(const SharedMemoryOptions& o, int fd, void* base, Bytes mapped, Bytes capacity)
    : o_(o), fd_(fd), base_(base), mapped_(mapped), capacity_(capacity), header_(static_cast<Header*>(base)) {
  static_assert(sizeof(Header) <= kHeaderBytes, "the header outgrew its space");
}

SharedMemoryGroup::~SharedMemoryGroup() {
  ::munmap(base_, static_cast<size_t>(mapped_));
  ::close(fd_);  // drops the lock: peers still waiting learn this rank is gone
}

at::Tensor SharedMemoryGroup::slot(int rank, Bytes offset, std::int64_t numel, at::ScalarType type) const {
  char* p = static_cast<char*>(base_) + kHeaderBytes + rank * capacity_ + offset;
  return at::from_blob(p, {numel}, at::TensorOptions().dtype(type));
}

bool SharedMemoryGroup::alive(int peer) const {
  struct flock l {};
  l.l_type = F_WRLCK;
  l.l_whence = SEEK_SET;
  l.l_start = peer;
  l.l_len = 1;
  if (::fcntl(fd_, F_OFD_GETLK, &l) != 0) return true;  // cannot tell: the timeout still applies
  return l.l_type != F_UNLCK;
}

void SharedMemoryGroup::publish(int which, std::uint64_t seq) {
  header_->ranks[o_.rank].counter[which].store(seq, std::memory_order_release);
  header_->event.fetch_add(1, std::memory_order_seq_cst);
  if (header_->sleepers.load(std::memory_order_seq_cst) > 0) futex(&header_->event, FUTEX_WAKE, INT_MAX, nullptr);
}

void SharedMemoryGroup::waitFor(int peer, int which, std::uint64_t seq) {
  const std::atomic<std::uint64_t>& c = header_->ranks[peer].counter[which];
  auto ready = [&] { return c.load(std::memory_order_acquire) >= seq; };
  if (ready()) return;
  for (int i = 0; i < 2000; ++i) {  // a few microseconds: a peer just behind
    cpuRelax();
    if (ready()) return;
  }
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto nextCheck = start + std::chrono::milliseconds(10);
  for (;;) {
    if (o_.spin) {
      for (int i = 0; i < 64 && !ready(); ++i) ::sched_yield();
    } else {
      header_->sleepers.fetch_add(1, std::memory_order_seq_cst);
      const std::uint32_t seen = header_->event.load(std::memory_order_seq_cst);
      if (!ready()) {
        const timespec tenMs{0, 10 * 1000 * 1000};
        futex(&header_->event, FUTEX_WAIT, seen, &tenMs);
      }
      header_->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    }
    if (ready()) return;
    const auto now = Clock::now();
    if (now < nextCheck) continue;
    nextCheck = now + std::chrono::milliseconds(10);
    if (!alive(peer)) {
      throw PeerLostError(fmt::format("replica {} of this stage is gone (its process ended during an allreduce "
                                      "through shared memory)",
                                      peer));
    }
    if (now - start > o_.timeout) {
      throw PeerLostError(fmt::format("timed out after {} s waiting for replica {} of this stage in an allreduce "
                                      "through shared memory",
                                      std::chrono::duration_cast<std::chrono::seconds>(o_.timeout).count(), peer));
    }
  }
}

std::uint64_t SharedMemoryGroup::post(std::vector<at::Tensor> parts) {
  Op op;
  op.type = parts.front().scalar_type();
  for (const at::Tensor& p : parts) op.numel += p.numel();
  const Bytes bytes = roundUp(op.numel * static_cast<Bytes>(parts.front().element_size()), 64);
  HZ_CHECK(bytes <= capacity_);
  if (head_ + bytes > capacity_) {
    // Reuse the slots from the start once nobody reads them: finish what is
    // pending here, then wait for every rank to have finished it too.
    complete(next_ - 1);
    for (int q = 0; q < o_.size; ++q) waitFor(q, kDone, next_ - 1);
    head_ = 0;
  }
  op.seq = next_++;
  op.parts = std::move(parts);
  op.offset = head_;
  head_ += bytes;
  copyRange(op, slot(o_.rank, op.offset, op.numel, op.type), 0, op.numel, /*in=*/true);
  publish(kPosted, op.seq);
  pending_.push_back(std::move(op));
  return pending_.back().seq;
}

void SharedMemoryGroup::copyRange(const Op& op, const at::Tensor& slot, std::int64_t lo, std::int64_t hi, bool in) {
  std::int64_t at = 0;  // where the current part starts
  for (const at::Tensor& p : op.parts) {
    const std::int64_t from = std::max(lo, at), to = std::min(hi, at + p.numel());
    if (from < to) {
      at::Tensor mine = p.narrow(0, from - at, to - from);
      at::Tensor there = slot.narrow(0, from, to - from);
      if (in) {
        there.copy_(mine);
      } else {
        mine.copy_(there);
      }
    }
    at += p.numel();
    if (at >= hi) break;
  }
}

void SharedMemoryGroup::finish(const Op& op) {
  const std::int64_t n = op.numel;
  const std::int64_t share = (n + o_.size - 1) / o_.size;
  auto range = [&](int r) {
    const std::int64_t lo = std::min<std::int64_t>(n, r * share);
    return std::make_pair(lo, std::min<std::int64_t>(n, lo + share));
  };
  for (int q = 0; q < o_.size; ++q) waitFor(q, kPosted, op.seq);
  {
    const auto [lo, hi] = range(o_.rank);
    if (hi > lo) {
      at::Tensor mine = slot(o_.rank, op.offset, n, op.type).narrow(0, lo, hi - lo);
      for (int q = 0; q < o_.size; ++q) {
        if (q != o_.rank) mine.add_(slot(q, op.offset, n, op.type).narrow(0, lo, hi - lo));
      }
    }
  }
  publish(kReduced, op.seq);
  for (int q = 0; q < o_.size; ++q) {
    const auto [lo, hi] = range(q);
    if (hi <= lo) continue;
    waitFor(q, kReduced, op.seq);
    copyRange(op, slot(q, op.offset, n, op.type), lo, hi, /*in=*/false);
  }
  publish(kDone, op.seq);
}

void SharedMemoryGroup::complete(std::uint64_t seq) {
  while (!pending_.empty() && pending_.front().seq <= seq) {
    finish(pending_.front());
    completed_ = pending_.front().seq;
    pending_.pop_front();
  }
}

namespace {

class SharedMemoryWork final : public c10d::Work {
 public:
  SharedMemoryWork(SharedMemoryGroup* group, std::uint64_t seq)
      : c10d::Work(group->rank(), c10d::OpType::ALLREDUCE), group_(group), seq_(seq) {}
  bool isCompleted() override { return group_->completed(seq_); }
  bool wait(std::chrono::milliseconds /*timeout: the group's*/) override {
    if (!completed_) {
      try {
        group_->complete(seq_);
        finish();
      } catch (...) {
        finish(std::current_exception());
      }
    }
    if (exception_) std::rethrow_exception(exception_);
    return true;
  }

 private:
  SharedMemoryGroup* group_;
  std::uint64_t seq_;
};

}  // namespace

c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::allreduce(at::Tensor& tensor) {
  HZ_CHECK_MSG(tensor.is_contiguous(), "shared-memory allreduce of a strided tensor");
  return allreduce(std::vector<at::Tensor>{tensor.view({-1})});
}

c10::intrusive_ptr<c10d::Work> SharedMemoryGroup::allreduce(const std::vector<at::Tensor>& parts) {
  HZ_CHECK(!parts.empty());
  std::vector<at::Tensor> flat;
  std::int64_t numel = 0;
  for (const at::Tensor& p : parts) {
    HZ_CHECK_MSG(p.is_contiguous() && p.device().is_cpu() && p.scalar_type() == parts.front().scalar_type(),
                 "shared-memory allreduce of a strided or device tensor, or of mixed element types");
    flat.push_back(p.view({-1}));
    numel += p.numel();
  }
  const Bytes element = static_cast<Bytes>(parts.front().element_size());
  if (numel * element <= capacity_) return c10::make_intrusive<SharedMemoryWork>(this, post(std::move(flat)));
  // Larger than a slot: piece by piece, each finished before the next.
  at::Tensor whole = flat.size() == 1 ? flat.front() : torch::cat(flat);
  const std::int64_t most = (capacity_ / element) / 64 * 64;  // a piece that fits an empty slot
  for (std::int64_t at = 0; at < numel; at += most) {
    complete(post({whole.narrow(0, at, std::min(most, numel - at))}));
  }
  if (flat.size() > 1) {
    std::int64_t at = 0;
    for (at::Tensor& p : flat) {
      p.copy_(whole.narrow(0, at, p.numel()));
      at += p.numel();
    }
  }
  return c10::make_intrusive<SharedMemoryWork>(this, completed_);
}

std::vector<std::string> unheldSegments(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() != 41 || name.rfind("hydrozoa-", 0) != 0 ||
        name.find_first_not_of("0123456789abcdef", 9) != std::string::npos) {
      continue;
    }
    const int fd = ::open((dir + "/" + name).c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    struct flock l {};
    l.l_type = F_WRLCK;
    l.l_whence = SEEK_SET;
    l.l_start = 0;
    l.l_len = kMaxRanks;
    const bool held = ::fcntl(fd, F_OFD_GETLK, &l) != 0 || l.l_type != F_UNLCK;
    ::close(fd);
    if (!held) names.push_back(name);
  }
  ::closedir(d);
  return names;
}

std::vector<std::string> removeAbandonedSegments(const std::string& dir) {
  std::vector<std::string> removed;
  const auto now = std::chrono::system_clock::now();
  for (const std::string& name : unheldSegments(dir)) {
    const std::string path = dir + "/" + name;
    struct stat st {};
    const bool young = ::stat(path.c_str(), &st) != 0 ||
                       now - std::chrono::system_clock::from_time_t(st.st_mtime) < std::chrono::minutes(1);
    if (young) continue;
    if (::unlink(path.c_str()) == 0) removed.push_back(path);
  }
  return removed;
}

}  // namespace hydrozoa::runtime
