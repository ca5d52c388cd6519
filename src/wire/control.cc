#include "wire/control.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sodium.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <thread>
#include <zmq.hpp>

namespace hydrozoa::wire {

namespace {

// How long a closing socket may still deliver what it queued: the
// coordinator not at all (it must not hang on a dead worker); a worker up to
// 2 s, so its last "done" reaches the coordinator even on a loaded machine
// (with no linger, a worker that exited right after sending it was now and
// then taken for a worker that died).
void configure(zmq::socket_t& s, std::int64_t maxMessage, int lingerMs = 0) {
  s.set(zmq::sockopt::linger, lingerMs);
  s.set(zmq::sockopt::maxmsgsize, maxMessage);
}

// NOTE [Connections authenticate first] (control.h): a client's CURVE key
// pair from its generation's token. BLAKE2b keyed with a label turns the
// token into a Curve25519 secret key; its public key follows from it.
struct ClientKeys {
  std::array<unsigned char, crypto_scalarmult_BYTES> public_key{}, secret_key{};
};
ClientKeys clientKeys(std::string_view token) {
  static const bool ready = sodium_init() >= 0;
  HZ_CHECK_MSG(ready, "libsodium could not initialise");
  static constexpr std::string_view kLabel = "hydrozoa control client key v1";
  static_assert(kLabel.size() >= crypto_generichash_KEYBYTES_MIN);
  ClientKeys k;
  crypto_generichash(k.secret_key.data(), k.secret_key.size(), reinterpret_cast<const unsigned char*>(token.data()),
                     token.size(), reinterpret_cast<const unsigned char*>(kLabel.data()), kLabel.size());
  crypto_scalarmult_base(k.public_key.data(), k.secret_key.data());
  return k;
}
std::string publicKeyOf(std::string_view token) {
  const ClientKeys k = clientKeys(token);
  return std::string(k.public_key.begin(), k.public_key.end());
}

constexpr auto kWarnEvery = std::chrono::seconds(10);

}  // namespace

// Refusals as log lines, at most one per reason every kWarnEvery (a peer
// that sends millions of messages writes a line every 10 s, not millions);
// the lines held back are counted into the next. Reasons are this file's
// fixed texts, so the map stays small.
class ThrottledWarnings {
 public:
  void warn(const char* reason, const std::string& line) {
    Reason& r = reasons_[reason];
    const auto now = std::chrono::steady_clock::now();
    if (r.logged && now - r.last < kWarnEvery) {
      ++r.held;
      return;
    }
    if (r.held > 0) {
      spdlog::warn("{} (and {} more refused so in the last {} s)", line, r.held,
                   std::chrono::duration_cast<std::chrono::seconds>(now - r.last).count());
    } else {
      spdlog::warn("{}", line);
    }
    r = {now, 0, true};
  }

