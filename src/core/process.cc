#include "core/process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace hydrozoa {

Result<pid_t> spawnOwned(const std::vector<std::string>& argv, const std::string& logPath) {
  HZ_CHECK(!argv.empty());
  // Everything that allocates, before fork().
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return unavailable(fmt::format("cannot start {}: fork failed: {}", argv[0], std::strerror(errno)));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    ::setpgid(0, 0);
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (in >= 0) ::dup2(in, 0);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

Result<pid_t> spawnPiped(const std::vector<std::string>& argv, const std::string& logPath, int* toChild,
                         int* fromChild) {
  HZ_CHECK(!argv.empty());
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return unavailable(fmt::format("cannot start {}: {}", argv[0], std::strerror(errno)));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return unavailable(fmt::format("cannot start {}: {}", argv[0], std::strerror(errno)));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
    return unavailable(fmt::format("cannot start {}: fork failed: {}", argv[0], std::strerror(errno)));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    const int log = ::open(logPath.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    if (log >= 0) ::dup2(log, 2);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  *toChild = in[1];
  *fromChild = out[0];
  return pid;
}

void stopOwned(pid_t* pid, Seconds grace) {
  if (*pid <= 0) return;
  ::kill(*pid, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace);
  while (std::chrono::steady_clock::now() < until) {
    if (::waitpid(*pid, nullptr, WNOHANG) == *pid) {
      *pid = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(*pid, SIGKILL);
  ::waitpid(*pid, nullptr, 0);
  *pid = -1;
}

}  // namespace hydrozoa
