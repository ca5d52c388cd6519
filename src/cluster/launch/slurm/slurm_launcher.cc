#include "cluster/launch/slurm/slurm_launcher.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "cluster/launch/command.h"
#include "wire/control.h"

namespace hydrozoa::cluster {
namespace {

std::string recordDir(const std::string& stateDir) {
  return (stateDir.empty() ? launcherStateDir() : stateDir) + "/slurm";
}

// Slurm's own commands, run with `conf` as SLURM_CONF when given (a record
// written by a coordinator that had one).
Result<std::string> slurmCommand(std::vector<std::string> argv, const std::string& conf = "") {
  if (!conf.empty()) argv.insert(argv.begin(), {"env", "SLURM_CONF=" + conf});
  return runCommand(argv);
}

// "salloc: error: X\nsalloc: Y" -> "X; Y": what Slurm said, without its prefixes.
std::string slurmSaid(const std::string& output) {
  std::istringstream in(output);
  std::string said;
  for (std::string line; std::getline(in, line);) {
    for (const char* prefix : {"salloc: error: ", "srun: error: ", "salloc: ", "srun: ", "slurmstepd: error: "}) {
      if (line.rfind(prefix, 0) == 0) {
        line = line.substr(std::strlen(prefix));
        break;
      }
    }
    if (line.empty() || line.rfind("Pending job allocation", 0) == 0 || line.find("queued and waiting") != std::string::npos) {
      continue;
    }
    said += (said.empty() ? "" : "; ") + line;
  }
  return said;
}

// The largest node of `partition` ("" : every partition), as sinfo reports it.
struct NodeSize {
  int cpus = 0;
  std::int64_t megabytes = 0;
};

NodeSize largestNode(const std::string& partition) {
  std::vector<std::string> argv = {"sinfo", "-h", "-N", "-o", "%c %m"};
  if (!partition.empty()) argv.insert(argv.end(), {"-p", partition});
  NodeSize largest;
  auto out = slurmCommand(argv);
  if (!out.ok()) return largest;
  std::istringstream in(*out);
  int cpus = 0;
  std::int64_t mb = 0;
  while (in >> cpus >> mb) {
    largest.cpus = std::max(largest.cpus, cpus);
    largest.megabytes = std::max(largest.megabytes, mb);
  }
  return largest;
}

std::string workerSize(int cpus, Bytes memory, int gpus) {
  std::string s = fmt::format("{} CPU{}", cpus, cpus == 1 ? "" : "s");
  if (memory > 0) s += ", " + formatBytes(memory);
  if (gpus > 0) s += fmt::format(", {} GPU{}", gpus, gpus == 1 ? "" : "s");
  return s;
}

// The controller's host from `scontrol show config` ("SlurmctldHost[0] = vm(10.0.0.1)").
Result<std::string> controllerHost() {
  HZ_ASSIGN_OR_RETURN(std::string config, slurmCommand({"scontrol", "show", "config"}));
  std::istringstream in(config);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("SlurmctldHost", 0) != 0) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string value = line.substr(eq + 1);
    value.erase(0, value.find_first_not_of(' '));
    if (const auto open = value.find('('), close = value.find(')'); open != std::string::npos && close > open) {
      return value.substr(open + 1, close - open - 1);
    }
    return value.substr(0, value.find_first_of(" ,"));
  }
  return unavailable("scontrol show config names no SlurmctldHost");
}

// What an allocation holds in all, from `scontrol show job` ("TRES=cpu=4,mem=2000M,node=1").
struct Held {
  int cpus = 0;
  std::int64_t megabytes = 0;
};

Held allocationHolds(const std::string& job) {
  Held held;
  auto out = slurmCommand({"scontrol", "show", "job", "-o", job});
  std::smatch m;
  if (!out.ok() || !std::regex_search(*out, m, std::regex("TRES=cpu=([0-9]+),mem=([0-9.]+)([KMGT])"))) return held;
  held.cpus = std::atoi(m[1].str().c_str());
  const double scale = m[3] == "K" ? 1.0 / 1024 : m[3] == "G" ? 1024 : m[3] == "T" ? 1024.0 * 1024 : 1;
  held.megabytes = static_cast<std::int64_t>(std::atof(m[2].str().c_str()) * scale);
  return held;
}