 private:
  struct Reason {
    std::chrono::steady_clock::time_point last;
    std::int64_t held = 0;
    bool logged = false;
  };
  std::map<std::string, Reason> reasons_;
};

namespace {

// `v` is the string `token`, compared in time that does not depend on where
// they differ (a peer learns nothing from how long a refusal takes).
bool sameToken(const Json& v, const std::string& token) {
  return v.is_string() && sameSecret(v.get_ref<const std::string&>(), token);
}

// A worker's name as the coordinator uses it: "w" and digits.
// "w3": a worker; "w3.store": its connection to the c10d Store (wire/store.h);
// "w3.flexrr" and "w3.inbox": its FlexRR connections to the store
// (runtime/comm/reassign.h).
bool validName(const Json& j) {
  if (!j.is_string()) return false;
  std::string s = j.get<std::string>();
  for (const std::string_view suffix : {".store", ".flexrr", ".inbox"}) {
    if (s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0) {
      s.resize(s.size() - suffix.size());
      break;
    }
  }
  return s.size() >= 2 && s.size() <= 12 && s[0] == 'w' && s.find_first_not_of("0123456789", 1) == std::string::npos;
}

// A monitor of `socket`'s `events` (zmq_socket_monitor), read by
// monitorEvents(); each context has one socket and one monitor, so one name.
Result<std::unique_ptr<zmq::socket_t>> watch(zmq::context_t& context, zmq::socket_t& socket, int events) {
  const char* endpoint = "inproc://control-monitor";
  if (zmq_socket_monitor(static_cast<void*>(socket), endpoint, events) != 0) {
    return unavailable(fmt::format("cannot watch the control connection: {}", zmq_strerror(zmq_errno())));
  }
  auto monitor = std::make_unique<zmq::socket_t>(context, zmq::socket_type::pair);
  monitor->set(zmq::sockopt::linger, 0);
  monitor->connect(endpoint);
  return monitor;
}

// The events a socket monitor (zmq_socket_monitor) holds now, without
// waiting: each is a frame of its kind and value, then one of the address.
std::vector<std::uint16_t> monitorEvents(zmq::socket_t& monitor) {
  std::vector<std::uint16_t> kinds;
  zmq::message_t event, address;
  while (monitor.recv(event, zmq::recv_flags::dontwait)) {
    if (monitor.get(zmq::sockopt::rcvmore)) (void)monitor.recv(address, zmq::recv_flags::none);
    if (event.size() < sizeof(std::uint16_t)) continue;
    std::uint16_t kind = 0;
    std::memcpy(&kind, event.data(), sizeof(kind));
    kinds.push_back(kind);
  }
  return kinds;
}

// zmq::poll, where a signal (Ctrl-C) ends the wait as "nothing yet" instead
// of throwing: the caller checks its flags and polls again.
int pollOnce(zmq::pollitem_t* items, int timeoutMs, int count = 1) {
  try {
    return zmq::poll(items, count, std::chrono::milliseconds(timeoutMs));
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return 0;
    throw;
  }
}

}  // namespace

Status checkWorkerMessage(const Json& m) {
  if (!m.is_object()) return invalidArgument("the message is not a JSON object");
  enum Kind { kText, kCount, kFigure, kFlag, kCounts };
  static const std::map<std::string, Kind> kFields = {
      {"type", kText},          {"kind", kText},        {"message", kText},      {"step", kCount},
      {"epoch", kCount},        {"stage", kCount},      {"worker", kCount},      {"pid", kCount},
      {"completed", kCount},    {"peak_memory", kCount}, {"loss", kFigure},      {"samples", kFigure},
      {"compute_s", kFigure},   {"wait_s", kFigure},    {"allreduce_s", kFigure}, {"iteration_s", kFigure},
      {"loss_sum", kFigure},    {"correct", kFigure},   {"count", kFigure},      {"stopped", kFlag},
      {"can_save", kCounts},    {"file", kText},        {"data", kText},         {"offset", kCount},
      {"size", kCount},         {"skipped", kFlag},     {"loss_scale", kFigure},  {"at_step", kCount},
      {"begun", kCount},        {"tensor_peak", kCount}, {"reassigned", kCount},  {"bytes", kCount}};
  auto isCount = [](const Json& v) {
    if (v.is_number_unsigned()) return v.get<std::uint64_t>() <= (std::uint64_t{1} << 40);
    return v.is_number_integer() && v.get<std::int64_t>() >= 0 && v.get<std::int64_t>() <= (std::int64_t{1} << 40);
  };
  if (!m.contains("type") || !m["type"].is_string()) return invalidArgument("field \"type\": missing or not a string");
  for (const auto& item : m.items()) {
    const auto known = kFields.find(item.key());
    if (known == kFields.end()) continue;
    const Json& v = item.value();
    const char* expected = nullptr;
    switch (known->second) {
      case kText:
        if (!v.is_string()) expected = "a string";
        break;
      case kCount:
        if (!isCount(v)) expected = "a whole number from 0 to 2^40";
        break;
      case kFigure:
        if (!v.is_number() || !std::isfinite(v.get<double>())) expected = "a finite number";
        break;
      case kFlag:
        if (!v.is_boolean()) expected = "true or false";
        break;
      case kCounts:
        if (!v.is_array() || v.size() > 4096 || !std::all_of(v.begin(), v.end(), isCount)) {
          expected = "an array of at most 4096 whole numbers";
        }
        break;
    }
    if (expected) {
      return invalidArgument(fmt::format("field \"{}\" of a \"{}\" message is {}, expected {}", item.key(),
                                         m["type"].get<std::string>().substr(0, 40), describeJson(v), expected));
    }
  }
  return Status();
}

// The socket's ZAP handler (RFC 27), on a thread of its own: ZeroMQ asks it
// about each CURVE handshake, and it admits the client keys of the current
// and the admitted generation (NOTE [Connections authenticate first]).
class ControlServer::Gate {
 public:
  explicit Gate(zmq::context_t& context) : socket_(context, zmq::socket_type::rep) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("inproc://zeromq.zap.01");  // where ZeroMQ looks for the handler
    thread_ = std::thread([this] { run(); });
  }
  ~Gate() {
    stop_ = true;
    thread_.join();
  }
  // The keys of `tokens` admitted from now on; `retired`'s named as such when refused.
  void admit(const std::vector<std::string>& tokens, const std::vector<std::string>& retired) {
    std::set<std::string> keys, old;
    for (const auto& t : tokens) {
      if (!t.empty()) keys.insert(publicKeyOf(t));
    }
    for (const auto& t : retired) old.insert(publicKeyOf(t));
    std::lock_guard<std::mutex> lock(mu_);
    admitted_ = std::move(keys);
    retired_ = std::move(old);
  }

