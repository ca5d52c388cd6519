#include "select/exec/sharp_run.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "core/files.h"
#include "core/paths.h"
#include "core/process.h"
#include "report/svg_chart.h"
#include "select/exec/pilot.h"
#include "select/exec/sharp_state.h"
#include "select/exec/unit.h"
#include "select/timeline.h"

namespace hydrozoa::select {

namespace fs = std::filesystem;

namespace {

constexpr int kMaxLostPerWorker = 3;  // replacements, over the run, per worker slot

double unixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct Assigned {
  int task = 0;
  std::int64_t unit = 0;
  UnitSpec spec;
};

struct Proc {
  pid_t pid = -1;
  int in = -1, out = -1;
  std::string buffer;
  std::deque<Assigned> units;
  int lost = 0;
};

class Executor {
 public:
  Executor(std::vector<SharpTask> tasks, SharpRunOptions o) : tasks_(std::move(tasks)), o_(std::move(o)) {}

  Result<SharpRunResult> run() {
    if (o_.resume) {
      HZ_RETURN_IF_ERROR(load());
    } else if (Status s = setUp(); !s.ok()) {
      remove(spill_);  // nothing trained: nothing to keep
      return s;
    }
    std::vector<ModelWork> work;
    for (const TaskState& t : state_) work.push_back(workOf(t));
    sched_ = std::make_unique<ShardScheduler>(work, o_.order, o_.seed);
    for (size_t i = 0; i < state_.size(); ++i) {
      if (state_[i].status != "running") {
        sched_->dropped(static_cast<int>(i));
      } else {
        sched_->resumeAt(static_cast<int>(i), state_[i].next);
        if (o_.on_task) o_.on_task(state_[i].index, "running", "");
      }
    }
    timeline_.open(o_.run + "/timeline.csv", std::ios::app);
    if (timeline_.tellp() == 0) timeline_ << timelineHeader();
    HZ_RETURN_IF_ERROR(train());
    writeTimelineSvg();
    return result_;
  }

 private:
  std::string abs(const std::string& relative) const { return o_.run + "/" + relative; }
  // Spilled state: relative to the spill directory.
  std::string spilled(const std::string& relative) const { return spill_ + "/" + relative; }
  static std::string spill(const TaskState& t) { return fmt::format("t{}", t.index); }

  Status save() {
    Json tasks = Json::array();
    for (const TaskState& t : state_) tasks.push_back(taskToJson(t));
    Json j = {{"budget", o_.budget}, {"spill", spill_}, {"tasks", tasks}, {"started", started_}};
    if (result_.seconds > 0) {  // this invocation's, once it ends
      j["last_run"] = {{"workers", o_.workers},          {"scheduler", orderName(o_.order)},
                       {"double_buffer", o_.double_buffer}, {"seconds", result_.seconds},
                       {"units", result_.units},          {"utilisation", result_.utilisation},
                       {"lost_workers", result_.lost_workers}};
    }
    return writeFileAtomically(o_.run + "/sharp.json", j.dump(1) + "\n");
  }

  Status load() {
    HZ_ASSIGN_OR_RETURN(const Json j, readJsonFile(o_.run + "/sharp.json"));
    try {
      if (j.at("budget").get<Bytes>() != o_.budget) {
        return invalidArgument(fmt::format("{}/sharp.json: this selection was partitioned for a budget of {} a "
                                           "worker: resume it with --worker-memory {} (or leave it out)",
                                           o_.run, formatBytes(j.at("budget").get<Bytes>()),
                                           formatBytes(j.at("budget").get<Bytes>())));
      }
      started_ = j.at("started").get<double>();
      spill_ = j.at("spill").get<std::string>();
      for (const Json& t : j.at("tasks")) {
        HZ_ASSIGN_OR_RETURN(TaskState s, taskFromJson(t, o_.run + "/sharp.json"));
        state_.push_back(std::move(s));
      }
    } catch (const Json::exception& e) {
      return parseError(fmt::format("{}/sharp.json: {}", o_.run, e.what()));
    }
    if (state_.size() != tasks_.size()) {
      return parseError(fmt::format("{}/sharp.json: {} tasks, the selection has {}", o_.run, state_.size(),
                                    tasks_.size()));
    }
    for (const TaskState& t : state_) {
      if (t.status == "running" && !fs::exists(spilled(t.states.front()))) {
        return notFound(fmt::format("{}: the models' spilled state is gone (a reboot empties /dev/shm); "
                                    "the tasks not completed must start again: hydrozoa select the grid anew "
                                    "(--spill DIR on a disk survives reboots, slower)",
                                    spill_));
      }
    }
    return Status();
  }