// The last lines Slurm wrote into a worker's log (srun's and slurmstepd's own).
std::string slurmLinesOf(const std::string& log) {
  std::ifstream in(log);
  std::string said;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("srun: error:", 0) == 0 || line.find("slurmstepd") != std::string::npos) {
      said = (said.empty() ? "" : said + "; ") + line;
      if (said.size() > 600) said = said.substr(said.size() - 600);
    }
  }
  return said;
}

}  // namespace

int slurmCpus(double vcpus) { return std::max(1, static_cast<int>(std::ceil(vcpus - 1e-9))); }

std::int64_t slurmMegabytes(Bytes bytes) {
  return static_cast<std::int64_t>(std::ceil(static_cast<double>(bytes) / (1024.0 * 1024.0)));
}

std::vector<std::string> sallocCommand(const SlurmSpec& spec, const std::string& name, int tasks, int cpus,
                                       Bytes memory, int gpus) {
  std::vector<std::string> argv = {"salloc",
                                   "--no-shell",
                                   "--job-name=" + name,
                                   fmt::format("--ntasks={}", tasks),
                                   fmt::format("--cpus-per-task={}", cpus),
                                   fmt::format("--immediate={}", std::max<std::int64_t>(
                                                                     1, std::llround(spec.allocation_timeout)))};
  // Per CPU, so that each task's share holds one worker wherever it lands.
  if (memory > 0) argv.push_back(fmt::format("--mem-per-cpu={}M", (slurmMegabytes(memory) + cpus - 1) / cpus));
  if (gpus > 0) argv.push_back(fmt::format("--gpus-per-task={}", gpus));
  if (!spec.partition.empty()) argv.push_back("--partition=" + spec.partition);
  if (!spec.account.empty()) argv.push_back("--account=" + spec.account);
  argv.insert(argv.end(), spec.args.begin(), spec.args.end());
  return argv;
}

std::vector<std::string> srunCommand(const SlurmSpec& spec, const std::string& allocation, const std::string& name,
                                     int cpus, Bytes memory, int gpus) {
  std::vector<std::string> argv = {"srun", "--job-name=" + name, "--ntasks=1", "--nodes=1",
                                   fmt::format("--cpus-per-task={}", cpus), "--kill-on-bad-exit=1"};
  if (!allocation.empty()) argv.insert(argv.end(), {"--jobid=" + allocation, "--exact"});
  if (memory > 0) argv.push_back(fmt::format("--mem={}M", slurmMegabytes(memory)));
  if (gpus > 0) argv.push_back(fmt::format("--gres=gpu:{}", gpus));
  if (allocation.empty()) {
    if (!spec.partition.empty()) argv.push_back("--partition=" + spec.partition);
    if (!spec.account.empty()) argv.push_back("--account=" + spec.account);
    argv.insert(argv.end(), spec.args.begin(), spec.args.end());
  }
  return argv;
}

std::string slurmSupport() {
  auto r = slurmCommand({"sinfo", "-h", "-o", "%P"});
  if (r.ok()) return "";
  std::string said = r.status().message();
  std::replace(said.begin(), said.end(), '\n', ' ');
  if (said.find("cannot run sinfo") != std::string::npos) {
    return "Slurm's commands are not installed here (Debian: apt-get install slurm-client); for a one-node Slurm "
           "on this machine run scripts/slurm-local start";
  }
  const char* conf = std::getenv("SLURM_CONF");
  return fmt::format("Slurm's controller does not answer ({}; SLURM_CONF={}): start it, or start a one-node Slurm on "
                     "this machine with scripts/slurm-local start and export SLURM_CONF=/run/hydrozoa-slurm/slurm.conf",
                     said, conf ? conf : "unset");
}

