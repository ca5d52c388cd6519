#include "runtime/comm/redis/redis_server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "core/process.h"
#include "core/secret.h"

namespace hydrozoa::runtime::redis {

Result<int> freePort(const std::string& host) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ioError(fmt::format("cannot open a socket: {}", std::strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    ::close(fd);
    return invalidArgument(fmt::format("the Redis channel's address \"{}\" is not an IPv4 address", host));
  }
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return unavailable(fmt::format("cannot bind a port on {}: {}", host, why));
  }
  ::close(fd);
  return static_cast<int>(ntohs(a.sin_port));
}

Result<std::unique_ptr<LocalServer>> LocalServer::start(const ServerOptions& o) {
  HZ_CHECK_MSG(!o.password.empty(), "a local Redis channel without a password");
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  if (ec) return ioError(fmt::format("cannot create {}: {}", o.dir, ec.message()));
  const std::string conf = o.dir + "/redis.conf", log = o.dir + "/redis.log";
  // Its passwords are in the config: gone once the server has read it, or failed.
  struct Unlink {
    const std::string& path;
    ~Unlink() { ::unlink(path.c_str()); }
  } unlinkConf{conf};
  std::string users = fmt::format("requirepass {}\n", o.password);
  std::string admin;
  if (!o.commands.empty()) {
    admin = newToken() + newToken();
    users = fmt::format("user default on >{} ~* resetchannels -@all +ping", o.password);
    for (const std::string& c : o.commands) users += " +" + c;
    users += fmt::format("\nuser admin on >{} ~* &* +@all\n", admin);
  }
  std::string lastError;
  for (int attempt = 0; attempt < 5; ++attempt) {
    HZ_ASSIGN_OR_RETURN(const int port, freePort(o.bind));
    {
      const int fd = ::open(conf.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0) return ioError(fmt::format("cannot write {}: {}", conf, std::strerror(errno)));
      const std::string text = fmt::format(
          "bind {}\nport {}\n{}protected-mode yes\nsave \"\"\nappendonly no\n"
          "maxmemory {}\nmaxmemory-policy noeviction\nproto-max-bulk-len 512mb\n"
          "dir \"{}\"\nlogfile \"{}\"\ndaemonize no\n",
          o.bind, port, users, o.maxmemory, o.dir, log);
      const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
      ::close(fd);
      if (!written) return ioError(fmt::format("cannot write {}", conf));
    }
    HZ_ASSIGN_OR_RETURN(const pid_t pid, spawnOwned({"redis-server", conf}, log));
    auto server = std::unique_ptr<LocalServer>(new LocalServer());
    server->pid_ = pid;
    server->password_ = o.password;
    server->adminPassword_ = admin;
    server->address_.host = o.bind;
    server->address_.port = port;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.start_timeout);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        server->pid_ = -1;
        lastError = WIFEXITED(status) && WEXITSTATUS(status) == 127
                        ? "redis-server is not installed (scripts/setup installs it: apt-get install redis-server)"
                        : fmt::format("redis-server exited at start (its log: {})", log);
        break;
      }
      if (Connection::open(server->address_, o.password, 1).ok()) return server;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (server->pid_ > 0) lastError = fmt::format("redis-server did not answer within {} s (its log: {})", o.start_timeout, log);
    if (lastError.find("not installed") != std::string::npos) break;
  }
  return unavailable("cannot start the job's Redis channel: " + lastError);
}

void LocalServer::stop() { stopOwned(&pid_); }

LocalServer::~LocalServer() { stop(); }

}  // namespace hydrozoa::runtime::redis