  // The Pilot partitions each task; its initial state is spilled.
  Status setUp() {
    started_ = unixNow();
    spill_ = o_.spill;
    if (spill_.empty()) {  // host memory: /dev/shm where it is, else beside the run
      const std::size_t h = std::hash<std::string>()(o_.run);
      spill_ = fs::is_directory("/dev/shm") && ::access("/dev/shm", W_OK) == 0
                   ? fmt::format("/dev/shm/hydrozoa-{}-{:08x}", fs::path(o_.run).filename().string(), h & 0xffffffffu)
                   : o_.run + "/spill";
    }
    // Its name is predictable: one somebody else made (or a link) is refused.
    HZ_RETURN_IF_ERROR(privateDirectory(spill_, "the spill directory (--spill)"));
    HZ_RETURN_IF_ERROR(writeFileAtomically(spill_ + "/run", o_.run + "\n"));  // whose it is (cleanupSpills)
    std::map<std::string, Partition> partitions;
    DataCache cache;
    for (const SharpTask& task : tasks_) {
      TaskState t;
      t.index = task.index;
      t.label = task.label;
      t.dir = fs::relative(task.dir, o_.run).string();
      t.job = t.dir + "/job.json";
      std::error_code ec;
      fs::create_directories(task.dir, ec);
      HZ_RETURN_IF_ERROR(writeFileAtomically(abs(t.job), cluster::jobSpecToJson(task.spec).dump(1) + "\n"));
      // Tasks alike but for what the memory does not depend on (learning
      // rates, seeds, schedules) share one partition.
      Json like = cluster::jobSpecToJson(task.spec);
      like["training"].erase("seed");
      like["training"]["optimizer"].erase("lr");
      like["training"].erase("lr_schedule");
      like.erase("name");
      const std::string key = like.dump();
      if (!partitions.count(key)) {
        auto p = partitionModel(abs(t.job), o_.budget, spilled(spill(t) + "/pilot"), cache);
        if (!p.ok()) {
          return Status(p.status().code(), fmt::format("task {} ({}): {}", t.index, t.label, p.status().message()));
        }
        partitions.emplace(key, std::move(*p));
      }
      const Partition* p = &partitions.at(key);
      t.shards = p->shards;
      t.batch_bytes = p->batch_bytes;
      HZ_ASSIGN_OR_RETURN(const DataCache::Task* d, cache.task(abs(t.job)));
      t.steps = d->total_steps;
      if (task.spec.eval) t.test_batches = (d->test->size() + task.spec.global_batch - 1) / task.spec.global_batch;
      std::vector<std::pair<int, int>> ranges;
      std::vector<std::string> dirs;
      std::string shape;
      for (size_t s = 0; s < t.shards.size(); ++s) {
        ranges.emplace_back(t.shards[s].first, t.shards[s].last);
        t.states.push_back(fmt::format("{}/s{}/init", spill(t), s));
        dirs.push_back(spilled(t.states.back()));
        fs::create_directories(fs::path(dirs.back()).parent_path(), ec);
        const Shard& x = t.shards[s];
        shape += fmt::format("{}{}", s ? ", " : "",
                             x.first == x.last ? p->layer_names[static_cast<size_t>(x.first)]
                                               : fmt::format("{}…{}", p->layer_names[static_cast<size_t>(x.first)],
                                                             p->layer_names[static_cast<size_t>(x.last)]));
      }
      HZ_RETURN_IF_ERROR(writeInitialState(d->job, ranges, dirs));
      std::cout << fmt::format("Task {} ({}): {} within {} a worker: {}", t.index, t.label,
                               countOf(static_cast<std::int64_t>(t.shards.size()), "shard", "shards"),
                               formatBytes(o_.budget), shape)
                << std::endl;
      state_.push_back(std::move(t));
    }
    return save();
  }