 private:
  void run() {
    zmq::pollitem_t item{static_cast<void*>(socket_), 0, ZMQ_POLLIN, 0};
    while (!stop_) {
      if (pollOnce(&item, 100) <= 0) continue;
      std::vector<std::string> frames;
      zmq::message_t frame;
      do {
        if (!socket_.recv(frame, zmq::recv_flags::none)) break;
        if (frames.size() < 16) frames.push_back(frame.to_string());
      } while (socket_.get(zmq::sockopt::rcvmore));
      // version, request id, domain, address, routing id, mechanism, credentials...
      const bool curve = frames.size() >= 7 && frames[0] == "1.0" && frames[5] == "CURVE";
      const char* refusal = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!curve) {
          refusal = "not a CURVE handshake";
        } else if (retired_.count(frames[6])) {
          refusal = "the credential of an earlier generation of this job's workers";
        } else if (!admitted_.count(frames[6])) {
          refusal = "a key of no generation of this job's workers";
        }
      }
      if (refusal) {
        warnings_.warn(refusal, fmt::format("refused a connection to the control socket from {}: {}",
                                            printable(frames.size() > 3 ? frames[3] : "?"), refusal));
      }
      const std::string id = frames.size() > 1 ? frames[1] : "";
      const std::vector<std::string> reply = {"1.0", id, refusal ? "400" : "200", refusal ? refusal : "OK", "", ""};
      for (size_t i = 0; i < reply.size(); ++i) {
        socket_.send(zmq::buffer(reply[i]), i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
    }
  }

  zmq::socket_t socket_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::set<std::string> admitted_, retired_;  // client public keys, 32 bytes each
  ThrottledWarnings warnings_;
};

ControlServer::~ControlServer() = default;

