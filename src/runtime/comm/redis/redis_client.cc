#include "runtime/comm/redis/redis_client.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <charconv>
#include <functional>
#include <cmath>
#include <sys/time.h>

namespace hydrozoa::runtime::redis {

std::string Address::url() const { return fmt::format("redis://{}:{}", host, port); }

Result<Address> parseUrl(const std::string& url, const std::string& what) {
  const std::string scheme = "redis://";
  const auto bad = [&](const std::string& why) {
    return invalidArgument(fmt::format("{}: \"{}\" {}; expected redis://HOST:PORT, e.g. redis://127.0.0.1:6379 (the "
                                       "password goes in a file: --channel-password-file)",
                                       what, url, why));
  };
  if (url.rfind(scheme, 0) != 0) return bad("is not a redis:// address");
  std::string rest = url.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find_first_of("@/?#") != std::string::npos) return bad("has a user, a path or options");
  Address a;
  const auto colon = rest.rfind(':');
  a.host = rest.substr(0, colon);
  if (a.host.empty()) return bad("names no host");
  if (colon != std::string::npos) {
    const std::string p = rest.substr(colon + 1);
    int port = 0;
    const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
    if (ec != std::errc() || end != p.data() + p.size() || port < 1 || port > 65535) {
      return bad("has port \"" + p + "\" outside 1..65535");
    }
    a.port = port;
  }
  return a;
}

// --- Reply ---------------------------------------------------------------------

Reply::Reply(redisReply* r) : root_(r, [](redisReply* p) { freeReplyObject(p); }), r_(r) {}

Reply::Type Reply::type() const {
  switch (r_->type) {
    case REDIS_REPLY_STRING: return Type::kString;
    case REDIS_REPLY_ARRAY: return Type::kArray;
    case REDIS_REPLY_INTEGER: return Type::kInteger;
    case REDIS_REPLY_STATUS: return Type::kStatus;
    case REDIS_REPLY_ERROR: return Type::kError;
    default: return Type::kNil;
  }
}
std::int64_t Reply::integer() const {
  HZ_CHECK(r_->type == REDIS_REPLY_INTEGER);
  return r_->integer;
}
std::string_view Reply::str() const {
  HZ_CHECK(r_->type == REDIS_REPLY_STRING || r_->type == REDIS_REPLY_STATUS || r_->type == REDIS_REPLY_ERROR);
  return {r_->str, r_->len};
}
size_t Reply::size() const { return r_->type == REDIS_REPLY_ARRAY ? r_->elements : 0; }
Reply Reply::at(size_t i) const {
  HZ_CHECK(r_->type == REDIS_REPLY_ARRAY && i < r_->elements);
  return Reply(root_, r_->element[i]);
}

// --- Connection ----------------------------------------------------------------

namespace {

timeval toTimeval(Seconds s) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(std::floor(s));
  tv.tv_usec = static_cast<suseconds_t>((s - std::floor(s)) * 1e6);
  return tv;
}

// What a Redis error reply means to a user, with the fix.
std::string explain(const Address& a, std::string_view error) {
  const std::string e(error);
  if (e.rfind("OOM", 0) == 0) {
    return fmt::format("the Redis channel at {} is full ({}): give it more memory (maxmemory) or run fewer "
                       "workers or smaller microbatches through it",
                       a.url(), e);
  }
  if (e.rfind("NOAUTH", 0) == 0) {
    return fmt::format("the Redis channel at {} requires a password: give it with --channel-password-file", a.url());
  }
  if (e.rfind("WRONGPASS", 0) == 0 || e.find("invalid password") != std::string::npos) {
    return fmt::format("the Redis channel at {} refused the password ({}): check the file given with "
                       "--channel-password-file",
                       a.url(), e);
  }
  if (e.find("without any password configured") != std::string::npos) {
    return fmt::format("the Redis channel at {} has no password but one was given: set requirepass on the "
                       "server, or drop --channel-password-file",
                       a.url());
  }
  return fmt::format("the Redis channel at {} answered an error: {}", a.url(), e);
}

}  // namespace

Connection::Connection(redisContext* c, Address address) : c_(c), address_(std::move(address)) {}
Connection::Connection(Connection&& o) noexcept : c_(o.c_), address_(std::move(o.address_)), pending_(o.pending_) {
  o.c_ = nullptr;
}
Connection& Connection::operator=(Connection&& o) noexcept {
  if (this != &o) {
    if (c_) redisFree(c_);
    c_ = o.c_;
    o.c_ = nullptr;
    address_ = std::move(o.address_);
    pending_ = o.pending_;
  }
  return *this;
}
Connection::~Connection() {
  if (c_) redisFree(c_);
}

