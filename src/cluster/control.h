// The control plane between the coordinator and its workers (DESIGN §5):
// ZeroMQ ROUTER (coordinator) and DEALER (workers) sockets carrying JSON
// objects, each with a "type" and the job's "token".
//
// A message with a missing or wrong token is refused: not delivered, logged
// with its sender, and counted. Workers likewise drop messages that do not
// carry the token they were started with.
//
// Messages (fields beyond type and token):
//   worker -> coordinator   register {worker, pid}; ready; heartbeat {step};
//                           step {step, epoch, compute_s, ...};
//                           eval {epoch, loss_sum, correct, count};
//                           checkpoint {step, dir}; done; error {kind, message}
//   coordinator -> worker   assign {...the worker's role and the job...};
//                           go; checkpoint {step}; stop {reason}
//
// Thread-safety: ControlClient's send/receive are serialised by a mutex (a
// worker's heartbeat thread shares the socket); ControlServer is used by the
// coordinator's single thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace hydrozoa::cluster {

// 32 hex digits from the OS's randomness.
std::string newToken();

class ControlServer {
 public:
  // Binds to tcp://host:port; port 0 picks a free one. A port in use is an
  // unavailable() status that says so.
  static Result<std::unique_ptr<ControlServer>> bind(const std::string& host, int port, std::string token);
  ~ControlServer();

  std::string endpoint() const { return endpoint_; }  // "tcp://127.0.0.1:41234"
  // The next accepted message, within `timeoutMs`; false on timeout.
  bool receive(std::string* from, Json* message, int timeoutMs);
  void send(const std::string& to, Json message);
  int refused() const { return refused_; }
  // A new generation of workers: messages carry `token` from now on, and
  // the earlier generations' tokens are refused (and named so in the log).
  void newGeneration(std::string token);
  // Workers of the next generation, started ahead of it, present `token`:
  // their messages are accepted too until newGeneration(token).
  void admit(std::string token) { next_ = std::move(token); }

 private:
  ControlServer() = default;
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::string endpoint_, token_, next_;
  std::vector<std::string> retired_;  // earlier generations' tokens
  int refused_ = 0;
};

class ControlClient {
 public:
  static Result<std::unique_ptr<ControlClient>> connect(const std::string& endpoint, const std::string& identity,
                                                        std::string token);
  ~ControlClient();

  void send(Json message);
  bool receive(Json* message, int timeoutMs);

 private:
  ControlClient() = default;
  std::mutex mu_;
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::string token_;
};

}  // namespace hydrozoa::cluster
