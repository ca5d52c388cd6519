// A c10d Store's key-value rendezvous, served by the coordinator over its
// control plane (issue 10 §1): the workers of a generation find each other
// through it instead of a FileStore in the run directory, so nothing but the
// network need be shared, and no listener opens on every interface (the
// control plane's token authenticates every request; NOTE [Routes are bound
// by the token], wire/control.h). The client, a c10d::Store, is
// runtime/comm/control_store.h.
//
// Messages ("type": "store"), worker -> coordinator:
//   {id, op: "set",         key, value}                -> {}
//   {id, op: "get",         key, timeout_ms}           -> {value}   (waits for the key)
//   {id, op: "add",         key, amount}               -> {count}   (a missing key counts from 0)
//   {id, op: "compare_set", key, expected, value}      -> {value}   (the value now held)
//   {id, op: "delete",      key}                       -> {deleted}
//   {id, op: "delete_prefix", key}                     -> {deleted}   (every key starting with it: a count)
//   {id, op: "check",       keys}                      -> {present}
//   {id, op: "num_keys"}                               -> {count}
//   {id, op: "wait",        keys, timeout_ms}          -> {}        (waits for every key)
// Every reply carries the request's id and "ok": true, or "ok": false and an
// "error" that names the problem (a malformed request, a wait that timed
// out). Values travel as lowercase hex (the control plane carries JSON).
//
// Bounds, checked before anything is stored: a key up to kMaxStoreKey bytes,
// a value up to kMaxStoreValue, at most kMaxStoreKeys keys and kMaxWaiters
// pending waits, a timeout up to an hour. Pure C++: the coordinator's event
// loop calls handle() and expire() and sends what they return.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/files.h"

namespace hydrozoa::wire {

constexpr std::size_t kMaxStoreKey = 512;
constexpr std::size_t kMaxStoreValue = 16 * 1024;  // Gloo's rendezvous values are a few hundred bytes
constexpr std::size_t kMaxStoreKeys = 65536;
constexpr std::size_t kMaxWaiters = 4096;

class StoreService {
 public:
  using Clock = std::chrono::steady_clock;

  struct Reply {
    std::string to;  // the requester's name in the control plane
    Json message;
  };

  // Serves one request from `from`: the replies to send now (its own, unless
  // it waits, and those of earlier waits it completed).
  std::vector<Reply> handle(const std::string& from, const Json& request, Clock::time_point now);
  // The waits whose timeout has passed, answered with an error.
  std::vector<Reply> expire(Clock::time_point now);
  // When the next wait times out (Clock::time_point::max() when none waits).
  Clock::time_point nextDeadline() const;
  // Drops the waits of a requester that is gone.
  void forget(const std::string& from);
  // Drops the keys that start with `prefix` (a finished generation's
  // "gen3/"); how many.
  std::size_t erasePrefix(const std::string& prefix);

  std::size_t size() const { return values_.size(); }
  // The value of `key`, or null: for the process that serves the store.
  const std::string* find(const std::string& key) const {
    const auto it = values_.find(key);
    return it == values_.end() ? nullptr : &it->second;
  }
  std::size_t waiting() const { return waiters_.size(); }

 private:
  struct Waiter {
    std::string from;
    std::int64_t id = 0;
    bool get = false;  // reply with the value of keys[0]
    std::vector<std::string> keys;
    Clock::time_point deadline;
  };

  bool present(const std::vector<std::string>& keys) const;
  Json answer(const Waiter& w) const;
  // The waits that the keys set just now complete, removed and answered.
  void release(std::vector<Reply>* out);

  std::map<std::string, std::string> values_;
  std::vector<Waiter> waiters_;
};

std::string toHex(const std::string& bytes);
// False when `hex` is not an even number of hex digits.
bool fromHex(const std::string& hex, std::string* bytes);

}  // namespace hydrozoa::wire