Result<std::unique_ptr<ControlServer>> ControlServer::bind(const std::string& host, int port, std::string token) {
  if (!zmq_has("curve")) {
    return unavailable("this machine's libzmq has no CURVE security; install Debian's libzmq5 (built with libsodium)");
  }
  std::unique_ptr<ControlServer> s(new ControlServer());
  s->token_ = std::move(token);
  s->context_ = std::make_unique<zmq::context_t>(1);
  s->warnings_ = std::make_unique<ThrottledWarnings>();
  s->gate_ = std::make_unique<Gate>(*s->context_);
  s->gate_->admit({s->token_}, {});
  char publicKey[41] = {}, secretKey[41] = {};
  if (zmq_curve_keypair(publicKey, secretKey) != 0) {
    return unavailable(fmt::format("cannot make the control socket's CURVE keys: {}", zmq_strerror(zmq_errno())));
  }
  s->publicKey_ = publicKey;
  s->socket_ = std::make_unique<zmq::socket_t>(*s->context_, zmq::socket_type::router);
  configure(*s->socket_, kMaxWorkerMessage);
  s->socket_->set(zmq::sockopt::curve_server, 1);
  s->socket_->set(zmq::sockopt::curve_secretkey, std::string(secretKey));
  sodium_memzero(secretKey, sizeof(secretKey));
  s->socket_->set(zmq::sockopt::zap_domain, "hydrozoa-control");
  // A handshake not done in 5 s is dropped (a peer trickling bytes holds
  // nothing for long); ZMTP heartbeats drop connections gone silent.
  s->socket_->set(zmq::sockopt::handshake_ivl, 5000);
  s->socket_->set(zmq::sockopt::heartbeat_ivl, 2000);
  s->socket_->set(zmq::sockopt::heartbeat_timeout, 10000);
  s->socket_->set(zmq::sockopt::router_mandatory, 0);
  // No handover: a connection never takes over another's routing id (NOTE
  // [Routes are bound by the token] in control.h says how routes move).
  s->socket_->set(zmq::sockopt::router_handover, 0);
  const std::string address = port == 0 ? fmt::format("tcp://{}:*", host) : fmt::format("tcp://{}:{}", host, port);
  try {
    s->socket_->bind(address);
  } catch (const zmq::error_t& e) {
    if (e.num() == EADDRINUSE) {
      return unavailable(fmt::format("cluster.control_port {} is in use (another job?); choose another port, or 0 for "
                                     "any free port",
                                     port));
    }
    return unavailable(fmt::format("cannot listen for workers on {}: {}", address, e.what()));
  }
  s->endpoint_ = s->socket_->get(zmq::sockopt::last_endpoint);
  // Handshakes that fail, counted: refusedConnections().
  HZ_ASSIGN_OR_RETURN(s->monitor_, watch(*s->context_, *s->socket_,
                                         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                             ZMQ_EVENT_HANDSHAKE_FAILED_AUTH));
  return s;
}

std::string ControlServer::credential(const std::string& token) const { return token + "." + publicKey_; }

void ControlServer::admit(std::string token) {
  next_ = std::move(token);
  gate_->admit({token_, next_}, retired_);
}

void ControlServer::drainMonitor() {
  for (const std::uint16_t kind : monitorEvents(*monitor_)) {
    ++refusedConnections_;
    // ZAP's refusals are logged by the Gate with their reason; the rest here.
    if (kind != ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      warnings_->warn("no handshake", "refused a connection to the control socket: it did not complete a CURVE "
                                     "handshake with this job's credential");
    }
  }
}


bool ControlServer::receive(std::string* from, Json* message, int timeoutMs) {
  drainMonitor();
  zmq::pollitem_t item{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0};
  for (;;) {
    if (pollOnce(&item, timeoutMs) <= 0) return false;
    zmq::message_t id, body;
    if (!socket_->recv(id, zmq::recv_flags::none)) return false;
    while (socket_->get(zmq::sockopt::rcvmore)) {  // keep the last frame as the body
      if (!socket_->recv(body, zmq::recv_flags::none)) return false;
    }
    const std::string route = id.to_string();
    Json j = parseJsonOrDiscarded(body.to_string());
    const bool hasToken = j.is_object() && j.contains("token") && j["token"].is_string();
    const bool current = hasToken && (sameToken(j["token"], token_) || sameToken(j["token"], next_));
    const std::string claimed = j.is_object() && j.contains("sender") && j["sender"].is_string()
                                    ? j["sender"].get<std::string>()
                                    : "";
    // Names for the log: what the peer claims, else its routing id in hex.
    auto who = [&] {
      if (!claimed.empty()) return fmt::format("\"{}\"", printable(claimed));
      std::string hex;
      for (unsigned char c : route.substr(0, 16)) hex += fmt::format("{:02x}", c);
      return fmt::format("connection {}", hex);
    };
    if (!current || !validName(j["sender"])) {
      ++refused_;
      const bool old = hasToken && std::find(retired_.begin(), retired_.end(), j["token"].get<std::string>()) !=
                                       retired_.end();
      const char* reason = old       ? "the token of an earlier generation of this job's workers"
                           : current ? "no valid sender name"
                           : hasToken ? "wrong job token"
                                      : "no job token";
      warnings_->warn(reason, fmt::format("refused a control message from {}: {}", who(), reason));
      timeoutMs = 0;  // look once more without waiting
      continue;
    }
    routes_[claimed] = route;  // authenticated: this connection is the worker's route now
    j.erase("token");
    j.erase("sender");
    *from = claimed;
    *message = std::move(j);
    return true;
  }
}

