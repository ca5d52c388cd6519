#include "profile/corun.h"

#include <sched.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/cpus.h"
#include "profile/samples.h"

namespace hydrozoa::profile {
namespace {

// One training pass of the whole model as a worker of one stage runs it:
// forward, loss, backward; the gradients are zeroed for the next.
void wholePass(model::Model& m, const torch::Tensor& input, const torch::Tensor& labels) {
  model::taskLoss(m.task, m.forward(input), labels).backward();
  for (auto& t : m.parameters()) {
    if (t.grad().defined()) t.mutable_grad().zero_();
  }
}

// Copies of the model computing on other cores while the caller times its
// own passes: each helper thread, pinned to a core of its own, runs whole
// passes while set(true) holds and sleeps otherwise.
class CoreLoad {
 public:
  CoreLoad(std::vector<model::Model> copies, const std::vector<int>& cpus, const torch::Tensor& input,
           const torch::Tensor& labels) {
    for (size_t i = 0; i < copies.size(); ++i) {
      helpers_.emplace_back([this, m = std::move(copies[i]), cpu = cpus[i], input, labels]() mutable {
        runThreadOn({cpu});
        std::unique_lock<std::mutex> lock(mu_);
        for (;;) {
          cv_.wait(lock, [&] { return on_ || stop_; });
          if (stop_) return;
          ++running_;
          cv_.notify_all();
          lock.unlock();
          bool ok = true;
          try {
            wholePass(m, input, labels);
          } catch (const c10::Error&) {
            ok = false;
          }
          lock.lock();
          failed_ = failed_ || !ok;
          --running_;
          cv_.notify_all();
        }
      });
    }
  }
  ~CoreLoad() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : helpers_) t.join();
  }
  CoreLoad(const CoreLoad&) = delete;
  CoreLoad& operator=(const CoreLoad&) = delete;

  // On: returns once every helper computes. Off: once none does.
  void set(bool on) {
    std::unique_lock<std::mutex> lock(mu_);
    on_ = on;
    cv_.notify_all();
    const int want = on ? static_cast<int>(helpers_.size()) : 0;
    cv_.wait(lock, [&] { return running_ == want || failed_; });
  }
  bool failed() {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool on_ = false, stop_ = false, failed_ = false;
  int running_ = 0;
  std::vector<std::thread> helpers_;
};

}  // namespace

// NOTE [Compute beside busy cores] (plan/cost/pipeline.cc): the model's whole
// pass at one size timed on this (pinned) thread alone and while a copy of
// the model computes on every other of `cpus`, one thread each, as the
// workers of a plan on this host would. The two kinds of passes alternate,
// so that interference from outside falls on both, for at least five
// rounds and `seconds`; the slowdown is the ratio of their medians (at
// least 1). Nothing when this process may use one core only, or on a host
// of more cores than kMostCorunCores, or when a copy of the model for every
// other core would take more than a quarter of its memory (the planner then
// counts no slowdown).
constexpr size_t kMostCorunCores = 64;

// `modelBytes`: the model's parameters; `memory`: the host's.
std::optional<CorunProfile> measureCorun(const std::function<Result<model::Model>()>& build, model::Model& m,
                                         Bytes modelBytes, Bytes memory, const std::vector<int>& cpus,
                                         std::int64_t microbatch, const torch::Tensor& input,
                                         const torch::Tensor& labels, double seconds) {
  const int here = ::sched_getcpu();
  std::vector<int> others;
  for (int cpu : cpus) {
    if (cpu != here) others.push_back(cpu);
  }
  if (here < 0 || others.empty() || cpus.size() > kMostCorunCores) return std::nullopt;
  // Each copy's weights, gradients and a pass's activations (a guess: the weights again).
  if (static_cast<Bytes>(others.size()) * 3 * modelBytes > memory / 4) return std::nullopt;
  std::vector<model::Model> copies;
  for (size_t i = 0; i < others.size(); ++i) {
    auto copy = build();
    if (!copy.ok()) return std::nullopt;
    copy->train(true);
    copies.push_back(std::move(*copy));
  }
  CoreLoad load(std::move(copies), others, input, labels);
  std::vector<double> alone, busy;
  const Clock::time_point start = Clock::now();
  constexpr int kMinRounds = 5, kMaxRounds = 200;
  for (int round = 0; round < kMaxRounds && (round < kMinRounds || msSince(start) < 1e3 * seconds); ++round) {
    for (bool loaded : {false, true}) {
      load.set(loaded);
      const auto t0 = Clock::now();
      wholePass(m, input, labels);
      (loaded ? busy : alone).push_back(msSince(t0));
    }
  }
  load.set(false);
  if (load.failed()) return std::nullopt;
  CorunProfile c;
  c.cores = static_cast<int>(others.size()) + 1;
  c.microbatch_size = microbatch;
  c.slowdown = std::clamp(median(busy) / std::max(1e-9, median(alone)), 1.0, 100.0);
  return c;
}

}  // namespace hydrozoa::profile
