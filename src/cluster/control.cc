#include "cluster/control.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>
#include <zmq.hpp>

namespace hydrozoa::cluster {

std::string newToken() {
  std::random_device rd;
  std::string token;
  for (int i = 0; i < 4; ++i) token += fmt::format("{:08x}", rd());
  return token;
}

namespace {

// How long a closing socket may still deliver what it queued: the
// coordinator not at all (it must not hang on a dead worker); a worker up to
// 2 s, so its last "done" reaches the coordinator even on a loaded machine
// (with no linger, a worker that exited right after sending it was now and
// then taken for a worker that died).
void configure(zmq::socket_t& s, int lingerMs = 0) { s.set(zmq::sockopt::linger, lingerMs); }

// zmq::poll, where a signal (Ctrl-C) ends the wait as "nothing yet" instead
// of throwing: the caller checks its flags and polls again.
int pollOnce(zmq::pollitem_t* item, int timeoutMs) {
  try {
    return zmq::poll(item, 1, std::chrono::milliseconds(timeoutMs));
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return 0;
    throw;
  }
}

}  // namespace

ControlServer::~ControlServer() = default;

Result<std::unique_ptr<ControlServer>> ControlServer::bind(const std::string& host, int port, std::string token) {
  std::unique_ptr<ControlServer> s(new ControlServer());
  s->token_ = std::move(token);
  s->context_ = std::make_unique<zmq::context_t>(1);
  s->socket_ = std::make_unique<zmq::socket_t>(*s->context_, zmq::socket_type::router);
  configure(*s->socket_);
  s->socket_->set(zmq::sockopt::router_mandatory, 0);
  // A new generation's worker takes over its identity ("w3") even while the
  // connection of the one it replaces is not yet seen to be gone (a cut link).
  s->socket_->set(zmq::sockopt::router_handover, 1);
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
  return s;
}

bool ControlServer::receive(std::string* from, Json* message, int timeoutMs) {
  zmq::pollitem_t item{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0};
  for (;;) {
    if (pollOnce(&item, timeoutMs) <= 0) return false;
    zmq::message_t id, body;
    if (!socket_->recv(id, zmq::recv_flags::none)) return false;
    while (socket_->get(zmq::sockopt::rcvmore)) {  // keep the last frame as the body
      if (!socket_->recv(body, zmq::recv_flags::none)) return false;
    }
    const std::string sender = id.to_string();
    Json j = Json::parse(body.to_string(), nullptr, /*allow_exceptions=*/false);
    const bool current = j.is_object() && j.contains("token") &&
                         (j["token"] == token_ || (!next_.empty() && j["token"] == next_));
    if (!current) {
      ++refused_;
      const bool old = j.is_object() && j.contains("token") && j["token"].is_string() &&
                       std::find(retired_.begin(), retired_.end(), j["token"].get<std::string>()) != retired_.end();
      spdlog::warn("refused a control message from \"{}\": {}", sender,
                   old ? "the token of an earlier generation of this job's workers"
                       : j.is_object() && j.contains("token") ? "wrong job token" : "no job token");
      timeoutMs = 0;  // look once more without waiting
      continue;
    }
    j.erase("token");
    *from = sender;
    *message = std::move(j);
    return true;
  }
}

void ControlServer::newGeneration(std::string token) {
  retired_.push_back(std::move(token_));
  if (token == next_) next_.clear();
  token_ = std::move(token);
}

void ControlServer::send(const std::string& to, Json message) {
  message["token"] = token_;
  const std::string body = message.dump();
  socket_->send(zmq::buffer(to), zmq::send_flags::sndmore);
  socket_->send(zmq::buffer(body), zmq::send_flags::dontwait);
}

ControlClient::~ControlClient() = default;

Result<std::unique_ptr<ControlClient>> ControlClient::connect(const std::string& endpoint, const std::string& identity,
                                                              std::string token) {
  std::unique_ptr<ControlClient> c(new ControlClient());
  c->token_ = std::move(token);
  c->context_ = std::make_unique<zmq::context_t>(1);
  c->socket_ = std::make_unique<zmq::socket_t>(*c->context_, zmq::socket_type::dealer);
  configure(*c->socket_, 2000);
  c->socket_->set(zmq::sockopt::routing_id, identity);
  try {
    c->socket_->connect(endpoint);
  } catch (const zmq::error_t& e) {
    return unavailable(fmt::format("cannot reach the coordinator at {}: {}", endpoint, e.what()));
  }
  return c;
}

void ControlClient::send(Json message) {
  message["token"] = token_;
  const std::string body = message.dump();
  std::lock_guard<std::mutex> lock(mu_);
  socket_->send(zmq::buffer(body), zmq::send_flags::none);
}

bool ControlClient::receive(Json* message, int timeoutMs) {
  std::lock_guard<std::mutex> lock(mu_);
  zmq::pollitem_t item{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0};
  for (;;) {
    if (pollOnce(&item, timeoutMs) <= 0) return false;
    zmq::message_t body;
    if (!socket_->recv(body, zmq::recv_flags::none)) return false;
    Json j = Json::parse(body.to_string(), nullptr, false);
    if (!j.is_object() || !j.contains("token") || j["token"] != token_) {
      spdlog::warn("ignored a control message without this job's token");
      timeoutMs = 0;
      continue;
    }
    j.erase("token");
    *message = std::move(j);
    return true;
  }
}

}  // namespace hydrozoa::cluster