void ControlServer::newGeneration(std::string token) {
  retired_.push_back(std::move(token_));
  if (token == next_) next_.clear();
  token_ = std::move(token);
  gate_->admit({token_, next_}, retired_);
}

bool ControlServer::send(const std::string& to, Json message) {
  const auto route = routes_.find(to);
  if (route == routes_.end()) {
    spdlog::debug("no authenticated connection from {} yet: dropped a {} message", to, message.value("type", "?"));
    return false;
  }
  message["token"] = token_;
  const std::string body = message.dump();
  HZ_CHECK_MSG(static_cast<std::int64_t>(body.size()) <= kMaxCoordinatorMessage,
               fmt::format("a {} byte control message exceeds kMaxCoordinatorMessage", body.size()));
  socket_->send(zmq::buffer(route->second), zmq::send_flags::sndmore);
  socket_->send(zmq::buffer(body), zmq::send_flags::dontwait);
  return true;
}

ControlClient::~ControlClient() {
  if (wakeFd_ >= 0) ::close(wakeFd_);
}

Result<std::string> localAddressToward(const std::string& target) {
  std::string host = target;
  if (host.rfind("tcp://", 0) == 0) host = host.substr(6);
  if (const auto colon = host.rfind(':'); colon != std::string::npos) host = host.substr(0, colon);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), "9", &hints, &found); rc != 0 || !found) {
    return unavailable(fmt::format("cannot resolve {}: {}", host, ::gai_strerror(rc)));
  }
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  std::string error;
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  if (fd < 0 || ::connect(fd, found->ai_addr, found->ai_addrlen) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    error = std::strerror(errno);
  }
  ::freeaddrinfo(found);
  if (fd >= 0) ::close(fd);
  if (!error.empty()) return unavailable(fmt::format("no route from this host to {}: {}", host, error));
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
  return std::string(text);
}

Result<std::unique_ptr<ControlClient>> ControlClient::connect(const std::string& endpoint, const std::string& name,
                                                              const std::string& credential) {
  // "TOKEN.KEY": the token is hex; the key Z85 (40 characters, '.' among them).
  const size_t dot = credential.find('.');
  if (dot == std::string::npos || dot == 0 || credential.size() - dot - 1 != 40) {
    return invalidArgument("the control credential is not TOKEN.KEY (the job token and the coordinator's public key, "
                           "as $HYDROZOA_TOKEN holds them): was this worker started by the same hydrozoa?");
  }
  std::unique_ptr<ControlClient> c(new ControlClient());
  c->token_ = credential.substr(0, dot);
  c->name_ = name;
  c->context_ = std::make_unique<zmq::context_t>(1);
  c->socket_ = std::make_unique<zmq::socket_t>(*c->context_, zmq::socket_type::dealer);
  configure(*c->socket_, kMaxCoordinatorMessage, 2000);
  const ClientKeys keys = clientKeys(c->token_);
  c->socket_->set(zmq::sockopt::curve_serverkey, credential.substr(dot + 1));
  c->socket_->set(zmq::sockopt::curve_publickey, zmq::const_buffer(keys.public_key.data(), keys.public_key.size()));
  c->socket_->set(zmq::sockopt::curve_secretkey, zmq::const_buffer(keys.secret_key.data(), keys.secret_key.size()));
  // Its own routing id, unique per connection: the server's socket never makes one up.
  c->socket_->set(zmq::sockopt::routing_id, fmt::format("{}:{}", name.substr(0, 16), newToken().substr(0, 16)));
  c->socket_->set(zmq::sockopt::heartbeat_ivl, 2000);
  c->socket_->set(zmq::sockopt::heartbeat_timeout, 10000);
  // Whether the server is there: secondsWithoutServer().
  HZ_ASSIGN_OR_RETURN(c->monitor_,
                      watch(*c->context_, *c->socket_, ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED));
  c->lostAtNs_ = std::chrono::steady_clock::now().time_since_epoch().count();
  c->wakeFd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (c->wakeFd_ < 0) return ioError(fmt::format("eventfd: {}", std::strerror(errno)));
  try {
    c->socket_->connect(endpoint);
  } catch (const zmq::error_t& e) {
    return unavailable(fmt::format("cannot reach the coordinator at {}: {}", endpoint, e.what()));
  }
  return c;
}

