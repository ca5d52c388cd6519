// A redis-server of the job's own (`--launcher function` without
// --channel, and the tests): started on a free port of `bind`, with a
// generated password written only into its 0600 config file (never on a
// command line, where other users' ps would see it), no persistence, and
// "noeviction" (a key evicted mid-step would be a message lost: with
// noeviction a full store refuses the write instead, which the writer
// reports). It ends with its owner: stop(), the destructor, or the owner's
// death (PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "runtime/comm/redis/redis_client.h"

namespace hydrozoa::runtime::redis {

struct ServerOptions {
  std::string dir;                 // its config and log go here (created)
  std::string bind = "127.0.0.1";  // the address it listens on
  std::string password;            // required (wire::newToken())
  Bytes maxmemory = 0;             // 0: unlimited
  Seconds start_timeout = 20;
  // Non-empty: the only commands `password` may run (Redis ACL, the
  // "default" user); every other command (CONFIG SET, FLUSHALL, MODULE,
  // EVAL, ...) is refused with NOPERM. An "admin" user with a password of
  // its own (admin_password()) may run everything. Empty: one password for
  // everything.
  std::vector<std::string> commands;
};

// A port of `host` (IPv4) nothing listens on now: the kernel's pick,
// released at once (whoever loses the race to it fails to bind and retries).
Result<int> freePort(const std::string& host);

class LocalServer {
 public:
  static Result<std::unique_ptr<LocalServer>> start(const ServerOptions& options);
  ~LocalServer();
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;

  const Address& address() const { return address_; }
  const std::string& password() const { return password_; }
  // The "admin" user's, when ServerOptions::commands restricts the default user ("" otherwise).
  const std::string& adminPassword() const { return adminPassword_; }
  pid_t pid() const { return pid_; }
  // SIGTERM, then SIGKILL after 5 s; idempotent.
  void stop();

 private:
  LocalServer() = default;
  Address address_;
  std::string password_, adminPassword_;
  pid_t pid_ = -1;
};

}  // namespace hydrozoa::runtime::redis
