// A connection to the Redis server that serves as the storage channel of
// function workers (FuncPipe, Liu et al. 2022, §3: functions cannot talk to
// each other; they meet in cloud storage). Pure C++ over hiredis: the
// transport (redis_transport.h), the coordinator (which starts a server and
// clears a job's keys) and the tests use it.
//
// Every failure is a Status whose message names the server and the fix:
// unreachable, a password refused or missing, the store full (maxmemory).
//
// Thread-safety: a connection is used by one thread at a time.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/units.h"

struct redisContext;
struct redisReply;

namespace hydrozoa::runtime::redis {

struct Address {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string url() const;  // redis://host:port
};

// "redis://host:port" (port 1..65535; the default 6379 when left out).
// Anything else (another scheme, a user or a path, a bad port) is an error
// naming `what` and the form expected.
Result<Address> parseUrl(const std::string& url, const std::string& what);

// One reply. Strings are views into the reply, valid while it lives.
class Reply {
 public:
  enum class Type { kString, kArray, kInteger, kNil, kStatus, kError };
  Type type() const;
  std::int64_t integer() const;        // REQUIRES: kInteger
  std::string_view str() const;        // kString, kStatus, kError
  size_t size() const;                 // kArray: its elements
  Reply at(size_t i) const;            // kArray: element i
  bool isNil() const { return type() == Type::kNil; }

 private:
  friend class Connection;
  explicit Reply(redisReply* r);
  Reply(std::shared_ptr<redisReply> root, redisReply* node) : root_(std::move(root)), r_(node) {}
  std::shared_ptr<redisReply> root_;  // owns the whole reply
  redisReply* r_;                     // this part of it
};

// Every command the channel's clients send (redis_transport.cc,
// redis_files.cc, checkStore, deleteKeys): the job's own server lets the
// workers' password run these and nothing else (ServerOptions::commands;
// the RedisChannel tests run every part of the channel on such a server).
inline const std::vector<std::string> kChannelCommands = {"ping",  "blpop", "decr", "incrby",     "lindex",
                                                          "llen",  "rpush", "set",  "unlink",     "scan",
                                                          "info",  "config|get"};

class Connection {
 public:
  // Connects, authenticates with `password` ("" : none) as `user` (""
  // : the default user) and checks with a PING that the server takes
  // commands. `timeout` bounds connecting and every reply (blocking commands
  // wait less than it).
  static Result<Connection> open(const Address& address, const std::string& password, Seconds timeout,
                                 const std::string& user = "");

  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;
  ~Connection();

  // Runs one command. A Redis error reply is a Status (the store full: a
  // message that says so); so is a lost connection.
  Result<Reply> run(const std::vector<std::string_view>& args);
  Result<Reply> run(std::initializer_list<std::string_view> args) {
    return run(std::vector<std::string_view>(args));
  }
  // Pipelining: queue commands, then read their replies in order.
  void append(const std::vector<std::string_view>& args);
  Result<Reply> next();

  const Address& address() const { return address_; }

 private:
  Connection(redisContext* c, Address address);
  Status failure(const std::string& doing) const;
  Result<Reply> checked(redisReply* r, const std::string& doing);

  redisContext* c_ = nullptr;
  Address address_;
  size_t pending_ = 0;
};

// Deletes every key that matches `pattern` (SCAN + UNLINK, never KEYS);
// returns how many.
Result<std::int64_t> deleteMatching(Connection& c, const std::string& pattern);

// Whether the server can serve as a channel: one that evicts keys would
// lose messages (maxmemory-policy must be noeviction). A server that
// refuses CONFIG (a managed one) is trusted.
Status checkStore(Connection& c);

// How many keys match `pattern` (SCAN).
Result<std::int64_t> countMatching(Connection& c, const std::string& pattern);

// The server's used_memory (INFO memory), bytes.
Result<std::int64_t> usedMemory(Connection& c);

}  // namespace hydrozoa::runtime::redis