  // The spec of task i's unit k.
  UnitSpec unitSpec(size_t i, std::int64_t k) {
    const TaskState& t = state_[i];
    const int n = t.n();
    UnitSpec u;
    u.id = ++ids_;
    u.task = t.index;
    u.job = abs(t.job);
    u.shards = n;
    const std::string dir = spilled(spill(t));
    const auto act = [&](std::int64_t g, int s) { return fmt::format("{}/act-{}-{}.pt", dir, g, s); };
    const auto grad = [&](std::int64_t g, int s) { return fmt::format("{}/grad-{}-{}.pt", dir, g, s); };
    if (k >= t.steps * t.perStep()) {
      u.kind = UnitKind::kEvaluate;
      u.shard = static_cast<int>(k - t.steps * t.perStep());
      u.step = 0;
      u.eval_dir = dir + "/eval";
      std::error_code ec;
      fs::create_directories(u.eval_dir, ec);
    } else {
      const std::int64_t g = k / t.perStep(), p = k % t.perStep();
      u.step = g;
      if (p < n - 1) {
        u.kind = UnitKind::kForward;
        u.shard = static_cast<int>(p);
        u.out_state = fmt::format("{}/s{}/f{}", dir, u.shard, g);
        u.output = act(g, u.shard + 1);
      } else {
        u.kind = p == n - 1 ? UnitKind::kLast : UnitKind::kBackward;
        u.shard = p == n - 1 ? n - 1 : static_cast<int>(2 * n - 2 - p);
        u.out_state = fmt::format("{}/s{}/b{}", dir, u.shard, g);
        if (u.kind == UnitKind::kBackward) u.grad = grad(g, u.shard);
        if (u.shard > 0) u.output = grad(g, u.shard - 1);
      }
      if (u.shard > 0) u.input = act(g, u.shard);
    }
    const Shard& s = t.shards[static_cast<size_t>(u.shard)];
    u.first = s.first;
    u.last = s.last;
    u.state = spilled(t.states[static_cast<size_t>(u.shard)]);
    u.need = s.need;
    if (u.kind != UnitKind::kEvaluate && (u.shard == 0 || u.kind == UnitKind::kLast)) u.batch_bytes = t.batch_bytes;
    return u;
  }

  Status spawn(Proc& p) {
    std::vector<std::string> argv = {o_.self, "sharp-worker", "--run", o_.run, "--budget", std::to_string(o_.budget)};
    if (!o_.double_buffer) argv.push_back("--no-double-buffer");
    HZ_ASSIGN_OR_RETURN(p.pid, spawnPiped(argv, o_.run + "/workers.log", &p.in, &p.out));
    p.buffer.clear();
    return Status();
  }

  void closeProc(Proc& p) {
    if (p.in >= 0) ::close(p.in);
    if (p.out >= 0) ::close(p.out);
    p.in = p.out = -1;
    if (p.pid > 0) {
      ::kill(p.pid, SIGKILL);
      ::waitpid(p.pid, nullptr, 0);
    }
    p.pid = -1;
  }

  bool send(Proc& p, const UnitSpec& u) {
    const std::string line = unitToJson(u).dump() + "\n";
    size_t at = 0;
    while (at < line.size()) {
      const ssize_t n = ::write(p.in, line.data() + at, line.size() - at);
      if (n <= 0) return false;
      at += static_cast<size_t>(n);
    }
    return true;
  }

  // Units for every worker with room: one computing and (double
  // buffering) one loading.
  void dispatch() {
    const size_t depth = o_.double_buffer ? 2 : 1;
    for (Proc& p : procs_) {
      while (p.pid > 0 && p.units.size() < depth) {
        const int m = sched_->pick();
        if (m < 0) return;
        Assigned a{m, sched_->nextUnit(m), {}};
        a.spec = unitSpec(static_cast<size_t>(m), a.unit);
        sched_->started(m);
        p.units.push_back(a);
        if (!send(p, a.spec)) break;  // it died: its units are taken back when its output ends
      }
    }
  }