CleanupReport cleanupSlurm(const std::string& stateDir) {
  const std::string dir = recordDir(stateDir);
  StateLock lock(dir);
  return cleanupRecords(dir, "Slurm job", [](const Json& record) -> Result<std::vector<std::string>> {
    const std::string conf = record.value("slurm_conf", "");
    const std::string prefix = record.value("name", "");
    if (prefix.size() < 8) return invalidArgument("the record names no job; remove it by hand");  // "" would match all
    std::vector<std::string> cancelled;
    std::string problems;
    // Its jobs (allocation, workers' own jobs; also any still queued), then
    // its steps in an allocation it did not own: by their names.
    auto cancelNamed = [&](const std::vector<std::string>& list, const char* what) {
      auto out = slurmCommand(list, conf);
      if (!out.ok()) {
        problems += (problems.empty() ? "" : "; ") + out.status().message();
        return;
      }
      std::istringstream lines(*out);
      for (std::string id, name; lines >> id >> name;) {
        if (name != prefix && name.rfind(prefix + ".", 0) != 0) continue;
        if (auto r = slurmCommand({"scancel", id}, conf); r.ok()) {
          cancelled.push_back(fmt::format("cancelled {} {}", what, id));
        } else {
          problems += (problems.empty() ? "" : "; ") + r.status().message();
        }
      }
    };
    cancelNamed({"squeue", "-h", "-o", "%i %j"}, "job");
    if (const std::string in = record.value("steps_in", ""); !in.empty()) {
      cancelNamed({"squeue", "-h", "-s", "-j", in, "-o", "%i %j"}, "step");
    }
    if (!problems.empty()) return unavailable(problems);  // the record stays: try again
    return cancelled;
  });
}

SlurmLauncher::SlurmLauncher(SlurmOptions options, std::string tag, std::string srun)
    : o_(std::move(options)), tag_(std::move(tag)), record_(recordDir(o_.state_dir) + "/" + tag_ + ".json"),
      sruns_(std::move(srun)) {}

Result<std::unique_ptr<SlurmLauncher>> SlurmLauncher::create(const SlurmOptions& options) {
  if (std::string why = slurmSupport(); !why.empty()) return unavailable(why);
  SlurmOptions o = options;
  if (o.state_dir.empty()) o.state_dir = launcherStateDir();
  HZ_RETURN_IF_ERROR(ensureDir(o.state_dir));
  HZ_RETURN_IF_ERROR(ensureDir(recordDir(o.state_dir)));
  {
    const CleanupReport old = cleanupSlurm(o.state_dir);
    for (const auto& r : old.removed) spdlog::info("cancelled what a dead job left: {}", r);
  }
  std::random_device rd;
  const std::string tag = fmt::format("{:06x}", rd() & 0xffffff);
  // Slurm's names as squeue and sacct print them, split at spaces and '|':
  // letters, digits, '-', '_' only (the job's name may hold anything).
  std::string base = o.job_name.empty() ? "hydrozoa" : o.job_name.substr(0, 40);
  for (char& c : base) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '-';
  }
  o.job_name = fmt::format("{}-{}", base, tag);
  // srun by its path: the LocalLauncher execs it without a PATH search.
  HZ_ASSIGN_OR_RETURN(std::string srun, runCommand({"sh", "-c", "command -v srun"}));
  while (!srun.empty() && (srun.back() == '\n' || srun.back() == ' ')) srun.pop_back();
  std::unique_ptr<SlurmLauncher> l(new SlurmLauncher(o, tag, srun));

  if (!o.spec.coordinator_host.empty()) {
    l->host_ = o.spec.coordinator_host;
  } else {
    HZ_ASSIGN_OR_RETURN(std::string controller, controllerHost());
    auto host = wire::localAddressToward(controller);
    if (!host.ok()) {
      return unavailable(fmt::format("cannot tell the workers where to reach the coordinator: {}; set "
                                     "cluster.slurm.coordinator_host (--coordinator-host) to this host's address "
                                     "on the cluster's network", host.status().message()));
    }
    l->host_ = *host;
  }

  const int cpus = slurmCpus(o.cpus);
  if (const char* inside = std::getenv("SLURM_JOB_ID"); inside && *inside) {
    l->main_ = inside;
    spdlog::info("the workers run as steps of Slurm job {}, which this coordinator runs in", l->main_);
    // Steps past what it holds would wait for each other for ever.
    const Held held = allocationHolds(l->main_);
    const int workers = std::max(1, o.workers);
    if (held.cpus > 0 && (workers * cpus > held.cpus || workers * slurmMegabytes(o.memory) > held.megabytes)) {
      return invalidArgument(fmt::format(
          "the {} workers need up to {} CPUs and {} in all ({} each), but Slurm job {}, which this coordinator "
          "runs in, holds {} CPUs and {}: start it in a bigger allocation, or pin smaller workers (--cpu-limit, "
          "--memory-limit)",
          workers, workers * cpus, formatBytes(static_cast<double>(workers * slurmMegabytes(o.memory)) * kMiB),
          workerSize(cpus, o.memory, o.gpus), l->main_, held.cpus,
          formatBytes(static_cast<double>(held.megabytes) * kMiB)));
    }
    HZ_RETURN_IF_ERROR(l->saveRecord());
    return l;
  }
  // A request no node can hold would wait in the queue for ever: refuse it here.
  const NodeSize node = largestNode(o.spec.partition);
  const std::int64_t mb = slurmMegabytes(o.memory);
  const std::string where = o.spec.partition.empty() ? "the cluster" : "partition " + o.spec.partition;
  if (node.cpus > 0 && (cpus > node.cpus || mb > node.megabytes)) {
    return invalidArgument(fmt::format(
        "a worker needs {}, more than the largest node of {} has ({} CPUs, {}): pin smaller workers "
        "(--cpu-limit, --memory-limit; cluster.cpu_limit, cluster.memory_limit) or choose a partition with bigger "
        "nodes (--partition)",
        workerSize(cpus, o.memory, o.gpus), where, node.cpus, formatBytes(static_cast<double>(node.megabytes) * kMiB)));
  }
  HZ_RETURN_IF_ERROR(l->saveRecord());  // before anything exists
  HZ_ASSIGN_OR_RETURN(l->main_, l->allocate(o.job_name, std::max(1, o.workers), cpus, o.memory, o.gpus));
  l->ownMain_ = true;
  l->slots_ = std::max(1, o.workers);
  return l;
}

