#include "cluster/launch/container/container_launcher.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "cluster/launch/command.h"
#include "cluster/launch/records.h"

namespace hydrozoa::cluster {
namespace {

constexpr const char* kCgroupRoot = "/sys/fs/cgroup";

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::string readSmall(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool writeSmall(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// "key value" lines (memory.events, memory.oom_control): the value of `key`.
std::int64_t keyedValue(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  std::int64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

// Where this process may create cgroups: v2's unified tree, or v1's cpu and
// memory hierarchies below the cgroups this process is in.
struct CgroupLayout {
  bool v2 = false;
  std::string cpu, memory;  // parent directories of the job's cgroups
  std::string problem;      // non-empty: unusable, and why
};

CgroupLayout cgroupLayout() {
  CgroupLayout l;
  if (exists(std::string(kCgroupRoot) + "/cgroup.controllers")) {
    l.v2 = true;
    l.cpu = l.memory = kCgroupRoot;
    const std::string controllers = readSmall(std::string(kCgroupRoot) + "/cgroup.controllers");
    if (controllers.find("cpu") == std::string::npos || controllers.find("memory") == std::string::npos) {
      l.problem = "cgroup v2 at /sys/fs/cgroup lacks the cpu or memory controller";
    }
  } else {
    std::istringstream in(readSmall("/proc/self/cgroup"));
    for (std::string line; std::getline(in, line);) {
      const auto a = line.find(':'), b = line.find(':', a + 1);
      if (a == std::string::npos || b == std::string::npos) continue;
      std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
      const std::string path = line.substr(b + 1) == "/" ? "" : line.substr(b + 1);
      if (controllers.find(",cpu,") != std::string::npos) l.cpu = std::string(kCgroupRoot) + "/cpu" + path;
      if (controllers.find(",memory,") != std::string::npos) l.memory = std::string(kCgroupRoot) + "/memory" + path;
    }
    if (l.cpu.empty() || l.memory.empty()) l.problem = "no cgroup v1 cpu and memory hierarchies at /sys/fs/cgroup";
  }
  if (l.problem.empty() && (::access(l.cpu.c_str(), W_OK) != 0 || ::access(l.memory.c_str(), W_OK) != 0)) {
    l.problem = fmt::format("cannot create cgroups in {} and {}", l.cpu, l.memory);
  }
  return l;
}

std::vector<std::string> jobCgroups(const CgroupLayout& l, const std::string& job) {
  if (l.v2) return {l.cpu + "/hydrozoa-" + job};
  return {l.cpu + "/hydrozoa-" + job, l.memory + "/hydrozoa-" + job};
}

// Kills what is still in a cgroup and removes it, children first.
void removeCgroup(const std::string& dir) {
  if (!exists(dir)) return;
  if (DIR* d = ::opendir(dir.c_str())) {
    std::vector<std::string> children;
    while (dirent* e = ::readdir(d)) {
      if (e->d_type == DT_DIR && e->d_name[0] != '.') children.push_back(dir + "/" + e->d_name);
    }
    ::closedir(d);
    for (const auto& c : children) removeCgroup(c);
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
    std::istringstream procs(readSmall(dir + "/cgroup.procs"));
    for (pid_t p; procs >> p;) ::kill(p, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  spdlog::warn("could not remove cgroup {}: {}", dir, std::strerror(errno));
}

std::string subnetPrefix(int subnet) { return fmt::format("10.213.{}.", subnet); }

// Removes one job's containers as its record lists them.
std::vector<std::string> removeJob(const Json& record) {
  std::vector<std::string> removed, problems;
  for (const auto& ns : record.value("netns", std::vector<std::string>{})) {
    if (!exists("/run/netns/" + ns)) continue;
    if (auto pids = runCommand({"ip", "netns", "pids", ns}); pids.ok()) {
      std::istringstream in(*pids);
      for (pid_t p; in >> p;) ::kill(p, SIGKILL);
    }
    if (auto r = runCommand({"ip", "netns", "delete", ns}); r.ok()) {
      removed.push_back("namespace " + ns);
    } else {
      problems.push_back(r.status().message());
    }
  }
  const std::string bridge = record.value("bridge", "");
  if (!bridge.empty() && exists("/sys/class/net/" + bridge)) {
    if (auto r = runCommand({"ip", "link", "delete", bridge}); r.ok()) {
      removed.push_back("bridge " + bridge);
    } else {
      problems.push_back(r.status().message());
    }
  }
  for (const auto& dir : record.value("cgroups", std::vector<std::string>{})) {
    if (!exists(dir)) continue;
    removeCgroup(dir);
    removed.push_back("cgroup " + dir);
  }
  for (const auto& p : problems) spdlog::warn("{}", p);
  return removed;
}

CleanupReport cleanupLocked(const std::string& dir) {
  return cleanupRecords(dir, "job", [](const Json& record) -> Result<std::vector<std::string>> {
    return removeJob(record);
  });
}

}  // namespace

std::string containerSupport() {
  if (::geteuid() != 0) return "containers need root (network namespaces, tc and cgroups); this user is not root";
  if (!runCommand({"ip", "-V"}).ok()) return "containers need the `ip` tool (Debian package iproute2)";
  if (!runCommand({"tc", "-V"}).ok()) return "containers need the `tc` tool (Debian package iproute2)";
  const CgroupLayout l = cgroupLayout();
  if (!l.problem.empty()) return "containers need cgroups: " + l.problem;
  return "";
}

CleanupReport cleanupContainers(const std::string& stateDir) {
  const std::string dir = stateDir.empty() ? launcherStateDir() : stateDir;
  if (!exists(dir)) return {};
  StateLock lock(dir);
  return cleanupLocked(dir);
}

ContainerLauncher::ContainerLauncher(ContainerOptions options, std::string job, int subnet)
    : o_(std::move(options)), job_(std::move(job)), bridge_("hzb" + job_),
      record_(o_.state_dir + "/" + job_ + ".json"), subnet_(subnet), processes_(o_.executable) {}

Result<std::unique_ptr<ContainerLauncher>> ContainerLauncher::create(const ContainerOptions& options) {
  if (std::string why = containerSupport(); !why.empty()) return unavailable(why);
  ContainerOptions o = options;
  if (o.state_dir.empty()) o.state_dir = launcherStateDir();
  HZ_RETURN_IF_ERROR(ensureDir(o.state_dir));
  StateLock lock(o.state_dir);
  const CleanupReport old = cleanupLocked(o.state_dir);
  for (const auto& r : old.removed) spdlog::info("removed what a dead job left: {}", r);

  // A subnet no job and no interface of this machine uses.
  std::set<int> used;
  for (const std::string& file : recordFiles(o.state_dir)) {
    if (auto r = readJsonFile(file); r.ok()) used.insert(r->value("subnet", -1));
  }
  HZ_ASSIGN_OR_RETURN(std::string addresses, runCommand({"ip", "-4", "-o", "addr", "show"}));
  int subnet = -1;
  for (int n = 0; n < 256 && subnet < 0; ++n) {
    if (!used.count(n) && addresses.find(" " + subnetPrefix(n)) == std::string::npos) subnet = n;
  }
  if (subnet < 0) return unavailable("no free subnet in 10.213.0.0/16 for the job's containers; run hydrozoa cleanup");
  std::random_device rd;
  const std::string job = fmt::format("{:06x}", rd() & 0xffffff);
  std::unique_ptr<ContainerLauncher> l(new ContainerLauncher(o, job, subnet));
  HZ_RETURN_IF_ERROR(l->saveRecord());  // before anything exists, so a crash leaves nothing untracked
  const CgroupLayout layout = cgroupLayout();
  for (const auto& dir : jobCgroups(layout, job)) {
    if (::mkdir(dir.c_str(), 0755) != 0) {
      return ioError(fmt::format("cannot create cgroup {}: {}", dir, std::strerror(errno)));
    }
  }
  if (layout.v2) {
    writeSmall(std::string(kCgroupRoot) + "/cgroup.subtree_control", "+cpu +memory");
    if (!writeSmall(jobCgroups(layout, job)[0] + "/cgroup.subtree_control", "+cpu +memory")) {
      return ioError(fmt::format("cannot enable the cpu and memory controllers in {}: {}", jobCgroups(layout, job)[0],
                                 std::strerror(errno)));
    }
  }
  // NOTE [The bridge's own address]
  // A bridge without an address of its own takes the lowest of its ports',
  // so removing the container that had it changes the coordinator's MAC
  // under the workers still running: their ARP entries go stale, and what
  // they send (a last "done", a heartbeat) is dropped for up to half a minute.
  // A fixed, locally administered address keeps it stable.
  HZ_RETURN_IF_ERROR(runCommand({"ip", "link", "add", l->bridge_, "address",
                                 fmt::format("02:68:7a:d5:{:02x}:01", subnet), "type", "bridge"})
                         .status());
  HZ_RETURN_IF_ERROR(runCommand({"ip", "addr", "add", subnetPrefix(subnet) + "1/24", "dev", l->bridge_}).status());
  HZ_RETURN_IF_ERROR(runCommand({"ip", "link", "set", l->bridge_, "up"}).status());
  return l;
}

ContainerLauncher::~ContainerLauncher() {
  processes_.stopAll(2.0);
  for (int id : std::set<int>(workers_)) removeWorker(id);
  StateLock lock(o_.state_dir);
  auto record = readJsonFile(record_);
  if (record.ok()) (void)removeJob(*record);
  ::unlink(record_.c_str());
}

std::string ContainerLauncher::coordinatorHost() const { return subnetPrefix(subnet_) + "1"; }
std::string ContainerLauncher::workerHost(int id) const { return subnetPrefix(subnet_) + std::to_string(2 + id); }
std::string ContainerLauncher::netns(int id) const { return fmt::format("hz-{}-w{}", job_, id); }

std::vector<std::string> ContainerLauncher::cgroupDirs(int id) const {
  std::vector<std::string> out;
  for (const auto& d : jobCgroups(cgroupLayout(), job_)) out.push_back(fmt::format("{}/w{}", d, id));
  return out;
}

Status ContainerLauncher::saveRecord() const {
  std::vector<std::string> namespaces;
  for (int id : workers_) namespaces.push_back(netns(id));
  Json record = recordOwner(job_);
  record.update({{"bridge", bridge_},
                 {"subnet", subnet_},
                 {"netns", namespaces},
                 {"cgroups", jobCgroups(cgroupLayout(), job_)}});
  return writeFileAtomically(record_, record.dump(2) + "\n");
}

Status ContainerLauncher::createNetwork(int id) {
  // A namespace outlives its name while sockets of its last process still
  // drain (so a worker's last bytes are delivered), and its veth pair with
  // it; a replacement of the same id (the next generation) must not wait for
  // that: the old pair goes now.
  const std::string ns = netns(id), veth = vethName(id);
  if (exists("/sys/class/net/" + veth)) (void)runCommand({"ip", "link", "delete", veth});
  HZ_RETURN_IF_ERROR(runCommand({"ip", "netns", "add", ns}).status());
  HZ_RETURN_IF_ERROR(runCommand({"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns}).status());
  HZ_RETURN_IF_ERROR(runCommand({"ip", "link", "set", veth, "master", bridge_, "up"}).status());
  HZ_RETURN_IF_ERROR(
      runCommand({"ip", "-n", ns, "addr", "add", workerHost(id) + (o_.isolated ? "/32" : "/24"), "dev", "eth0"}).status());
  HZ_RETURN_IF_ERROR(runCommand({"ip", "-n", ns, "link", "set", "eth0", "up"}).status());
  HZ_RETURN_IF_ERROR(runCommand({"ip", "-n", ns, "link", "set", "lo", "up"}).status());
  if (o_.isolated) {
    // The bridge's address and nothing else: no subnet, no default route.
    HZ_RETURN_IF_ERROR(runCommand({"ip", "-n", ns, "route", "add", coordinatorHost(), "dev", "eth0"}).status());
  }
  // Egress shaping: a token bucket at the worker's bandwidth, behind netem's
  // delay when a latency is asked for.
  std::string parent = "root";
  if (o_.latency > 0) {
    auto r = runCommand({"ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:",
                         "netem", "delay", fmt::format("{}us", std::llround(o_.latency * 1e6)), "limit", "100000"});
    if (!r.ok()) {
      return unavailable(fmt::format("cluster.latency needs the kernel's netem queueing discipline "
                                            "(sch_netem), which this kernel refuses ({}); leave latency at 0",
                                            r.status().message()));
    }
    parent = "parent 1:";
  }
  if (o_.bandwidth > 0) {
    const double rate = o_.bandwidth;  // bytes per second
    // The bucket holds at least a few GSO-sized packets and 10 ms of traffic.
    const auto burst = static_cast<std::int64_t>(std::max(256.0 * 1024, rate * 0.01));
    std::vector<std::string> cmd = {"ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0"};
    if (parent == "root") {
      cmd.push_back("root");
    } else {
      cmd.insert(cmd.end(), {"parent", "1:"});
    }
    cmd.insert(cmd.end(), {"handle", "2:", "tbf", "rate", fmt::format("{}bit", std::llround(rate * 8)), "burst",
                           std::to_string(burst), "latency", "200ms"});
    HZ_RETURN_IF_ERROR(runCommand(cmd).status());
    if (o_.shape_downloads) {
      // What comes in leaves the bridge through the host's end of the pair.
      HZ_RETURN_IF_ERROR(runCommand({"tc", "qdisc", "add", "dev", veth, "root", "tbf", "rate",
                                     fmt::format("{}bit", std::llround(rate * 8)), "burst", std::to_string(burst),
                                     "latency", "200ms"})
                             .status());
    }
  }
  return Status();
}

Status ContainerLauncher::launch(const WorkerLaunch& w) {
  if (w.id < 0 || w.id > 250) return invalidArgument("a job's containers are numbered 0 to 250");
  workers_.insert(w.id);
  HZ_RETURN_IF_ERROR(saveRecord());
  if (Status s = createNetwork(w.id); !s.ok()) {
    return unavailable(fmt::format("worker {}: cannot create its container's network: {}", w.id, s.message()));
  }
  const CgroupLayout layout = cgroupLayout();
  ProcessPlacement placement;
  placement.netns_path = "/run/netns/" + netns(w.id);
  const std::vector<std::string> dirs = cgroupDirs(w.id);
  for (const auto& d : dirs) {
    if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
      return ioError(fmt::format("worker {}: cannot create cgroup {}: {}", w.id, d, std::strerror(errno)));
    }
    placement.cgroup_procs.push_back(d + "/cgroup.procs");
  }
  const std::string& cpuDir = dirs.front();
  const std::string& memDir = dirs.back();
  constexpr std::int64_t kPeriod = 100000;  // µs
  if (w.cpus > 0) {
    const auto quota = static_cast<std::int64_t>(std::ceil(w.cpus * kPeriod));
    const bool ok = layout.v2 ? writeSmall(cpuDir + "/cpu.max", fmt::format("{} {}", quota, kPeriod))
                              : writeSmall(cpuDir + "/cpu.cfs_period_us", std::to_string(kPeriod)) &&
                                    writeSmall(cpuDir + "/cpu.cfs_quota_us", std::to_string(quota));
    if (!ok) return ioError(fmt::format("worker {}: cannot set its CPU quota in {}", w.id, cpuDir));
    cpus_[w.id] = w.cpus;
  }
  if (w.memory > 0) {
    const std::string bytes = std::to_string(static_cast<std::int64_t>(w.memory));
    const bool ok = layout.v2 ? writeSmall(memDir + "/memory.max", bytes)
                              : writeSmall(memDir + "/memory.limit_in_bytes", bytes);
    if (!ok) return ioError(fmt::format("worker {}: cannot set its memory limit in {}", w.id, memDir));
    // No swap: a container over its memory is killed, as in the cloud.
    if (layout.v2) {
      writeSmall(memDir + "/memory.swap.max", "0");
    } else {
      writeSmall(memDir + "/memory.swappiness", "0");
    }
    memory_[w.id] = w.memory;
  }
  return processes_.launchIn(w, placement);
}

void ContainerLauncher::explainExit(WorkerExit* e) const {
  const std::vector<std::string> dirs = cgroupDirs(e->id);
  const CgroupLayout layout = cgroupLayout();
  const std::string& memDir = dirs.back();
  const std::int64_t kills = layout.v2 ? keyedValue(readSmall(memDir + "/memory.events"), "oom_kill")
                                       : keyedValue(readSmall(memDir + "/memory.oom_control"), "oom_kill");
  if (kills <= 0) return;
  e->out_of_memory = true;
  auto limit = memory_.find(e->id);
  const std::string peak = readSmall(memDir + (layout.v2 ? "/memory.peak" : "/memory.max_usage_in_bytes"));
  e->how = fmt::format("ran out of memory: needs more than its container's {} limit ({}killed by the kernel; raise "
                       "cluster.memory_limit or plan with more memory per worker)",
                       limit == memory_.end() ? std::string("memory") : formatBytes(limit->second),
                       peak.empty() ? "" : fmt::format("it reached {}, ", formatBytes(std::atof(peak.c_str()))));
}

// NOTE [Memory stalls]
// A worker at its memory limit is not always killed: measured here, a VGG-11
// stage right-sized at 1 GB stalled for over 10 s reclaiming pages (libtorch's
// own code among them) and fell silent instead.
std::string ContainerLauncher::diagnose(int id) const {
  auto limit = memory_.find(id);
  if (limit == memory_.end()) return "";
  const CgroupLayout layout = cgroupLayout();
  const std::string memDir = cgroupDirs(id).back();
  const double used = std::atof(readSmall(memDir + (layout.v2 ? "/memory.current" : "/memory.usage_in_bytes")).c_str());
  if (used < 0.95 * limit->second) return "";
  return fmt::format("its container is at its memory limit ({} of {}), so it is most likely stalled reclaiming "
                     "memory: raise cluster.memory_limit (--memory-limit) or plan with more memory per worker",
                     formatBytes(used), formatBytes(limit->second));
}

WorkerHandle ContainerLauncher::handle(int id) const {
  WorkerHandle h = processes_.handle(id);
  const CgroupLayout layout = cgroupLayout();
  h.cgroup_v2 = layout.v2;
  h.quota_file = cgroupDirs(id).front() + (layout.v2 ? "/cpu.max" : "/cpu.cfs_quota_us");
  auto it = cpus_.find(id);
  h.cpus = it == cpus_.end() ? 0 : it->second;
  return h;
}

void ContainerLauncher::removeWorker(int id) {
  const std::string ns = netns(id);
  if (exists("/run/netns/" + ns)) {
    if (auto r = runCommand({"ip", "netns", "delete", ns}); !r.ok()) spdlog::warn("{}", r.status().message());
  }
  for (const auto& d : cgroupDirs(id)) removeCgroup(d);
  workers_.erase(id);
  memory_.erase(id);
  cpus_.erase(id);
  (void)saveRecord();
}

std::vector<WorkerExit> ContainerLauncher::poll() {
  std::vector<WorkerExit> out = processes_.poll();
  for (WorkerExit& e : out) {
    explainExit(&e);
    removeWorker(e.id);
  }
  return out;
}

std::vector<WorkerExit> ContainerLauncher::stopAll(Seconds grace) {
  std::vector<WorkerExit> out = processes_.stopAll(grace);
  for (WorkerExit& e : out) {
    explainExit(&e);
    removeWorker(e.id);
  }
  return out;
}

}  // namespace hydrozoa::cluster
