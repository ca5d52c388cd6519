// `hydrozoa select`: many models from a grid (issue 14 §1; docs/select.md).
// Today the tasks train one after another, each a hydrozoa job on all the
// workers: the baseline SHARP (src/select/sharp.h) is to beat.
#include <fmt/format.h>

#include <csignal>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "cluster/coordinator.h"
#include "cluster/job_handle.h"
#include "select/grid.h"
#include "select/selection.h"

namespace hydrozoa::cli {
namespace {

namespace fs = std::filesystem;

std::atomic<int> gStops{0};
extern "C" void onSelectStop(int) { gStops.fetch_add(1); }

struct SelectArgs {
  std::string grid, resume, out, workers;
  bool no_progress = false;
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
    std::error_code ec;
    fs::create_directories(run, ec);
    if (ec) return invalidArgument(fmt::format("cannot make {}: {}", run, ec.message()));
    fs::permissions(run, fs::perms::owner_all, ec);
    s = select::newSelection(*grid, tasks);
    HZ_RETURN_IF_ERROR(select::saveSelection(run, s));
  } else if (tasks.size() != s.tasks.size()) {
    return invalidArgument(fmt::format("{}/select.json: {} tasks, but its grid expands to {}", run, s.tasks.size(),
                                       tasks.size()));
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
  CLI::App* cmd = app.add_subcommand(
      "select", "Train every model of a grid (a base job and values to try) and rank them (docs/select.md)");
  cmd->add_option("grid", a->grid, "The grid: base (a job spec) or job, grid (field: [values]), metric");
  cmd->add_option("--resume", a->resume, "Go on with this selection's run directory (tasks not completed)");
  cmd->add_option("--out", a->out, "The selection's run directory (default runs/<name>-<time>)");
  cmd->add_option("--workers", a->workers, "Workers for every task (default: each task's cluster.workers)");
  cmd->add_flag("--no-progress", a->no_progress, "No live progress line");
  cmd->footer("\nToday the tasks train one after another, each on all the workers.\n");
  cmd->callback([status, a] { *status = runSelect(*a); });
}

}  // namespace hydrozoa::cli