// NOTE [Senders before a receive loop]
// A worker's control thread receives in a loop, holding the socket's lock
// through each poll of up to 50 ms and taking it again at once, while its
// compute thread sends a checkpoint's files directly, 24 KB a message. A
// mutex is not fair: the sender, woken when the lock is let go, mostly
// found it taken again, and a GPT stage's 1,600 messages took 40 to 90 s
// (bench/tensor_parallel_bench.sh). So a sender says it waits and wakes a
// receive under way, which returns; the next receive stands aside until
// no sender waits.
void ControlClient::send(Json message) {
  message["token"] = token_;
  message["sender"] = name_;
  const std::string body = message.dump();
  ++senders_;
  if (receiving_.load()) wake();
  std::lock_guard<std::mutex> lock(mu_);
  --senders_;
  socket_->send(zmq::buffer(body), zmq::send_flags::none);
}

void ControlClient::drainMonitor() {
  for (const std::uint16_t kind : monitorEvents(*monitor_)) {
    if (kind == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      connected_ = true;
    } else if (kind == ZMQ_EVENT_DISCONNECTED && connected_) {
      connected_ = false;
      lostAtNs_ = std::chrono::steady_clock::now().time_since_epoch().count();
    }
  }
}

double ControlClient::secondsWithoutServer() const {
  if (connected_) return 0;
  const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  return std::chrono::duration<double>(std::chrono::steady_clock::duration(now - lostAtNs_.load())).count();
}

void ControlClient::wake() {
  const std::uint64_t one = 1;
  (void)!::write(wakeFd_, &one, sizeof(one));
}

bool ControlClient::receive(Json* message, int timeoutMs) {
  while (senders_.load() > 0) std::this_thread::yield();
  std::lock_guard<std::mutex> lock(mu_);
  receiving_ = true;
  struct Done {
    std::atomic<bool>& flag;
    ~Done() { flag = false; }
  } done{receiving_};
  drainMonitor();
  // A sender that came after the wait above saw receiving_ false and did
  // not wake this poll: it goes first (it counted itself before looking).
  if (senders_.load() > 0) return false;
  zmq::pollitem_t items[2] = {{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0}, {nullptr, wakeFd_, ZMQ_POLLIN, 0}};
  for (;;) {
    if (pollOnce(items, timeoutMs, 2) <= 0) return false;
    if (items[1].revents & ZMQ_POLLIN) {  // wake(): return to the caller, which has something to do
      std::uint64_t count = 0;
      (void)!::read(wakeFd_, &count, sizeof(count));
      if (!(items[0].revents & ZMQ_POLLIN)) return false;
    }
    zmq::message_t body;
    if (!socket_->recv(body, zmq::recv_flags::none)) return false;
    Json j = parseJsonOrDiscarded(body.to_string());
    if (!j.is_object() || !j.contains("token") || !sameToken(j["token"], token_)) {
      spdlog::warn("ignored a control message without this job's token");
      timeoutMs = 0;
      continue;
    }
    j.erase("token");
    *message = std::move(j);
    return true;
  }
}

bool serveStore(ControlServer& server, StoreService& store, const std::string& from, const Json* message) {
  const auto now = StoreService::Clock::now();
  for (auto& r : store.expire(now)) server.send(r.to, std::move(r.message));
  if (!message || !message->is_object() || message->value("type", "") != "store") return false;
  for (auto& r : store.handle(from, *message, now)) server.send(r.to, std::move(r.message));
  return true;
}

}  // namespace hydrozoa::wire