Result<std::string> SlurmLauncher::allocate(const std::string& name, int tasks, int cpus, Bytes memory, int gpus) {
  const std::vector<std::string> argv = sallocCommand(o_.spec, name, tasks, cpus, memory, gpus);
  const std::string what = fmt::format("{} worker{} × ({})", tasks, tasks == 1 ? "" : "s",
                                       workerSize(cpus, memory, gpus));
  spdlog::info("asking Slurm for an allocation of {}{} (waiting up to {})", what,
               o_.spec.partition.empty() ? "" : " on partition " + o_.spec.partition,
               formatSeconds(o_.spec.allocation_timeout));
  auto out = runCommand(argv);
  std::smatch m;
  const std::string text = out.ok() ? *out : out.status().message();
  if (out.ok() && std::regex_search(text, m, std::regex("Granted job allocation ([0-9]+)"))) {
    spdlog::info("Slurm granted allocation {}", m[1].str());
    return m[1].str();
  }
  // Anything it queued: withdrawn (salloc --immediate does it; by name in case it did not).
  if (std::regex_search(text, m, std::regex("job allocation ([0-9]+)"))) (void)slurmCommand({"scancel", m[1].str()});
  // runCommand's error: "`salloc ...` exited with status 1: <what it printed>".
  const auto quoted = text.rfind('`'), colon = text.find(": ", quoted == std::string::npos ? 0 : quoted);
  const std::string said = slurmSaid(colon == std::string::npos ? text : text.substr(colon + 2));
  std::string fix = "check the partition (sinfo -s) and account (sacctmgr show assoc) or ask for less";
  if (said.find("partition") != std::string::npos) {
    fix = "list the partitions with sinfo -s and choose one with --partition (cluster.slurm.partition)";
  } else if (said.find("account") != std::string::npos) {
    fix = "list your accounts with sacctmgr show assoc user=$USER and choose one with --account";
  } else if (said.find("timed out") != std::string::npos || said.find("not available now") != std::string::npos ||
             said.find("revoked") != std::string::npos) {
    fix = fmt::format("the cluster had no room within {} (cluster.slurm.allocation_timeout): wait and retry, raise "
                      "the timeout, or plan for fewer workers; nothing is left queued",
                      formatSeconds(o_.spec.allocation_timeout));
  }
  return unavailable(fmt::format("Slurm refused an allocation of {}{}: {}; {}", what,
                                 o_.spec.partition.empty() ? "" : " on partition " + o_.spec.partition,
                                 said.empty() ? text : said, fix));
}

