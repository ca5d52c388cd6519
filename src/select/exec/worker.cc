#include "select/exec/worker.h"

#include <condition_variable>
#include <deque>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/allocator.h"
#include "profile/memory_tracker.h"
#include "select/exec/unit.h"

namespace hydrozoa::select {

namespace {

// Units read from standard input, and the one loaded ahead.
class Inbox {
 public:
  void push(std::optional<UnitSpec> u) {
    std::lock_guard<std::mutex> lock(mu_);
    if (u) {
      specs_.push_back(std::move(*u));
    } else {
      closed_ = true;
    }
    cv_.notify_all();
  }
  // The next unit; nullopt once input has ended and none is left.
  std::optional<UnitSpec> next() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !specs_.empty() || closed_; });
    if (specs_.empty()) return std::nullopt;
    UnitSpec u = std::move(specs_.front());
    specs_.pop_front();
    return u;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<UnitSpec> specs_;
  bool closed_ = false;
};

std::mutex gOut;
void reply(const UnitResult& r) {
  std::lock_guard<std::mutex> lock(gOut);
  std::cout << resultToJson(r).dump() << std::endl;
}

}  // namespace

int runSharpWorker(const WorkerOptions& o) {
  configureAllocatorForTraining();
  profile::MemoryTracker& tracker = profile::MemoryTracker::instance();
  tracker.setLimit(o.budget);
  Inbox inbox;
  std::thread reader([&] {
    std::string line;
    while (std::getline(std::cin, line)) {
      auto j = parseJson(line, "a unit");
      auto u = j.ok() ? unitFromJson(*j) : Result<UnitSpec>(j.status());
      if (!u.ok()) {
        std::cerr << "sharp-worker: " << u.status().message() << "\n";
        break;
      }
      inbox.push(std::move(*u));
    }
    inbox.push(std::nullopt);
  });
  DataCache cache;
  if (!o.double_buffer) {
    while (auto u = inbox.next()) {
      tracker.resetPeak();
      reply(runUnit(*u, cache));
    }
    reader.join();
    return 0;
  }
  // Double buffering: this thread loads, `computer` computes; one loaded
  // unit waits at most.
  std::mutex mu;
  std::condition_variable cv;
  std::optional<LoadedUnit> ready;
  bool computing = false, done = false;
  Bytes computingNeed = 0;
  std::thread computer([&] {
    for (;;) {
      LoadedUnit l;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return ready.has_value() || done; });
        if (!ready) return;
        l = std::move(*ready);
        ready.reset();
        computing = true;
        computingNeed = l.spec.need > 0 ? l.spec.need : o.budget;
      }
      cv.notify_all();
      reply(computeUnit(l));  // before a failed load behind it says so: results go in order
      {
        std::lock_guard<std::mutex> lock(mu);
        computing = false;
      }
      cv.notify_all();
    }
  });
  while (auto u = inbox.next()) {
    // Beside the unit computing when its peak (the Pilot's) and this load
    // fit in the budget together; otherwise after it. A load that runs out
    // of budget anyway is tried again once nothing computes.
    bool beside = false;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return !ready.has_value(); });
      beside = computing && (o.budget == 0 || computingNeed + prefetchBytes(*u) <= o.budget);
      if (!beside) cv.wait(lock, [&] { return !computing && !ready.has_value(); });
      if (!computing) tracker.resetPeak();
    }
    auto l = loadUnit(*u, cache);
    if (!l.ok() && beside) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return !computing && !ready.has_value(); });
      tracker.resetPeak();
      lock.unlock();
      l = loadUnit(*u, cache);
    }
    if (!l.ok()) {
      // Its turn still comes after the unit computing now.
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return !computing && !ready.has_value(); });
      lock.unlock();
      reply(failedUnit(*u, l.status()));
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      ready = std::move(*l);
    }
    cv.notify_all();
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return !ready.has_value() && !computing; });
    done = true;
  }
  cv.notify_all();
  computer.join();
  reader.join();
  return 0;
}

}  // namespace hydrozoa::select
