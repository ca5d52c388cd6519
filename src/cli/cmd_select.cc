// `hydrozoa select`: many models from a grid (docs/select.md). With
// --worker-memory, every model at once by SHARP on workers whose memory is
// smaller than a model (select/exec/sharp_run.h); without, one task after
// another, each a hydrozoa job on all the workers.
#include <fmt/format.h>

#include <csignal>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cluster/coordinator.h"
#include "core/paths.h"
#include "cluster/job_handle.h"
#include "select/exec/sharp_run.h"
#include "select/exec/worker.h"
#include "select/grid.h"
#include "select/selection.h"

namespace hydrozoa::cli {
namespace {

namespace fs = std::filesystem;

std::atomic<int> gStops{0};
extern "C" void onSelectStop(int) { gStops.fetch_add(1); }

struct SelectArgs {
  std::string grid, resume, out, workers, worker_memory, scheduler, spill;
  bool no_progress = false, no_double_buffer = false;
};

std::string stamp() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", std::localtime(&now));
  return text;
}

// Trains one task to its end (or a stop): its run directory under the
// selection's, resumed when an earlier invocation began it.
Result<cluster::TrainResult> trainTask(cluster::JobSpec spec, const std::string& dir, bool progress) {
  cluster::TrainOptions o;
  spec.out_dir = dir;
  if (fs::exists(dir + "/plan.json")) {
    o.resume_dir = dir;
  } else {
    std::error_code ec;
    fs::remove_all(dir, ec);  // a start that ended before it trained
  }
  o.spec = std::move(spec);
  o.progress = progress;
  auto job = cluster::JobHandle::start(std::move(o));
  int stops = 0;
  while (!job->ended()) {
    (void)job->nextEvent(0.05);
    for (; stops < gStops.load(); ++stops) job->stop(/*now=*/stops >= 1);
  }
  return job->wait();
}

// Every task at once by SHARP.
Status trainSharp(const SelectArgs& a, const std::string& run, select::Selection& s,
                  const std::vector<select::GridTask>& tasks, int workers) {
  select::SharpRunOptions o;
  o.run = fs::absolute(run).lexically_normal().string();
  std::error_code ec;
  o.self = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec) return internalError(fmt::format("cannot find this program (/proc/self/exe): {}", ec.message()));
  o.workers = workers;
  o.budget = s.sharp.at("worker_memory").get<Bytes>();
  HZ_ASSIGN_OR_RETURN(o.order, select::parseOrder(s.sharp.at("scheduler").get<std::string>()));
  o.double_buffer = s.sharp.at("double_buffer").get<bool>();
  o.progress = !a.no_progress;
  o.resume = fs::exists(run + "/sharp.json");
  if (!a.spill.empty()) o.spill = fs::absolute(a.spill).lexically_normal().string();
  o.stops = [] { return gStops.load(); };
  Status saved;
  o.on_task = [&](int index, const std::string& status, const std::string& reason) {
    for (select::TaskRecord& t : s.tasks) {
      if (t.index != index) continue;
      t.status = status;
      t.reason = reason;
      if (status == "completed") {
        t.seconds = t.cost = 0;
        if (auto summary = readJsonFile(run + "/" + t.dir() + "/summary.json"); summary.ok()) {
          select::readTaskSummary(&t, *summary);
        }
      }
    }
    if (auto st = select::saveSelection(run, s); !st.ok() && saved.ok()) saved = st;
  };
  std::vector<select::SharpTask> sharp;
  for (size_t i = 0; i < tasks.size(); ++i) {
    sharp.push_back({tasks[i].index, tasks[i].label, tasks[i].spec, o.run + "/" + s.tasks[i].dir()});
  }
  std::cout << fmt::format("SHARP: {} on {} of {} each, {} units{}", countOf(static_cast<std::int64_t>(tasks.size()),
                                                                        "model", "models"),
                           countOf(workers, "worker", "workers"), formatBytes(o.budget), orderName(o.order),
                           o.double_buffer ? ", double buffering" : "")
            << std::endl;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, onSelectStop);
  auto r = select::runSharp(sharp, o);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
  HZ_RETURN_IF_ERROR(saved);
  if (!r.ok() && !fs::exists(run + "/sharp.json")) return r.status();  // nothing trained yet (the Pilot's)
  if (!r.ok()) {
    std::cout << select::rankedTable(s);
    return Status(r.status().code(), fmt::format("{}\n(what was done is kept: hydrozoa select --resume {} goes on)",
                                                 r.status().message(), run));
  }
  std::cout << fmt::format("SHARP: {} units in {}, workers busy {:.0f}% of the time{}; timeline in {}/timeline.svg\n",
                           r->units, formatSeconds(r->seconds), 100 * r->utilisation,
                           r->lost_workers ? fmt::format(", {} lost and replaced", countOf(r->lost_workers, "worker",
                                                                                           "workers"))
                                           : "",
                           run);
  std::cout << fmt::format("{} tasks of {} in {}, best first by {}:\n", s.tasks.size(),
                           s.grid.value("name", std::string("the grid")), run, s.metric)
            << select::rankedTable(s);
  if (r->interrupted) {
    std::cerr << "Interrupted: every model's state is spilled (sharp.json says where); go on with: hydrozoa select "
                 "--resume "
              << run << "\n";
    return Status(ErrorCode::kUnavailable, "interrupted");
  }
  int failed = 0;
  for (const select::TaskRecord& t : s.tasks) failed += t.status == "failed";
  if (failed > 0) {
    return internalError(fmt::format("{} of {} tasks failed (their reasons are above and in {}/select.json)", failed,
                                     s.tasks.size(), run));
  }
  return Status();
}

