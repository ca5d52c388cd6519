#include "wire/store.h"

#include <fmt/format.h>

#include <algorithm>

namespace hydrozoa::wire {
namespace {

constexpr std::int64_t kMaxTimeoutMs = 3600 * 1000;

// A request that cannot be served: one line naming the field.
struct BadRequest {
  std::string message;
};

Json reply(std::int64_t id) { return Json{{"type", "store"}, {"id", id}, {"ok", true}}; }

Json failure(std::int64_t id, const std::string& message) {
  return Json{{"type", "store"}, {"id", id}, {"ok", false}, {"error", message}};
}

// A key as sent: "key", or an entry of "keys" (null: absent).
std::string checkedKey(const Json* k) {
  if (!k || !k->is_string()) throw BadRequest{"\"key\" must be a string"};
  const std::string& s = k->get_ref<const std::string&>();
  if (s.empty() || s.size() > kMaxStoreKey) {
    throw BadRequest{fmt::format("\"key\" must be 1 to {} bytes, got {}", kMaxStoreKey, s.size())};
  }
  return s;
}

std::string key(const Json& r) { return checkedKey(r.contains("key") ? &r["key"] : nullptr); }

std::vector<std::string> keys(const Json& r) {
  if (!r.contains("keys") || !r["keys"].is_array() || r["keys"].size() > 1024) {
    throw BadRequest{"\"keys\" must be an array of at most 1024 keys"};
  }
  std::vector<std::string> out;
  for (const Json& k : r["keys"]) out.push_back(checkedKey(&k));
  return out;
}

std::string value(const Json& r, const char* field) {
  if (!r.contains(field) || !r[field].is_string()) throw BadRequest{fmt::format("\"{}\" must be a hex string", field)};
  const std::string& hex = r[field].get_ref<const std::string&>();
  if (hex.size() > 2 * kMaxStoreValue) {
    throw BadRequest{fmt::format("\"{}\" holds {} bytes, more than the {} a value may hold", field, hex.size() / 2,
                                 kMaxStoreValue)};
  }
  std::string bytes;
  if (!fromHex(hex, &bytes)) throw BadRequest{fmt::format("\"{}\" is not hex", field)};
  return bytes;
}

std::int64_t integer(const Json& r, const char* field, std::int64_t lo, std::int64_t hi) {
  if (!r.contains(field) || !r[field].is_number_integer() || r[field].get<std::int64_t>() < lo ||
      r[field].get<std::int64_t>() > hi) {
    throw BadRequest{fmt::format("\"{}\" must be a whole number from {} to {}", field, lo, hi)};
  }
  return r[field].get<std::int64_t>();
}

}  // namespace

std::string toHex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

bool fromHex(const std::string& hex, std::string* bytes) {
  if (hex.size() % 2) return false;
  auto digit = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  bytes->clear();
  bytes->reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    *bytes += static_cast<char>(hi * 16 + lo);
  }
  return true;
}

bool StoreService::present(const std::vector<std::string>& ks) const {
  return std::all_of(ks.begin(), ks.end(), [&](const std::string& k) { return values_.count(k) > 0; });
}

Json StoreService::answer(const Waiter& w) const {
  Json r = reply(w.id);
  if (w.get) r["value"] = toHex(values_.at(w.keys[0]));
  return r;
}

void StoreService::release(std::vector<Reply>* out) {
  auto done = std::stable_partition(waiters_.begin(), waiters_.end(), [&](const Waiter& w) { return !present(w.keys); });
  for (auto it = done; it != waiters_.end(); ++it) out->push_back({it->from, answer(*it)});
  waiters_.erase(done, waiters_.end());
}