  // The worker died: its units go back to their models, and another takes its place.
  Status lost(size_t w) {
    Proc& p = procs_[w];
    int status = 0;
    if (p.pid > 0 && ::waitpid(p.pid, &status, WNOHANG) == 0) ::kill(p.pid, SIGKILL), ::waitpid(p.pid, &status, 0);
    p.pid = -1;
    closeProc(p);
    ++result_.lost_workers;
    std::string what;
    for (const Assigned& a : p.units) {
      sched_->abandoned(a.task);
      what += fmt::format("{}{} unit {} of task {}", what.empty() ? "" : ", ", unitKindName(a.spec.kind), a.unit,
                          state_[static_cast<size_t>(a.task)].index);
    }
    p.units.clear();
    std::cerr << fmt::format("\nSHARP: worker {} was lost{}; {}", w,
                             what.empty() ? "" : fmt::format(" running {}: they run again from their spilled state", what),
                             stopping_ ? "not replaced (stopping)" : "another takes its place")
              << std::endl;
    if (stopping_) return Status();
    if (++p.lost > kMaxLostPerWorker) {
      return unavailable(fmt::format("worker {} was lost {} times (see {}/workers.log); the selection stops here: "
                                     "hydrozoa select --resume {} goes on",
                                     w, p.lost, o_.run, o_.run));
    }
    return spawn(p);
  }

  void remove(const std::string& path) {
    std::error_code ec;
    fs::remove_all(path, ec);
  }

  Status finishTask(TaskState& t) {
    t.status = "completed";
    const std::string model = abs(t.dir) + "/model";
    remove(model);
    std::error_code ec;
    fs::create_directories(model, ec);
    for (const std::string& s : t.states) {
      for (const auto& e : fs::directory_iterator(spilled(s), ec)) {
        fs::copy_file(e.path(), fs::path(model) / e.path().filename(), ec);  // perhaps another filesystem
        if (ec) return ioError(fmt::format("{}: cannot keep the final weights: {}", model, ec.message()));
      }
    }
    Json summary = {{"status", "completed"},      {"final_loss", t.losses.empty() ? Json() : Json(t.losses.back())},
                    {"losses", t.losses},         {"wall_seconds", t.seconds},
                    {"final_test_loss", t.eval_loss < 0 ? Json() : Json(t.eval_loss)},
                    {"final_test_accuracy", t.eval_accuracy < 0 ? Json() : Json(t.eval_accuracy)},
                    {"shards", Json::array()},    {"steps", t.steps}, {"cost_usd", 0.0}};
    for (const Shard& s : t.shards) summary["shards"].push_back(shardToJson(s));
    HZ_RETURN_IF_ERROR(writeFileAtomically(abs(t.dir) + "/summary.json", summary.dump(1) + "\n"));
    HZ_RETURN_IF_ERROR(save());
    remove(spilled(spill(t)));
    if (o_.on_task) o_.on_task(t.index, "completed", "");
    return Status();
  }