Status runSelect(const SelectArgs& a) {
  if (a.grid.empty() == a.resume.empty()) {
    return invalidArgument("give a grid (hydrozoa select GRID.yaml) or a run to go on with (--resume RUN_DIR)");
  }
  std::string run = a.resume;
  select::Selection s;
  Result<select::Grid> grid = invalidArgument("no grid");
  if (!a.grid.empty()) {
    grid = select::loadGrid(a.grid);
  } else {
    HZ_ASSIGN_OR_RETURN(s, select::loadSelection(run));
    grid = select::parseGrid(s.grid, run + "/select.json", run);
  }
  HZ_RETURN_IF_ERROR(grid.status());
  HZ_ASSIGN_OR_RETURN(std::vector<select::GridTask> tasks, select::expandGrid(*grid));
  HZ_ASSIGN_OR_RETURN(const std::optional<std::int64_t> workers, optionalCount(a.workers, "--workers", {1, 1024}));
  for (select::GridTask& t : tasks) {
    if (!workers) continue;
    t.spec.workers = static_cast<int>(*workers);
    HZ_RETURN_IF_ERROR(cluster::validateJobSpec(t.spec, fmt::format("--workers {} (task {})", *workers, t.index)));
  }
  if (!a.grid.empty()) {
    run = a.out.empty() ? fmt::format("runs/{}-{}", grid->name, stamp()) : a.out;
    if (fs::exists(run + "/select.json")) {
      return invalidArgument(fmt::format("{} holds a selection already: go on with hydrozoa select --resume {}", run,
                                         run));
    }
    HZ_RETURN_IF_ERROR(privateDirectory(run, "--out"));
    s = select::newSelection(*grid, tasks);
    if (!a.worker_memory.empty()) {
      HZ_ASSIGN_OR_RETURN(const Bytes budget, parseBytes(a.worker_memory, "--worker-memory"));
      if (budget < 64 * kKiB || budget > 1024 * kGiB) {
        return invalidArgument(fmt::format("--worker-memory {}: from 64 KiB to 1 TiB", a.worker_memory));
      }
      const std::string order = a.scheduler.empty() ? "lrtf" : a.scheduler;
      HZ_RETURN_IF_ERROR(select::parseOrder(order).status());
      s.sharp = {{"worker_memory", budget}, {"scheduler", order}, {"double_buffer", !a.no_double_buffer}};
    } else if (!a.scheduler.empty() || a.no_double_buffer || !a.spill.empty()) {
      return invalidArgument("--scheduler, --no-double-buffer and --spill are SHARP's: give each worker's memory with "
                             "--worker-memory (e.g. 64MB) to train the models at once");
    }
    HZ_RETURN_IF_ERROR(select::saveSelection(run, s));
  } else if (tasks.size() != s.tasks.size()) {
    return invalidArgument(fmt::format("{}/select.json: {} tasks, but its grid expands to {}", run, s.tasks.size(),
                                       tasks.size()));
  }
  if (!a.resume.empty() && (!a.worker_memory.empty() || !a.scheduler.empty() || a.no_double_buffer ||
                            !a.spill.empty())) {
    return invalidArgument("a selection resumes as it began: leave out --worker-memory, --scheduler, "
                           "--no-double-buffer and --spill with --resume");
  }
  if (!s.sharp.is_null()) {
    const int w = workers ? static_cast<int>(*workers) : tasks.front().spec.workers;
    return trainSharp(a, run, s, tasks, w);
  }
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, onSelectStop);
  int failed = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    select::TaskRecord& t = s.tasks[i];
    if (t.status == "completed") continue;
    const std::string dir = run + "/" + t.dir();
    if (auto summary = readJsonFile(dir + "/summary.json"); summary.ok() && summary->value("status", "") == "completed") {
      t.status = "completed";  // it ended before select.json said so (a selection killed then)
      t.seconds = t.cost = 0;
      select::readTaskSummary(&t, *summary);
      HZ_RETURN_IF_ERROR(select::saveSelection(run, s));
      continue;
    }
    std::cout << fmt::format("Task {} of {} ({}): training in {}/{}", i + 1, tasks.size(), t.label, run, t.dir())
              << std::endl;
    t.status = "running";
    t.reason.clear();
    HZ_RETURN_IF_ERROR(select::saveSelection(run, s));
    auto r = trainTask(tasks[i].spec, dir, !a.no_progress);
    if (auto summary = readJsonFile(dir + "/summary.json"); summary.ok()) select::readTaskSummary(&t, *summary);
    if (!r.ok()) {
      t.status = "failed";
      t.reason = r.status().message();
      ++failed;
      std::cerr << fmt::format("Task {} ({}) failed: {}\n", i + 1, t.label, t.reason);
    } else if (r->interrupted) {
      t.status = "interrupted";
    } else {
      t.status = "completed";
    }
    HZ_RETURN_IF_ERROR(select::saveSelection(run, s));
    if (t.status == "interrupted" || gStops.load() > 0) {
      for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
      std::cout << select::rankedTable(s);
      std::cerr << "Interrupted: the task's workers stopped cleanly and checkpointed; go on with: hydrozoa select "
                   "--resume "
                << run << "\n";
      return Status(ErrorCode::kUnavailable, "interrupted");
    }
  }
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
  std::cout << fmt::format("{} tasks of {} in {}, best first by {}:\n", s.tasks.size(), grid->name, run, s.metric)
            << select::rankedTable(s);
  if (failed > 0) {
    return internalError(fmt::format("{} of {} tasks failed (their reasons are above and in {}/select.json); "
                                     "hydrozoa select --resume {} trains them again",
                                     failed, s.tasks.size(), run, run));
  }
  return Status();
}

}  // namespace

