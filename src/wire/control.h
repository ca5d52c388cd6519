// The control plane between the coordinator and its workers (docs/train.md, "What happens"):
// ZeroMQ ROUTER (coordinator) and DEALER (workers) sockets carrying JSON
// objects, each with a "type" and the job's "token".
//
// A message with a missing or wrong token is refused: not delivered, logged
// with its sender, and counted. Workers likewise drop messages that do not
// carry the token they were started with.
//
// NOTE [Connections authenticate first]
// The coordinator's socket is a ZeroMQ CURVE server with a key pair of its
// own, made when it binds. A worker joins with a credential, "TOKEN.KEY"
// ($HYDROZOA_TOKEN, never argv): its generation's token and the server's
// public key. Its CURVE key pair is derived from the token (BLAKE2b, then
// Curve25519), so one secret per generation, handed over as the token always
// was, is both its password inside messages and its key in the handshake.
// The server's ZAP handler accepts a client key only when it is derived
// from the current or the admitted generation's token. A peer without one
// never completes the handshake: ZeroMQ reads none of its messages, it gets
// no routing id (so it cannot claim one that the socket will later give
// another peer, which made libzmq abort the coordinator), and a handshake
// not finished within 5 s is dropped. Every client names its connection
// itself (a random routing id), so the socket never makes one up. A refused
// handshake is counted and logged, at most once per reason every 10 s.
//
// NOTE [Routes are bound by the token]
// A worker's socket has no identity of its own choosing: ZeroMQ gives each
// connection an unguessable routing id, and the worker names itself ("w3")
// in a "sender" field of every message. The coordinator binds the name to the
// connection a message came from only when that message carries the token,
// and sends only along bound connections. So a peer that connects with a
// worker's name (or any identity) and no token receives nothing — in
// particular never the token, which every coordinator message carries — and
// cannot take a worker's route over; its messages are refused and counted.
// A new generation's worker binds its name to its own new connection with
// the new token, which is how a route moves away from a connection that is
// cut but not yet seen to be gone.
//
// Sizes: frames past kMaxWorkerMessage (to the coordinator) or
// kMaxCoordinatorMessage (to a worker) are dropped by ZeroMQ before they are
// allocated in full or parsed (ZMQ_MAXMSGSIZE), so an unauthenticated peer
// cannot make either side hold or parse an arbitrary frame.
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

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/secret.h"
#include "core/status.h"
#include "wire/store.h"

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace hydrozoa::wire {

using hydrozoa::newToken;  // core/secret.h

// The address of this host on the route to `target` ("tcp://10.0.0.5:4000",
// "10.0.0.5" or a name): what a worker on a machine the coordinator did not
// know before it started listens on for its data connections, and what a
// coordinator on a cluster tells its workers to reach it at. No packet is
// sent (a UDP socket's connect only picks the route).
Result<std::string> localAddressToward(const std::string& target);

// The largest legitimate messages, with room to spare: a worker's reports
// are a few hundred bytes; an assignment carries the resolved job spec.
constexpr std::int64_t kMaxWorkerMessage = 64 * 1024;
constexpr std::int64_t kMaxCoordinatorMessage = 4 * 1024 * 1024;

// Checks the fields a worker's message may carry (NOTE [Routes are bound by
// the token] authenticates the sender; this checks what it sent): "type" a
// string, counts (step, epoch, stage, ...) whole numbers from 0 to 2^40,
// figures (loss, seconds, ...) finite numbers, "can_save" an array of
// counts, "message"/"kind"/"file"/"data" strings (wire/file_transfer.h
// checks the last two further). The error names the field, what it got
// and what was expected; unknown fields are allowed (newer workers).
Status checkWorkerMessage(const Json& message);

class ThrottledWarnings;  // control.cc

class ControlServer {
 public:
  // Binds to tcp://host:port; port 0 picks a free one. A port in use is an
  // unavailable() status that says so.
  static Result<std::unique_ptr<ControlServer>> bind(const std::string& host, int port, std::string token);
  ~ControlServer();

  std::string endpoint() const { return endpoint_; }  // "tcp://127.0.0.1:41234"
  // What a client of the generation with `token` joins with: "TOKEN.KEY"
  // (NOTE [Connections authenticate first]).
  std::string credential(const std::string& token) const;
  // The next accepted message, within `timeoutMs`; false on timeout.
  // `from` is the worker's name ("w3") from an authenticated message.
  bool receive(std::string* from, Json* message, int timeoutMs);
  // Sends to the connection that last sent an authenticated message as `to`;
  // dropped (and false) when no such connection exists yet.
  bool send(const std::string& to, Json message);
  // Messages refused on authenticated connections (a wrong or old token, a bad sender name).
  std::int64_t refused() const { return refused_; }
  // Handshakes refused (a client key of no generation admitted, or no CURVE
  // at all), counted as receive() comes to them (thread-safe); a refused
  // peer's ZeroMQ tries again every 100 ms, each try counted.
  std::int64_t refusedConnections() const { return refusedConnections_; }
  // A new generation of workers: messages carry `token` from now on, and
  // the earlier generations' tokens are refused (and named so in the log).
  void newGeneration(std::string token);
  // Workers of the next generation, started ahead of it, present `token`:
  // their messages are accepted too until newGeneration(token).
  void admit(std::string token);

 private:
  class Gate;  // the ZAP handler (control.cc)
  ControlServer() = default;
  // Reads the socket's monitor: handshakes that failed before ZAP (no CURVE).
  void drainMonitor();
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<Gate> gate_;
  std::unique_ptr<zmq::socket_t> socket_, monitor_;
  std::string endpoint_, token_, next_, publicKey_;
  std::vector<std::string> retired_;  // earlier generations' tokens
  std::map<std::string, std::string> routes_;  // worker name -> routing id (NOTE above)
  std::int64_t refused_ = 0;
  std::atomic<std::int64_t> refusedConnections_{0};
  std::unique_ptr<ThrottledWarnings> warnings_;
};

class ControlClient {
 public:
  // `name` ("w3") is sent in every message (NOTE [Routes are bound by the
  // token]); `credential` is ControlServer::credential()'s "TOKEN.KEY".
  static Result<std::unique_ptr<ControlClient>> connect(const std::string& endpoint, const std::string& name,
                                                        const std::string& credential);
  ~ControlClient();

  // Thread-safe; a receive() under way on another thread returns to let it
  // through (NOTE [Senders before a receive loop]).
  void send(Json message);
  // The next message with the token within `timeoutMs`; false on timeout,
  // and at once (false) when another thread calls wake() or send().
  bool receive(Json* message, int timeoutMs);
  // Ends a receive() under way, or the next one, early: for a thread that
  // has something to send (thread-safe).
  void wake();
  // Seconds since this client last had a live connection to the server (0
  // while it has one; from connect() until the first handshake). ZMTP
  // heartbeats end a connection to a server gone silent within about 10 s,
  // a dead server's at once; updated by receive() (thread-safe).
  double secondsWithoutServer() const;

 private:
  ControlClient() = default;
  void drainMonitor();  // under mu_
  std::atomic<bool> connected_{false};
  std::atomic<std::int64_t> lostAtNs_{0};  // steady clock, when the connection went (or connect())
  std::mutex mu_;
  std::atomic<int> senders_{0};        // send()s waiting for mu_
  std::atomic<bool> receiving_{false};  // a receive() holds mu_
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<zmq::socket_t> socket_, monitor_;  // closed before the context (declared after it)
  std::string token_, name_;
  int wakeFd_ = -1;  // an eventfd that receive() polls beside the socket
};

// The store's part of an event loop on `server` (wire/store.h): answers the
// waits that have timed out and, when `message` (from `from`; null after a
// receive that timed out) is a store request, serves it and returns true.
bool serveStore(ControlServer& server, StoreService& store, const std::string& from, const Json* message);

}  // namespace hydrozoa::wire
