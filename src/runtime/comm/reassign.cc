#include "runtime/comm/reassign.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <sstream>


namespace hydrozoa::runtime {
namespace {

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

std::int64_t wallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// How long a helper waits for its helpees to finish (NOTE [Helpers wait
// for their helpees]) before it takes them to be gone and lets the
// allreduce tell.
constexpr std::chrono::seconds kWaitLimit{120};

}  // namespace

std::vector<int> helpersOf(int replica, int replicas, int group) {
  std::vector<int> out;
  for (int i = 1; i <= std::min(group, replicas - 1); ++i) out.push_back((replica + i) % replicas);
  return out;
}

std::vector<int> helpeesOf(int replica, int replicas, int group) {
  std::vector<int> out;
  for (int i = 1; i <= std::min(group, replicas - 1); ++i) out.push_back(((replica - i) % replicas + replicas) % replicas);
  return out;
}

Reassigner::Reassigner(c10::intrusive_ptr<ControlStore> store, c10::intrusive_ptr<ControlStore> inbox,
                       std::string prefix, int replica, int replicas, ReassignOptions options)
    : store_(std::move(store)),
      inbox_(std::move(inbox)),
      prefix_(std::move(prefix)),
      replica_(replica),
      replicas_(replicas),
      o_(options),
      helpers_(helpersOf(replica, replicas, options.helper_group)),
      helpees_(helpeesOf(replica, replicas, options.helper_group)) {
  reader_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    std::int64_t previous = -1;
    while (true) {
      cv_.wait(lock, [&] { return stopping_ || step_ != served_; });
      if (stopping_) return;
      // Every step's inbox in turn (steps are consecutive), however far
      // behind the compute thread this reader is.
      served_ = served_ < 0 ? step_ : served_ + 1;
      const std::int64_t step = served_;
      lock.unlock();
      const bool ended = readInbox(step);
      // NOTE [A step's FlexRR keys]: the step before this one's is over on
      // every worker.
      if (ended && previous >= 0) erase(previous);
      previous = step;
      lock.lock();
      if (!ended) return;
      readTo_ = step;
      cv_.notify_all();
    }
  });
  sender_ = std::thread([this] { sendLoop(); });
}

Reassigner::~Reassigner() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    // The last step's "end" goes out and is read.
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return outbox_.empty() && !sending_ && readTo_ == step_; });
    stopping_ = true;
  }
  cv_.notify_all();
  sender_.join();
  reader_.join();
  // The last two steps' keys (NOTE [A step's FlexRR keys]); the coordinator
  // erases a generation's anyway.
  if (step_ >= 0) erase(step_);
  if (step_ >= 1) erase(step_ - 1);
}

std::string Reassigner::key(std::int64_t step, int owner, const std::string& what) const {
  return fmt::format("{}{}/{}/{}", prefix_, step, owner, what);
}

void Reassigner::send(int to, std::string message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    outbox_.push_back({step_, to, std::move(message)});
  }
  cv_.notify_all();
}

// A message to `to`'s inbox: its index from the inbox's counter, then the
// message under that index (the reader waits for it).
void Reassigner::sendNow(std::int64_t step, int to, const std::string& message) {
  const std::int64_t index = store_->add(key(step, to, "n"), 1) - 1;
  store_->set(key(step, to, fmt::format("m{}", index)), bytes(message));
}

void Reassigner::sendLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !outbox_.empty(); });
    // Stopping: what is left is dropped (the destructor gave it time to
    // go; a coordinator that is gone would hold each send to its timeout).
    if (stopping_) return;
    Outgoing out = std::move(outbox_.front());
    outbox_.pop_front();
    sending_ = true;
    lock.unlock();
    try {
      sendNow(out.step, out.to, out.message);
    } catch (const std::exception& e) {
      // The store is gone (the coordinator ended the generation): the
      // allreduce or the control thread tells; nothing more to send.
      spdlog::debug("flexrr: could not send \"{}\": {}", out.message, e.what());
    }
    lock.lock();
    sending_ = false;
    cv_.notify_all();
  }
}