void addSelectCommand(CLI::App& app, Status* status) {
  auto a = std::make_shared<SelectArgs>();
  CLI::App* cmd = app.add_subcommand("select", kSelectAbout);
  cmd->add_option("grid", a->grid, "The grid: base (a job spec) or job, grid (field: [values]), metric");
  cmd->add_option("--resume", a->resume, "Go on with this selection's run directory (tasks not completed)");
  cmd->add_option("--out", a->out, "The selection's run directory (default runs/<name>-<time>)");
  cmd->add_option("--workers", a->workers, "Workers for every task (default: each task's cluster.workers)");
  cmd->add_option("--worker-memory", a->worker_memory,
                  "Each worker's memory (e.g. 64MB): train every model at once by SHARP, spilling shards");
  cmd->add_option("--scheduler", a->scheduler,
                  "SHARP's unit scheduler: lrtf (default), random, round_robin, sequential (one unit at a time)");
  cmd->add_flag("--no-double-buffer", a->no_double_buffer, "SHARP: load a worker's next unit only after its current");
  cmd->add_option("--spill", a->spill,
                  "SHARP: where the models' state lives between units (default /dev/shm/hydrozoa-<run>-<hash>, "
                  "host memory; a directory on a disk survives reboots, slower)");
  cmd->add_flag("--no-progress", a->no_progress, "No live progress line");
  cmd->footer(
      "\nWithout --worker-memory the tasks train one after another, each a hydrozoa job on all the workers.\n"
      "With it, SHARP trains them all at once on --workers processes of that memory each (docs/select.md).\n");
  cmd->callback([status, a] { *status = runSelect(*a); });

  // A SHARP worker, started by `hydrozoa select` (units on standard input).
  auto w = std::make_shared<select::WorkerOptions>();
  auto budget = std::make_shared<std::int64_t>(0);
  auto noDouble = std::make_shared<bool>(false);
  CLI::App* worker = app.add_subcommand("sharp-worker", "A SHARP worker (started by hydrozoa select)");
  worker->group("");  // hidden from --help
  worker->add_option("--run", w->run, "The selection's run directory (names the worker in ps)");
  worker->add_option("--budget", *budget, "Memory budget in bytes")->required()->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 50));
  worker->add_flag("--no-double-buffer", *noDouble, "Load each unit after the last");
  worker->callback([status, w, budget, noDouble] {
    w->budget = *budget;
    w->double_buffer = !*noDouble;
    const int rc = select::runSharpWorker(*w);
    *status = rc == 0 ? Status() : internalError("the SHARP worker failed");
  });
}

}  // namespace hydrozoa::cli
