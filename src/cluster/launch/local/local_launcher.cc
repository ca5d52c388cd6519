#include "cluster/launch/local/local_launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/environment.h"

namespace hydrozoa::cluster {

std::string describeWaitStatus(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return fmt::format("killed by signal {} (SIG{}){}", sig, name ? name : "?",
                       sig == SIGKILL ? ", e.g. kill -9 or the out-of-memory killer" : "");
  }
  return fmt::format("ended with wait status {}", status);
}

LocalLauncher::LocalLauncher(std::string executable) : executable_(std::move(executable)) {}

LocalLauncher::~LocalLauncher() { stopAll(2.0); }

Status LocalLauncher::launchIn(const WorkerLaunch& w, const ProcessPlacement& placement) {
  // Prepare everything that allocates before fork().
  std::vector<std::string> args = {w.process_name.empty() ? executable_ : w.process_name};
  args.insert(args.end(), w.args.begin(), w.args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> envStrings = environmentWith(w.env);
  std::vector<char*> envp;
  for (auto& e : envStrings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int log = ::open(w.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0) return ioError(fmt::format("{}: cannot create the worker's log: {}", w.log_path, std::strerror(errno)));
  int netns = -1;
  if (!placement.netns_path.empty()) {
    netns = ::open(placement.netns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (netns < 0) {
      ::close(log);
      return ioError(fmt::format("worker {}: cannot open its network namespace {}: {}", w.id, placement.netns_path,
                                 std::strerror(errno)));
    }
  }
  const timespec delay{static_cast<time_t>(w.start_delay),
                       static_cast<long>((w.start_delay - static_cast<double>(static_cast<time_t>(w.start_delay))) * 1e9)};
  int errPipe[2];
  if (::pipe2(errPipe, O_CLOEXEC) != 0) {
    if (netns >= 0) ::close(netns);
    ::close(log);
    return ioError(fmt::format("cannot start worker {}: {}", w.id, std::strerror(errno)));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    if (netns >= 0) ::close(netns);
    ::close(log);
    ::close(errPipe[0]);
    ::close(errPipe[1]);
    return unavailable(fmt::format("cannot start worker {}: fork failed: {}", w.id, std::strerror(errno)));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::setsid();
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(125);  // the coordinator is already gone
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    // Into the container's cgroups and network, then wait as it would start.
    char pidText[24];
    int n = 0;
    for (pid_t v = ::getpid(); v > 0; v /= 10) pidText[n++] = static_cast<char>('0' + v % 10);
    for (int i = 0; i < n / 2; ++i) std::swap(pidText[i], pidText[n - 1 - i]);
    for (const std::string& file : placement.cgroup_procs) {
      const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || ::write(fd, pidText, static_cast<std::size_t>(n)) != n) {
        const int err = errno;
        (void)!::write(errPipe[1], &err, sizeof(err));
        ::_exit(126);
      }
      ::close(fd);
    }
    if (netns >= 0 && ::setns(netns, CLONE_NEWNET) != 0) {
      const int err = errno;
      (void)!::write(errPipe[1], &err, sizeof(err));
      ::_exit(126);
    }
    if (delay.tv_sec > 0 || delay.tv_nsec > 0) {
      // In its container: let the launcher go on (a failing exec after the
      // delay shows as exit status 127).
      const int ok = 0;
      (void)!::write(errPipe[1], &ok, sizeof(ok));
      timespec left = delay;
      while (::nanosleep(&left, &left) != 0 && errno == EINTR) {
      }
    }
    ::execve(executable_.c_str(), argv.data(), envp.data());
    const int err = errno;
    (void)!::write(errPipe[1], &err, sizeof(err));
    ::_exit(127);
  }
  ::close(log);
  if (netns >= 0) ::close(netns);
  ::close(errPipe[1]);
  int childErr = 0;
  const ssize_t n = ::read(errPipe[0], &childErr, sizeof(childErr));  // EOF on a successful exec
  ::close(errPipe[0]);
  if (n == sizeof(childErr) && childErr != 0) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 126) {
      return unavailable(fmt::format("worker {} could not start: cannot enter its container (cgroup or network "
                                     "namespace): {}", w.id, std::strerror(childErr)));
    }
    return unavailable(fmt::format("worker {} could not start: cannot run {}: {}", w.id, executable_,
                                   std::strerror(childErr)));
  }
  live_[w.id] = pid;
  return Status();
}

std::vector<WorkerExit> LocalLauncher::poll() {
  std::vector<WorkerExit> out;
  for (auto it = live_.begin(); it != live_.end();) {
    int st = 0;
    const pid_t r = ::waitpid(it->second, &st, WNOHANG);
    if (r == it->second) {
      out.push_back({it->first, it->second, WIFEXITED(st) && WEXITSTATUS(st) == 0, describeWaitStatus(st)});
      out.back().killed = WIFSIGNALED(st);
      it = live_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

bool LocalLauncher::alive(int id) const { return live_.count(id) > 0; }

void LocalLauncher::signal(int id, bool force) {
  if (auto it = live_.find(id); it != live_.end()) ::kill(it->second, force ? SIGKILL : SIGTERM);
}

std::vector<WorkerExit> LocalLauncher::stopAll(Seconds grace) {
  std::vector<WorkerExit> out = poll();
  for (const auto& [id, pid] : live_) ::kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace);
  while (!live_.empty() && std::chrono::steady_clock::now() < deadline) {
    for (auto& e : poll()) out.push_back(e);
    if (!live_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (const auto& [id, pid] : live_) ::kill(pid, SIGKILL);
  for (const auto& [id, pid] : live_) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    out.push_back({id, pid, false, describeWaitStatus(st)});
    out.back().killed = WIFSIGNALED(st);
  }
  live_.clear();
  return out;
}

}  // namespace hydrozoa::cluster