  Status done(size_t w, const UnitResult& r) {
    Proc& p = procs_[w];
    if (p.units.empty() || p.units.front().spec.id != r.id) {
      return internalError(fmt::format("worker {} answered for unit {}, which it was not running", w, r.id));
    }
    const Assigned a = p.units.front();
    p.units.pop_front();
    TaskState& t = state_[static_cast<size_t>(a.task)];
    const UnitSpec& u = a.spec;
    if (!r.ok) {
      sched_->dropped(a.task);
      t.status = "failed";
      t.reason = r.error;
      std::cerr << fmt::format("\nTask {} ({}) failed: {}", t.index, t.label, r.error) << std::endl;
      HZ_RETURN_IF_ERROR(save());
      if (o_.on_task) o_.on_task(t.index, "failed", r.error);
      return Status();
    }
    sched_->finished(a.task);
    ++result_.units;
    busy_ += r.end - r.compute_begin;
    timeline_ << timelineLine({static_cast<int>(w), t.index, u.shard, a.unit, u.step, unitKindName(u.kind),
                               r.load_begin - started_, r.compute_begin - started_, r.end - started_})
              << std::flush;  // whole lines for whoever reads it meanwhile
    if (!first_.count(a.task)) first_[a.task] = {r.load_begin, t.seconds};  // this invocation's first unit of it
    t.seconds = first_[a.task].second + r.end - first_[a.task].first;
    t.next = a.unit + 1;
    std::string old;
    if (r.wrote_state) {
      old = t.states[static_cast<size_t>(u.shard)];
      t.states[static_cast<size_t>(u.shard)] = fs::relative(u.out_state, spill_).string();
    }
    if (u.kind == UnitKind::kLast) t.losses.push_back(r.loss);
    if (u.kind == UnitKind::kEvaluate && r.eval_accuracy >= 0) {
      t.eval_loss = r.eval_loss;
      t.eval_accuracy = r.eval_accuracy;
    }
    if (t.next == t.units()) return finishTask(t);
    HZ_RETURN_IF_ERROR(save());
    // What no unit reads again.
    if (!old.empty()) remove(spilled(old));
    if (u.kind == UnitKind::kLast || u.kind == UnitKind::kBackward) {
      remove(u.input);
      remove(u.grad);
    }
    if (u.kind == UnitKind::kEvaluate && u.shard > 0) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(u.eval_dir, ec)) {
        if (e.path().filename().string().rfind(fmt::format("in-{}-", u.shard), 0) == 0) remove(e.path().string());
      }
    }
    return Status();
  }

  // Reads what worker w wrote; false at end of its output.
  Result<bool> read(size_t w) {
    Proc& p = procs_[w];
    char chunk[65536];
    const ssize_t n = ::read(p.out, chunk, sizeof chunk);
    if (n <= 0) return false;
    p.buffer.append(chunk, static_cast<size_t>(n));
    if (p.buffer.size() > (1u << 20)) return internalError(fmt::format("worker {} wrote a line over 1 MiB", w));
    for (size_t nl; (nl = p.buffer.find('\n')) != std::string::npos;) {
      const std::string line = p.buffer.substr(0, nl);
      p.buffer.erase(0, nl + 1);
      HZ_ASSIGN_OR_RETURN(const Json j, parseJson(line, fmt::format("worker {}", w)));
      HZ_ASSIGN_OR_RETURN(const UnitResult r, resultFromJson(j));
      HZ_RETURN_IF_ERROR(done(w, r));
    }
    return true;
  }

  void showProgress(bool force) {
    const double now = unixNow();
    const bool tty = ::isatty(2) != 0;  // a live line; in a log, a line every 30 s
    if (!o_.progress || (!force && now - shown_ < (tty ? 2 : 30))) return;
    shown_ = now;
    std::int64_t doneUnits = 0, all = 0;
    int finished = 0;
    for (const TaskState& t : state_) {
      doneUnits += t.next;
      all += t.units();
      finished += t.status != "running";
    }
    std::cerr << fmt::format("{}SHARP: {} of {} units, {} of {} tasks done, {} workers busy {:.0f}%, {:.0f} s{}", tty ? "\r" : "",
                             doneUnits, all, finished, state_.size(), procs_.size(),
                             now > begun_ ? 100 * busy_ / (static_cast<double>(procs_.size()) * (now - begun_)) : 0.0,
                             now - begun_, tty ? "   " : "\n");
    if (force && tty) std::cerr << "\n";
    std::cerr.flush();
  }

