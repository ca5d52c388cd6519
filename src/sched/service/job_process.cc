#include "sched/service/job_process.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace hydrozoa::sched {

namespace {

// A process that exists and is not a zombie.
bool live(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content;
  std::getline(stat, content);
  const auto close = content.rfind(')');
  return close != std::string::npos && close + 2 < content.size() && content[close + 2] != 'Z';
}

}  // namespace

bool processRuns(pid_t pid, const std::string& marker) {
  if (pid <= 0 || !live(pid)) return false;
  std::ifstream cmd("/proc/" + std::to_string(pid) + "/cmdline");
  const std::string args((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
  return args.find(marker) != std::string::npos;
}

Result<JobProcess> JobProcess::spawn(const std::vector<std::string>& argv, const std::string& cwd,
                                     const std::string& log, const std::string& events) {
  JobProcess p;
  p.events_ = events;
  struct stat st{};
  if (::stat(events.c_str(), &st) == 0) p.offset_ = st.st_size;
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  // The scheduler's stops (SIGINT, SIGUSR2) are held, blocked, from the
  // fork until `hydrozoa train` has its handlers (it unblocks them then):
  // sent while it starts, they would end it at once, without a checkpoint
  // or a word.
  sigset_t held, before;
  sigemptyset(&held);
  sigaddset(&held, SIGINT);
  sigaddset(&held, SIGUSR2);
  ::pthread_sigmask(SIG_BLOCK, &held, &before);
  const pid_t pid = ::fork();
  if (pid != 0) ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (pid < 0) return ioError(fmt::format("cannot start {}: {}", argv[0], std::strerror(errno)));
  if (pid == 0) {
    ::setsid();  // its own session: it outlives a killed scheduler, a terminal's Ctrl-C does not reach it
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (in < 0 || out < 0 || ::chdir(cwd.c_str()) != 0) ::_exit(127);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    // Nothing else of the scheduler's: its listening socket, kept open by
    // a job that outlives it, would hold its port.
    ::close_range(3, ~0U, 0);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGUSR1, SIGUSR2}) ::signal(sig, SIG_DFL);
    ::sigprocmask(SIG_SETMASK, &held, nullptr);  // only the stops held
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  p.pid_ = pid;
  p.child_ = true;
  return p;
}

JobProcess JobProcess::attach(pid_t pid, const std::string& marker, const std::string& events, std::int64_t offset) {
  JobProcess p;
  p.events_ = events;
  p.offset_ = offset;
  p.pid_ = processRuns(pid, marker) ? pid : -1;
  return p;
}

bool JobProcess::running() {
  if (pid_ <= 0) return false;
  if (child_) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      pid_ = -1;
      return false;
    }
    return true;
  }
  if (!live(pid_)) pid_ = -1;
  return pid_ > 0;
}

void JobProcess::signal(int sig) const {
  if (pid_ > 0) ::kill(pid_, sig);
}

std::vector<Json> JobProcess::newEvents() {
  std::vector<Json> out;
  std::ifstream in(events_, std::ios::binary);
  if (!in) return out;
  in.seekg(offset_);
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // a line still being written: read it next time
    offset_ += static_cast<std::int64_t>(line.size()) + 1;
    if (line.empty()) continue;
    Json e = parseJsonOrDiscarded(line);
    if (e.is_object()) out.push_back(std::move(e));
  }
  return out;
}

}  // namespace hydrozoa::sched