void Reassigner::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return (outbox_.empty() && !sending_) || stopping_ || aborted_; });
}

void Reassigner::abort() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
  }
  cv_.notify_all();
}

bool Reassigner::readInbox(std::int64_t step) {
  for (int i = 0;; ++i) {
    const std::string k = key(step, replica_, fmt::format("m{}", i));
    std::string message;
    while (true) {
      try {
        message = text(inbox_->get(k));  // waits for it, up to the inbox store's timeout
        break;
      } catch (const std::exception&) {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return false;
      }
    }
    if (message == "end") return true;
    handle(step, message);
  }
}

void Reassigner::erase(std::int64_t step) {
  try {
    inbox_->deletePrefix(key(step, replica_, ""));
  } catch (const std::exception& e) {
    spdlog::debug("flexrr: could not erase step {}'s keys: {}", step, e.what());
  }
}

void Reassigner::beginStep(std::int64_t step, std::vector<int> microbatches) {
  flush();  // the last step's messages are in (NOTE [A step's FlexRR keys])
  {
    std::lock_guard<std::mutex> lock(mu_);
    step_ = step;
    sizes_ = std::move(microbatches);
    next_ = done_ = 0;
    offeredFrom_ = sizes_.at(static_cast<size_t>(replica_));
    reported_ = finished_ = false;
    stepStartUs_ = wallMicros();
    offeredTo_.clear();
    cancelled_.clear();
    begun_.clear();
    offers_.clear();
    waitingFor_ = std::set<int>(helpees_.begin(), helpees_.end());
    counts_ = Counts();
    seq_ = 0;
  }
  cv_.notify_all();
}

bool Reassigner::claimOwn(int k) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    next_ = k + 1;  // from here on the reader offers only microbatches after k
    if (k < offeredFrom_) return true;
  }
  if (text(store_->compareSet(key(step_, replica_, fmt::format("c{}", k)), {}, bytes("o"))) == "o") return true;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_.gave;
  return false;
}

void Reassigner::ownDone(int k) {
  int total = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = k + 1;
    total = sizes_[static_cast<size_t>(replica_)];
    if (reported_ || done_ < static_cast<int>(std::ceil(o_.report_at * total))) return;
    reported_ = true;
  }
  for (int h : helpees_) send(h, fmt::format("report {} {} {} {}", replica_, k + 1, total, wallMicros()));
}

void Reassigner::finishedOwn() {
  std::int64_t seq = 0;
  bool report = false;
  int total = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    seq = ++seq_;
    report = !reported_;
    reported_ = true;
    total = sizes_[static_cast<size_t>(replica_)];
    const double own = static_cast<double>(wallMicros() - stepStartUs_) / 1e6;
    stepSeconds_ = stepSeconds_ > 0 ? 0.5 * stepSeconds_ + 0.5 * own : own;
  }
  // A replica with nothing to do this step (a short last step) says so.
  if (report) {
    for (int h : helpees_) send(h, fmt::format("report {} {} {} {}", replica_, total, total, wallMicros()));
  }
  // To every helper, not only those offered work: a helper waits for its
  // helpees' (NOTE [Helpers wait for their helpees]).
  for (int h : helpers_) send(h, fmt::format("cancel {} {}", replica_, seq));
}