Result<Connection> Connection::open(const Address& address, const std::string& password, Seconds timeout,
                                    const std::string& user) {
  redisContext* c = redisConnectWithTimeout(address.host.c_str(), address.port, toTimeval(timeout));
  if (c == nullptr) return unavailable(fmt::format("cannot reach the Redis channel at {}: out of memory", address.url()));
  if (c->err) {
    const std::string why = c->errstr;
    redisFree(c);
    return unavailable(fmt::format("cannot reach the Redis channel at {}: {} (is redis-server running there? "
                                   "Without --channel the job starts its own)",
                                   address.url(), why));
  }
  redisSetTimeout(c, toTimeval(timeout));
  Connection conn(c, address);
  if (!user.empty()) {
    HZ_RETURN_IF_ERROR(conn.run({"AUTH", user, password}).status());
  } else if (!password.empty()) {
    HZ_RETURN_IF_ERROR(conn.run({"AUTH", password}).status());
  }
  HZ_RETURN_IF_ERROR(conn.run({"PING"}).status());
  return conn;
}

Status Connection::failure(const std::string& doing) const {
  const std::string why = c_->errstr[0] ? c_->errstr : "connection lost";
  return unavailable(fmt::format("the Redis channel at {} failed during {}: {}", address_.url(), doing, why));
}

Result<Reply> Connection::checked(redisReply* r, const std::string& doing) {
  if (r == nullptr) return failure(doing);
  Reply reply(r);
  if (reply.type() == Reply::Type::kError) return unavailable(explain(address_, reply.str()));
  return reply;
}

namespace {

// A command's words as hiredis takes them (pointers and lengths: binary-safe).
struct Argv {
  explicit Argv(const std::vector<std::string_view>& args) {
    for (std::string_view a : args) {
      words.push_back(a.data());
      lengths.push_back(a.size());
    }
  }
  int count() const { return static_cast<int>(words.size()); }
  std::vector<const char*> words;
  std::vector<size_t> lengths;
};

}  // namespace

Result<Reply> Connection::run(const std::vector<std::string_view>& args) {
  HZ_CHECK_MSG(pending_ == 0, "a Redis command run with pipelined replies unread");
  Argv a(args);
  auto* r = static_cast<redisReply*>(redisCommandArgv(c_, a.count(), a.words.data(), a.lengths.data()));
  return checked(r, std::string(args.empty() ? "" : args[0]));
}

void Connection::append(const std::vector<std::string_view>& args) {
  Argv a(args);
  redisAppendCommandArgv(c_, a.count(), a.words.data(), a.lengths.data());
  ++pending_;
}

Result<Reply> Connection::next() {
  HZ_CHECK_MSG(pending_ > 0, "a Redis reply read with no command pipelined");
  --pending_;
  void* r = nullptr;
  if (redisGetReply(c_, &r) != REDIS_OK) return failure("a pipelined command");
  return checked(static_cast<redisReply*>(r), "a pipelined command");
}

namespace {

// Calls `each` with every batch of keys matching `pattern` (SCAN, never KEYS).
Status scanMatching(Connection& c, const std::string& pattern, const std::function<Status(const Reply& keys)>& each) {
  std::string cursor = "0";
  do {
    HZ_ASSIGN_OR_RETURN(Reply r, c.run({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}));
    if (r.type() != Reply::Type::kArray || r.size() != 2 || r.at(0).type() != Reply::Type::kString ||
        r.at(1).type() != Reply::Type::kArray) {
      return internalError(fmt::format("the Redis channel at {} answered SCAN oddly", c.address().url()));
    }
    cursor = std::string(r.at(0).str());
    if (r.at(1).size() > 0) HZ_RETURN_IF_ERROR(each(r.at(1)));
  } while (cursor != "0");
  return Status();
}

}  // namespace

Result<std::int64_t> deleteMatching(Connection& c, const std::string& pattern) {
  std::int64_t deleted = 0;
  HZ_RETURN_IF_ERROR(scanMatching(c, pattern, [&](const Reply& keys) {
    std::vector<std::string_view> args = {"UNLINK"};
    for (size_t i = 0; i < keys.size(); ++i) args.push_back(keys.at(i).str());
    HZ_ASSIGN_OR_RETURN(Reply n, c.run(args));
    deleted += n.integer();
    return Status();
  }));
  return deleted;
}

Result<std::int64_t> countMatching(Connection& c, const std::string& pattern) {
  std::int64_t n = 0;
  HZ_RETURN_IF_ERROR(scanMatching(c, pattern, [&](const Reply& keys) {
    n += static_cast<std::int64_t>(keys.size());
    return Status();
  }));
  return n;
}

Status checkStore(Connection& c) {
  auto policy = c.run({"CONFIG", "GET", "maxmemory-policy"});
  if (!policy.ok() || policy->size() != 2) return Status();
  const std::string_view p = policy->at(1).str();
  if (p == "noeviction") return Status();
  return invalidArgument(fmt::format("the Redis channel at {} evicts keys (maxmemory-policy {}): a message evicted "
                                     "mid-step would be lost; set maxmemory-policy noeviction on it",
                                     c.address().url(), p));
}

Result<std::int64_t> usedMemory(Connection& c) {
  HZ_ASSIGN_OR_RETURN(Reply r, c.run({"INFO", "memory"}));
  const std::string_view text = r.str();
  const std::string_view key = "used_memory:";
  const auto at = text.find(key);
  if (at == std::string_view::npos) return internalError("INFO memory has no used_memory");
  std::int64_t v = 0;
  const char* begin = text.data() + at + key.size();
  std::from_chars(begin, text.data() + text.size(), v);
  return v;
}

}  // namespace hydrozoa::runtime::redis