std::vector<StoreService::Reply> StoreService::handle(const std::string& from, const Json& request,
                                                      Clock::time_point now) {
  std::vector<Reply> out;
  const std::int64_t id = request.contains("id") && request["id"].is_number_integer() ? request["id"].get<std::int64_t>() : -1;
  try {
    if (id < 0) throw BadRequest{"\"id\" must be a whole number from 0"};
    if (!request.contains("op") || !request["op"].is_string()) throw BadRequest{"\"op\" must be a string"};
    const std::string op = request["op"].get<std::string>();
    auto storing = [&](const std::string& k) {
      if (!values_.count(k) && values_.size() >= kMaxStoreKeys) {
        throw BadRequest{fmt::format("the store holds {} keys, its most", kMaxStoreKeys)};
      }
    };
    if (op == "set") {
      const std::string k = key(request);
      std::string v = value(request, "value");
      storing(k);
      values_[k] = std::move(v);
      out.push_back({from, reply(id)});
      release(&out);
    } else if (op == "add") {
      const std::string k = key(request);
      const std::int64_t amount = integer(request, "amount", -(std::int64_t{1} << 53), std::int64_t{1} << 53);
      storing(k);
      std::int64_t count = 0;
      if (auto it = values_.find(k); it != values_.end()) {
        try {
          size_t used = 0;
          count = std::stoll(it->second, &used);
          if (used != it->second.size()) throw std::invalid_argument("trailing");
        } catch (const std::exception&) {
          throw BadRequest{fmt::format("key \"{}\" holds a value that is not a number", k.substr(0, 64))};
        }
      }
      if ((amount > 0 && count > INT64_MAX - amount) || (amount < 0 && count < INT64_MIN - amount)) {
        throw BadRequest{fmt::format("adding {} to key \"{}\" overflows", amount, k.substr(0, 64))};
      }
      count += amount;
      values_[k] = std::to_string(count);
      Json r = reply(id);
      r["count"] = count;
      out.push_back({from, std::move(r)});
      release(&out);
    } else if (op == "compare_set") {
      // As c10d's TCPStore: a missing key is set only when `expected` is
      // empty; a held one only when it equals `expected`. Either way the
      // reply is the value held afterwards (for a missing key left missing:
      // `expected`).
      const std::string k = key(request);
      const std::string expected = value(request, "expected");
      std::string desired = value(request, "value");
      const auto it = values_.find(k);
      std::string now_held;
      if (it == values_.end()) {
        if (expected.empty()) {
          storing(k);
          values_[k] = desired;
          now_held = std::move(desired);
        } else {
          now_held = expected;
        }
      } else {
        if (it->second == expected) it->second = std::move(desired);
        now_held = it->second;
      }
      Json r = reply(id);
      r["value"] = toHex(now_held);
      out.push_back({from, std::move(r)});
      release(&out);
    } else if (op == "delete") {
      Json r = reply(id);
      r["deleted"] = values_.erase(key(request)) > 0;
      out.push_back({from, std::move(r)});
    } else if (op == "delete_prefix") {
      // Every key that starts with it (a step's FlexRR messages,
      // runtime/comm/reassign.h): one request instead of one per key.
      const std::string prefix = key(request);
      if (prefix.empty()) throw BadRequest{"delete_prefix needs a non-empty prefix"};
      Json r = reply(id);
      r["deleted"] = erasePrefix(prefix);
      out.push_back({from, std::move(r)});
    } else if (op == "check") {
      Json r = reply(id);
      r["present"] = present(keys(request));
      out.push_back({from, std::move(r)});
    } else if (op == "num_keys") {
      Json r = reply(id);
      r["count"] = values_.size();
      out.push_back({from, std::move(r)});
    } else if (op == "get" || op == "wait") {
      Waiter w;
      w.from = from;
      w.id = id;
      w.get = op == "get";
      w.keys = w.get ? std::vector<std::string>{key(request)} : keys(request);
      w.deadline = now + std::chrono::milliseconds(integer(request, "timeout_ms", 0, kMaxTimeoutMs));
      if (present(w.keys)) {
        out.push_back({from, answer(w)});
      } else {
        if (waiters_.size() >= kMaxWaiters) throw BadRequest{fmt::format("{} waits are pending, the most", kMaxWaiters)};
        waiters_.push_back(std::move(w));
      }
    } else {
      throw BadRequest{fmt::format("unknown op \"{}\" (set, get, add, compare_set, delete, delete_prefix, check, num_keys, wait)",
                                   op.substr(0, 32))};
    }
  } catch (const BadRequest& e) {
    out.push_back({from, failure(id, "store: " + e.message)});
  }
  return out;
}

std::vector<StoreService::Reply> StoreService::expire(Clock::time_point now) {
  std::vector<Reply> out;
  auto late = std::stable_partition(waiters_.begin(), waiters_.end(), [&](const Waiter& w) { return w.deadline > now; });
  for (auto it = late; it != waiters_.end(); ++it) {
    std::string missing;
    for (const std::string& k : it->keys) {
      if (!values_.count(k)) missing += (missing.empty() ? "" : ", ") + k.substr(0, 64);
    }
    out.push_back({it->from, failure(it->id, fmt::format("store: timed out waiting for {}", missing))});
  }
  waiters_.erase(late, waiters_.end());
  return out;
}

StoreService::Clock::time_point StoreService::nextDeadline() const {
  Clock::time_point next = Clock::time_point::max();
  for (const Waiter& w : waiters_) next = std::min(next, w.deadline);
  return next;
}

void StoreService::forget(const std::string& from) {
  waiters_.erase(std::remove_if(waiters_.begin(), waiters_.end(), [&](const Waiter& w) { return w.from == from; }),
                 waiters_.end());
}

std::size_t StoreService::erasePrefix(const std::string& prefix) {
  std::size_t erased = 0;
  for (auto it = values_.lower_bound(prefix); it != values_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    it = values_.erase(it);
    ++erased;
  }
  return erased;
}

}  // namespace hydrozoa::wire
