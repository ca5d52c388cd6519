#include "runtime/comm/control_store.h"

#include <fmt/format.h>

#include "wire/control.h"
#include "wire/store.h"

namespace hydrozoa::runtime {
namespace {

std::string bytesOf(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
std::vector<uint8_t> vectorOf(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

std::vector<uint8_t> valueOf(const Json& reply) {
  std::string bytes;
  TORCH_CHECK(reply.contains("value") && reply["value"].is_string() && wire::fromHex(reply["value"], &bytes),
              "store: the coordinator's reply has no hex \"value\"");
  return vectorOf(bytes);
}

}  // namespace

ControlStore::ControlStore(std::string endpoint, std::string name, std::string token,
                           std::unique_ptr<wire::ControlClient> client, std::chrono::milliseconds timeout)
    : c10d::Store(timeout),
      endpoint_(std::move(endpoint)),
      name_(std::move(name)),
      token_(std::move(token)),
      client_(std::move(client)) {}

ControlStore::~ControlStore() = default;

Result<c10::intrusive_ptr<ControlStore>> ControlStore::connect(const std::string& endpoint, const std::string& name,
                                                               std::string token, std::chrono::milliseconds timeout) {
  HZ_ASSIGN_OR_RETURN(std::unique_ptr<wire::ControlClient> client, wire::ControlClient::connect(endpoint, name, token));
  return c10::make_intrusive<ControlStore>(endpoint, name, std::move(token), std::move(client), timeout);
}

c10::intrusive_ptr<c10d::Store> ControlStore::clone() {
  std::string name;
  {
    std::lock_guard<std::mutex> lock(mu_);
    name = fmt::format("{}.{}", name_, ++clones_);
  }
  auto store = connect(endpoint_, name, token_, timeout_);
  TORCH_CHECK(store.ok(), fmt::format("store: cannot clone the connection to {}: {}", endpoint_,
                                      store.status().message()));
  return std::move(store).value();
}

Json ControlStore::call(Json request, std::chrono::milliseconds timeout) {
  // c10d's "no timeout" (0): as long as the coordinator lets a wait last.
  const std::chrono::milliseconds longest = std::chrono::hours(1);  // wire/store.cc's bound
  if (timeout <= std::chrono::milliseconds::zero() || timeout > longest) timeout = longest;
  if (request.contains("timeout_ms")) request["timeout_ms"] = timeout.count();
  std::lock_guard<std::mutex> lock(mu_);
  const std::int64_t id = next_++;
  request["type"] = "store";
  request["id"] = id;
  const std::string op = request["op"];
  client_->send(request);
  // The coordinator answers a wait when it ends; allow the round trip on top.
  const auto deadline = std::chrono::steady_clock::now() + timeout + std::chrono::seconds(1);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    Json reply;
    TORCH_CHECK(left.count() > 0 && client_->receive(&reply, static_cast<int>(left.count())),
                fmt::format("store: no reply to \"{}\" from the coordinator at {} within {} ms (is it running, and "
                            "does it hold this job's token?)",
                            op, endpoint_, timeout.count()));
    if (reply.value("type", "") != "store" || !reply.contains("id") || reply["id"] != id) continue;  // an older call's
    TORCH_CHECK(reply.value("ok", false), reply.value("error", std::string("store: the coordinator refused \"" + op + "\"")));
    return reply;
  }
}

void ControlStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  call({{"op", "set"}, {"key", key}, {"value", wire::toHex(bytesOf(value))}}, timeout_);
}

std::vector<uint8_t> ControlStore::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                              const std::vector<uint8_t>& desired) {
  return valueOf(call({{"op", "compare_set"},
                       {"key", key},
                       {"expected", wire::toHex(bytesOf(expected))},
                       {"value", wire::toHex(bytesOf(desired))}},
                      timeout_));
}

std::vector<uint8_t> ControlStore::get(const std::string& key) {
  return valueOf(call({{"op", "get"}, {"key", key}, {"timeout_ms", timeout_.count()}}, timeout_));
}

int64_t ControlStore::add(const std::string& key, int64_t value) {
  return call({{"op", "add"}, {"key", key}, {"amount", value}}, timeout_)["count"].get<int64_t>();
}

bool ControlStore::deleteKey(const std::string& key) {
  return call({{"op", "delete"}, {"key", key}}, timeout_)["deleted"].get<bool>();
}

int64_t ControlStore::deletePrefix(const std::string& prefix) {
  return call({{"op", "delete_prefix"}, {"key", prefix}}, timeout_)["deleted"].get<int64_t>();
}

bool ControlStore::check(const std::vector<std::string>& keys) {
  return call({{"op", "check"}, {"keys", keys}}, timeout_)["present"].get<bool>();
}

int64_t ControlStore::getNumKeys() { return call({{"op", "num_keys"}}, timeout_)["count"].get<int64_t>(); }

void ControlStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void ControlStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  call({{"op", "wait"}, {"keys", keys}, {"timeout_ms", timeout.count()}}, timeout);
}

}  // namespace hydrozoa::runtime
