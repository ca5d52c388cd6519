#include "cluster/launch/command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster/launch/launcher.h"

extern char** environ;

namespace hydrozoa::cluster {

Result<std::string> runCommand(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return ioError(fmt::format("cannot run {}: {}", line, std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (auto& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    return unavailable(fmt::format("cannot run {}: {}", argv[0], std::strerror(rc)));
  }
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out[0], buf, sizeof(buf));
    if (n > 0) {
      text.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(out[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return unavailable(fmt::format("`{}` {}: {}", line, describeWaitStatus(st), text));
  }
  return text;
}

}  // namespace hydrozoa::cluster