  Status train() {
    begun_ = unixNow();
    procs_.resize(static_cast<size_t>(o_.workers));
    Status failure;
    for (Proc& p : procs_) {
      if (failure = spawn(p); !failure.ok()) break;
    }
    ::signal(SIGPIPE, SIG_IGN);
    while (failure.ok()) {
      const int stops = o_.stops ? o_.stops() : 0;
      if (stops > 0 && !stopping_) {
        stopping_ = true;
        std::cerr << "\nStopping: the units running end first (Ctrl-C again: at once)" << std::endl;
      }
      if (stops > 1) break;
      if (!stopping_) dispatch();
      bool busy = false;
      for (const Proc& p : procs_) busy = busy || !p.units.empty();
      if (!busy) break;
      std::vector<pollfd> fds;
      for (const Proc& p : procs_) fds.push_back({p.out, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 200) < 0 && errno != EINTR) {
        failure = internalError("poll failed");
        break;
      }
      for (size_t w = 0; w < procs_.size() && failure.ok(); ++w) {
        if (procs_[w].out < 0) {
          if (!procs_[w].units.empty()) failure = lost(w);
          continue;
        }
        if (!(fds[w].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        auto more = read(w);
        if (!more.ok()) {
          failure = more.status();
        } else if (!*more) {
          failure = lost(w);
        }
      }
      showProgress(false);
    }
    for (Proc& p : procs_) {
      for (const Assigned& a : p.units) sched_->abandoned(a.task);
      p.units.clear();
      closeProc(p);
    }
    const double seconds = unixNow() - begun_;
    result_.seconds = seconds;
    result_.utilisation = seconds > 0 ? busy_ / (static_cast<double>(procs_.size()) * seconds) : 0;
    showProgress(true);
    HZ_RETURN_IF_ERROR(failure);
    result_.interrupted = !sched_->done();
    HZ_RETURN_IF_ERROR(save());
    bool left = false;
    for (const TaskState& t : state_) left = left || t.status == "running";
    if (!left) remove(spill_);  // nothing more to train (a failed task's spill goes too)
    return Status();
  }

  // The units of this run as a Gantt chart: a row per worker, a colour per task.
  void writeTimelineSvg() {
    timeline_.close();
    report::GanttChart chart;
    chart.id = "sharp-timeline";
    chart.title = fmt::format("SHARP: {} models on {} workers ({}{})", state_.size(), o_.workers, orderName(o_.order),
                              o_.double_buffer ? ", double buffering" : "");
    for (const TimelineUnit& u : readTimeline(o_.run + "/timeline.csv")) {
      chart.bars.push_back({u.worker, u.task, u.load_begin, u.compute_begin, u.end,
                            fmt::format("task {} {} shard {} step {}", u.task, u.kind, u.shard, u.step)});
    }
    double first = chart.bars.empty() ? 0 : chart.bars.front().load;  // the chart starts at the first unit
    for (const report::GanttBar& b : chart.bars) first = std::min(first, b.load);
    for (report::GanttBar& b : chart.bars) b.load -= first, b.start -= first, b.end -= first;
    for (int w = 0; w < o_.workers; ++w) chart.rows.push_back(fmt::format("worker {}", w));
    for (const TaskState& t : state_) chart.groups.push_back(fmt::format("task {}", t.index));
    (void)writeFileAtomically(o_.run + "/timeline.svg", report::renderGantt(chart));
  }

  std::vector<SharpTask> tasks_;
  SharpRunOptions o_;
  std::vector<TaskState> state_;
  std::string spill_;
  std::unique_ptr<ShardScheduler> sched_;
  std::vector<Proc> procs_;
  std::ofstream timeline_;
  std::map<int, std::pair<double, double>> first_;  // a task's first load here, and its seconds before
  std::int64_t ids_ = 0;
  double started_ = 0, begun_ = 0, busy_ = 0, shown_ = 0;
  bool stopping_ = false;
  SharpRunResult result_;
};

}  // namespace

Result<SharpRunResult> runSharp(const std::vector<SharpTask>& tasks, const SharpRunOptions& options) {
  if (options.workers < 1 || options.workers > 1024) {
    return invalidArgument(fmt::format("{} workers: from 1 to 1024", options.workers));
  }
  if (options.budget < 64 * kKiB) {
    return invalidArgument(fmt::format("a worker's memory of {}: give at least 64 KiB", formatBytes(options.budget)));
  }
  return Executor(tasks, options).run();
}

}  // namespace hydrozoa::select