// FlexRR's Algorithm 1 (the progress difference, as a fraction of a step)
// and the reassignment it triggers; Algorithm 2's helping decision is in
// "offer": this worker takes offers once its own work is done.
void Reassigner::handle(std::int64_t step, const std::string& message) {
  std::istringstream in(message);
  std::string kind;
  int from = -1;
  in >> kind >> from;
  if (from < 0 || from >= replicas_) {
    spdlog::warn("flexrr: ignored a malformed message \"{}\"", message);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (step != step_) return;  // read late: its step is over here
  if (kind == "report") {
    double done = 0, total = 0;
    std::int64_t at = 0;
    in >> done >> total >> at;
    if (finished_ || offeredTo_.count(from) || total <= 0) return;
    const int mine = sizes_[static_cast<size_t>(replica_)];
    const double myProgress = mine > 0 ? static_cast<double>(done_) / mine : 1.0;
    const double since = stepSeconds_ > 0 ? static_cast<double>(wallMicros() - at) / 1e6 / stepSeconds_ : 0;
    // The helper's progress now, from its report and the time since (at most all of its step).
    const double behind = std::min(1.0, done / total + since) - myProgress;
    if (behind > o_.threshold) {
      offerLocked(from, std::max(1, static_cast<int>(std::ceil(o_.initial * mine))));
    }
  } else if (kind == "begun") {
    if (!finished_) {
      const int mine = sizes_[static_cast<size_t>(replica_)];
      offerLocked(from, std::max(1, static_cast<int>(std::ceil(o_.follow_up * mine))));
    }
  } else if (kind == "completed") {
    // Informational here: the allreduce waits for the helper's gradients,
    // and the claims say which microbatches it has.
  } else if (kind == "offer") {
    Assignment a;
    a.replica = from;
    in >> a.first >> a.last >> a.seq;
    if (cancelled_.count(from) || a.first < 0 || a.last <= a.first ||
        a.last > sizes_[static_cast<size_t>(from)]) {
      return;  // void: its sender finished, or nonsense
    }
    offers_.push_back(a);
    cv_.notify_all();
  } else if (kind == "cancel") {
    cancelled_.insert(from);
    waitingFor_.erase(from);
    offers_.erase(std::remove_if(offers_.begin(), offers_.end(), [&](const Assignment& a) { return a.replica == from; }),
                  offers_.end());
    cv_.notify_all();
  } else {
    spdlog::warn("flexrr: ignored an unknown message \"{}\"", message);
  }
}

void Reassigner::offerLocked(int helper, int count) {
  const int first = std::max(next_, offeredFrom_ - count), last = offeredFrom_;
  if (first >= last) return;
  offeredFrom_ = first;
  counts_.offered += last - first;
  offeredTo_.insert(helper);
  const std::int64_t seq = ++seq_;
  outbox_.push_back({step_, helper, fmt::format("offer {} {} {} {}", replica_, first, last, seq)});
  cv_.notify_all();
}

// NOTE [Helpers wait for their helpees]
// A helper whose own work is done takes the offers it has; then, rather
// than join the allreduce at once, it waits until each of its helpees has
// finished its own work (their "cancel"): the allreduce would wait for
// them anyway, and a helpee that could not answer its helpers' reports in
// time (a container throttled at its CPU quota runs for a few milliseconds
// in every hundred; a paused process not at all) still finds them there
// when it can. The cost, without stragglers: a message's latency a step.
std::optional<Assignment> Reassigner::nextAssignment() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto until = std::chrono::steady_clock::now() + kWaitLimit;
  while (offers_.empty() && !waitingFor_.empty() && !stopping_ && !aborted_) {
    if (cv_.wait_until(lock, until) == std::cv_status::timeout) {
      spdlog::warn("flexrr: step {}: no word from helpees {} in {} s; joining the allreduce", step_,
                   fmt::join(waitingFor_, ","), kWaitLimit.count());
      waitingFor_.clear();
    }
  }
  if (offers_.empty()) return std::nullopt;
  Assignment a = offers_.front();
  offers_.pop_front();
  return a;
}

bool Reassigner::claimHelp(const Assignment& a, int k) {
  const std::string me = fmt::format("h{}", replica_);
  if (text(store_->compareSet(key(step_, a.replica, fmt::format("c{}", k)), {}, bytes(me))) != me) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!begun_.insert({a.replica, a.first}).second) return true;
  }
  send(a.replica, fmt::format("begun {} {} {}", replica_, a.first, a.last));
  return true;
}

void Reassigner::completed(const Assignment& a, int computed) {
  if (computed <= 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    counts_.took += computed;
  }
  send(a.replica, fmt::format("completed {} {}", replica_, computed));
}

Reassigner::Counts Reassigner::endStep() {
  send(replica_, "end");
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

}  // namespace hydrozoa::runtime