SlurmLauncher::~SlurmLauncher() {
  stopAll(2.0);
  if (ownMain_ && !main_.empty()) {
    if (auto r = slurmCommand({"scancel", main_}); !r.ok()) spdlog::warn("{}", r.status().message());
  }
  StateLock lock(recordDir(o_.state_dir));
  ::unlink(record_.c_str());
}

Status SlurmLauncher::saveRecord() const {
  Json record = recordOwner(tag_);
  const char* conf = std::getenv("SLURM_CONF");
  record.update({{"slurm_conf", conf ? conf : ""},
                 {"name", o_.job_name},  // of every job and step it makes
                 {"steps_in", ownMain_ ? "" : main_}});
  StateLock lock(recordDir(o_.state_dir));
  return writeFileAtomically(record_, record.dump(2) + "\n");
}

Status SlurmLauncher::launch(const WorkerLaunch& w) {
  const int cpus = slurmCpus(w.cpus > 0 ? w.cpus : o_.cpus);
  std::string allocation = main_;
  // In an allocation of ours, each worker takes one task's share; past them
  // (a next generation started early, more replicas), a job of its own,
  // which Slurm queues and starts while the coordinator goes on.
  if (ownMain_ && static_cast<int>(inMain_.size()) >= slots_) {
    allocation.clear();
    ownJob_.insert(w.id);
    spdlog::info("worker {} runs as a Slurm job of its own: the allocation holds {} workers", w.id, slots_);
  } else {
    inMain_.insert(w.id);
  }
  ++launches_[w.id];
  if (allocation.empty()) everOwnJob_.insert(w.id);
  WorkerLaunch step = w;
  step.args = srunCommand(o_.spec, allocation, stepName(w.id), cpus, w.memory, w.gpus);
  step.args.erase(step.args.begin());  // "srun": the LocalLauncher's executable
  step.args.push_back(o_.executable);
  step.args.insert(step.args.end(), w.args.begin(), w.args.end());
  step.process_name.clear();
  step.start_delay = 0;
  logs_[w.id] = w.log_path;
  if (Status s = sruns_.launch(step); !s.ok()) {
    WorkerExit e;
    e.id = w.id;
    ended(&e);
    return s;
  }
  return Status();
}

void SlurmLauncher::ended(WorkerExit* e) {
  inMain_.erase(e->id);
  ownJob_.erase(e->id);
  if (auto log = logs_.find(e->id); log != logs_.end()) {
    const std::string said = slurmLinesOf(log->second);
    if (!said.empty()) e->how += " (Slurm: " + said + ")";
    if (said.find("Unable to create step") != std::string::npos) {
      e->how += "; the step could not start: pin smaller workers (--cpu-limit, --memory-limit) or use bigger nodes";
    }
    if (said.find("oom-kill") != std::string::npos || said.find("Exceeded job memory limit") != std::string::npos) {
      e->out_of_memory = true;
    }
    logs_.erase(log);
  }
}

