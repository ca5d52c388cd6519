// The full program's side of the commands (cli/torch_side.h; NOTE [The
// front end and the full program]): training a valid job, calibrating this
// CPU, counting a dataset.
#include "cli/torch_side.h"

#include <fmt/format.h>

#include <pthread.h>

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>

#include "cluster/job_handle.h"
#include "cluster/job_plan.h"
#include "core/files.h"
#include "core/log.h"
#include "core/units.h"
#include "data/dataset.h"
#include "profile/calibrate.h"
#include "runtime/job_data.h"

namespace hydrozoa::cli {
namespace {

std::atomic<int> gInterrupt{0};
std::atomic<int> gCheckpoint{0};

// NOTE [Stopping on signals]
// Ctrl-C, SIGTERM and a closed terminal (SIGHUP) stop the job cleanly: every
// worker finishes the same step and checkpoints it, the containers are
// removed and summary.json says "interrupted". A second one stops at once
// (no checkpoint of the last steps) but still removes every worker and
// container and writes the summary; later ones only say that teardown is
// under way. A closed pipe (`hydrozoa train ... | head`) is a clean stop too,
// and never kills the coordinator. The handlers only count and write(2).
void say(const char* text) { (void)!::write(2, text, std::strlen(text)); }

extern "C" void onInterrupt(int) {
  const int n = gInterrupt.fetch_add(1) + 1;
  if (n == 2) {
    say("\nhydrozoa: stopping now: removing the workers and their containers...\n");
  } else if (n > 2) {
    say("\nhydrozoa: still removing the workers; if this hangs, kill -9 the coordinator and run `hydrozoa "
        "cleanup`\n");
  }
}

extern "C" void onBrokenPipe(int) {
  int none = 0;
  gInterrupt.compare_exchange_strong(none, 1);  // a clean stop, however many writes fail after it
}

extern "C" void onCheckpoint(int) { gCheckpoint.fetch_add(1); }

// SIGUSR2: a preemption (the cluster scheduler's, docs/cluster.md): a clean
// stop as for Ctrl-C, the summary's status "preempted".
std::atomic<int> gPreempt{0};
extern "C" void onPreempt(int) { gPreempt.fetch_add(1); }

}  // namespace

Status trainJob(cluster::TrainOptions o, const std::string& eventsFile) {
  std::unique_ptr<std::ofstream> events;
  if (!eventsFile.empty()) {
    events = std::make_unique<std::ofstream>(eventsFile, std::ios::app);
    if (!*events) return invalidArgument(fmt::format("--events: cannot write {}", eventsFile));
  }
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, onInterrupt);
  std::signal(SIGPIPE, onBrokenPipe);
  std::signal(SIGUSR1, onCheckpoint);
  std::signal(SIGUSR2, onPreempt);
  {
    // A scheduler starts this process with its stops blocked until now
    // (sched/service/job_process.cc); one sent meanwhile is handled here.
    sigset_t stops;
    sigemptyset(&stops);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&stops, sig);
    ::pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);
  }
  // The job runs on its handle's thread; this one passes the signals on
  // and writes the events (--events: one JSON object a line, flushed).
  auto job = cluster::JobHandle::start(std::move(o));
  int interrupts = 0, checkpointRequests = 0;
  while (!job->ended()) {
    if (auto e = job->nextEvent(0.05); e && events) *events << e->dump() << std::endl;
    for (; interrupts < gInterrupt.load(); ++interrupts) job->stop(/*now=*/interrupts >= 1);
    for (; checkpointRequests < gCheckpoint.load(); ++checkpointRequests) job->checkpoint();
    if (gPreempt.load() > 0) job->preempt();
  }
  const Result<cluster::TrainResult>& result = job->wait();
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, SIG_DFL);
  std::signal(SIGPIPE, SIG_IGN);  // what is printed below may go to a closed pipe
  if (!result.ok()) return result.status();
  const std::string& dir = result->run_dir;
  if (result->preempted) {
    std::cerr << "Preempted: the workers stopped cleanly and checkpointed; resume with: hydrozoa train --resume "
              << dir << "\n";
    return Status(ErrorCode::kUnavailable, "preempted");
  }
  if (result->interrupted) {
    std::cerr << "Interrupted: the workers stopped cleanly and checkpointed; resume with: hydrozoa train --resume "
              << dir << "\n";
    return Status(ErrorCode::kUnavailable, "interrupted");
  }
  auto summary = readJsonFile(dir + "/summary.json");
  std::string checkpoints = dir + "/checkpoints";
  if (summary.ok()) {
    if (auto c = summary->value("/outputs/checkpoints"_json_pointer, std::string()); !c.empty()) checkpoints = c;
    const Json& j = *summary;
    const bool stopped = j.value("status", "") == "stopped";
    if (stopped) {
      std::cout << fmt::format("Stopped at step {} of {}", j["steps"]["done"].dump(), j["steps"]["total"].dump());
    } else {
      std::cout << "Finished " << j["steps"]["done"] << " steps";
    }
    if (j["final_test_accuracy"].is_number()) {
      std::cout << fmt::format(": test accuracy {:.2f}%", 100 * j["final_test_accuracy"].get<double>());
    }
    std::cout << fmt::format(", {:.0f} samples/s, {} in {}", j["throughput_samples_per_s"].get<double>(),
                             formatUsd(j["cost_usd"].get<double>()), formatSeconds(j["wall_seconds"].get<double>()));
    std::cout << (stopped ? "; continue with: hydrozoa train --resume " + dir : std::string()) << "\n";
  }
  std::cout << "Run directory: " << dir << "\n  metrics:     " << dir << "/metrics.jsonl\n  trace:       " << dir
            << "/trace.json (open in https://ui.perfetto.dev or chrome://tracing)\n  summary:     " << dir
            << "/summary.json\n  checkpoints: " << checkpoints << "\n";
  return Status();
}

Result<profile::DeviceSpec> calibrateThisCpu(int threads) {
  spdlog::info("calibrating this CPU for predictions (a few seconds)...");
  HZ_ASSIGN_OR_RETURN(profile::DeviceSpec d, profile::calibrateCpu({threads}));
  spdlog::info("per-kind time factors at microbatch 8 (forward / backward): {}", profile::describeKindFactors(d));
  return d;
}

Result<std::int64_t> trainingSetSize(const cluster::JobSpec& spec) {
  HZ_ASSIGN_OR_RETURN(cluster::ModelInfo model, cluster::inspectModel(spec));
  HZ_ASSIGN_OR_RETURN(auto train, data::openDataset(runtime::jobDataSpec(spec, model.input, model.task),
                                                    data::Split::kTrain));
  return train->size();
}

}  // namespace hydrozoa::cli