// NOTE [Billing from Slurm's accounting]
// slurmctld hands each step's record to slurmdbd as it ends, so right after
// the last worker stopped, sacct may not list it yet, or list it RUNNING:
// it is asked again for up to 10 s until every step launched is there and
// ended. Rows: the steps of the allocation ("12.3|<job>.w1|41|COMPLETED")
// and of the workers' own jobs ("15.0|<job>.w4|...", by name); not the
// allocation itself, nor its "extern"/"batch" steps. ElapsedRaw is whole
// seconds, as Slurm counts them.
std::map<int, std::vector<Seconds>> SlurmLauncher::accountedSeconds() {
  std::vector<std::vector<std::string>> queries;
  const std::vector<std::string> fields = {"sacct", "-n", "-P", "-o", "JobID,JobName,ElapsedRaw,State"};
  if (!main_.empty()) {
    queries.push_back(fields);
    queries.back().insert(queries.back().end(), {"-j", main_});
  }
  if (!everOwnJob_.empty()) {
    std::string names;
    for (int id : everOwnJob_) names += (names.empty() ? "" : ",") + stepName(id);
    queries.push_back(fields);
    queries.back().push_back("--name=" + names);
  }
  const std::string prefix = o_.job_name + ".w";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    // (job, step) -> (worker, seconds): in the order Slurm numbered them.
    std::map<std::pair<long, long>, std::pair<int, Seconds>> steps;
    bool settled = true;
    for (const auto& q : queries) {
      auto out = slurmCommand(q);
      if (!out.ok()) {
        spdlog::info("billing on the coordinator's clock: Slurm keeps no accounting here ({})",
                     out.status().message().substr(0, 200));
        return {};
      }
      std::istringstream lines(*out);
      for (std::string line; std::getline(lines, line);) {
        std::vector<std::string> f;
        std::istringstream cells(line);
        for (std::string c; std::getline(cells, c, '|');) f.push_back(c);
        if (f.size() < 4 || f[1].rfind(prefix, 0) != 0) continue;
        const auto dot = f[0].find('.');
        if (dot == std::string::npos || f[0].find_first_not_of("0123456789", dot + 1) != std::string::npos) continue;
        const int id = std::atoi(f[1].c_str() + prefix.size());
        if (f[3] == "RUNNING" || f[3] == "PENDING" || f[3].empty()) settled = false;
        steps[{std::atol(f[0].c_str()), std::atol(f[0].c_str() + dot + 1)}] = {id, std::atof(f[2].c_str())};
      }
    }
    std::map<int, std::vector<Seconds>> out;
    for (const auto& [key, v] : steps) out[v.first].push_back(v.second);
    std::size_t have = 0, launched = 0;
    for (const auto& [id, n] : launches_) {
      launched += static_cast<std::size_t>(n);
      have += out.count(id) ? out[id].size() : 0;
    }
    if (settled && have >= launched) return out;
    if (std::chrono::steady_clock::now() > deadline) {
      spdlog::warn("billing on the coordinator's clock: Slurm's accounting lists {} of the {} steps ended", have,
                   launched);
      return {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}

std::vector<WorkerExit> SlurmLauncher::poll() {
  std::vector<WorkerExit> out = sruns_.poll();
  for (WorkerExit& e : out) ended(&e);
  return out;
}

void SlurmLauncher::killStep(int id) {
  if (ownJob_.count(id)) {
    (void)slurmCommand({"scancel", "--name=" + stepName(id)});  // queued or running: the whole job
    return;
  }
  auto steps = slurmCommand({"squeue", "-h", "-s", "-j", main_, "-o", "%i %j"});
  std::istringstream lines(steps.ok() ? *steps : "");
  for (std::string step, name; lines >> step >> name;) {
    if (name == stepName(id)) (void)slurmCommand({"scancel", "--signal=KILL", step});
  }
}

void SlurmLauncher::signal(int id, bool force) {
  // srun passes a SIGTERM on to its step (Slurm's cancel: SIGTERM, KillWait,
  // SIGKILL); a srun killed outright would leave the step running.
  if (force) killStep(id);
  sruns_.signal(id, force);
}

std::vector<WorkerExit> SlurmLauncher::stopAll(Seconds grace) {
  std::vector<WorkerExit> out = poll();
  std::vector<int> live;
  for (int id : inMain_) live.push_back(id);
  for (int id : ownJob_) live.push_back(id);
  for (int id : live) sruns_.signal(id, false);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace);
  for (;;) {
    for (WorkerExit& e : sruns_.poll()) {
      ended(&e);
      out.push_back(e);
    }
    bool any = false;
    for (int id : live) any = any || sruns_.alive(id);
    if (!any || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int id : live) {
    if (sruns_.alive(id)) killStep(id);
  }
  for (WorkerExit& e : sruns_.stopAll(5.0)) {
    ended(&e);
    out.push_back(e);
  }
  return out;
}

}  // namespace hydrozoa::cluster
