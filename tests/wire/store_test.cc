// The coordinator's key-value service behind the c10d Store (wire/store.h):
// the c10d contract (set/get/add/compareSet/delete/check/numKeys/wait), waits
// completed by later writes or timed out, and hostile requests refused with
// a message that names the field.
#include "wire/store.h"

#include <gtest/gtest.h>

namespace hydrozoa::wire {
namespace {

using Clock = StoreService::Clock;

Json request(std::int64_t id, const std::string& op, Json fields = Json::object()) {
  fields["type"] = "store";
  fields["id"] = id;
  fields["op"] = op;
  return fields;
}

// The one reply a request gets at once.
Json only(const std::vector<StoreService::Reply>& replies, const std::string& to = "w0") {
  EXPECT_EQ(replies.size(), 1u);
  if (replies.empty()) return Json();
  EXPECT_EQ(replies[0].to, to);
  return replies[0].message;
}

std::string valueOf(const Json& reply) {
  std::string bytes;
  EXPECT_TRUE(fromHex(reply.at("value").get<std::string>(), &bytes));
  return bytes;
}

TEST(Hex, RoundTripsEveryByteAndRefusesOddOrForeignDigits) {
  std::string all;
  for (int c = 0; c < 256; ++c) all += static_cast<char>(c);
  std::string back;
  ASSERT_TRUE(fromHex(toHex(all), &back));
  EXPECT_EQ(back, all);
  EXPECT_TRUE(fromHex("0aFF", &back));
  EXPECT_EQ(back, std::string("\x0a\xff", 2));
  EXPECT_FALSE(fromHex("abc", &back));
  EXPECT_FALSE(fromHex("zz", &back));
}

TEST(StoreService, SetGetAddCompareSetDeleteCheckNumKeys) {
  StoreService s;
  const auto now = Clock::now();
  EXPECT_TRUE(only(s.handle("w0", request(1, "set", {{"key", "a"}, {"value", toHex(std::string("x\0y", 3))}}), now))["ok"]);
  Json r = only(s.handle("w0", request(2, "get", {{"key", "a"}, {"timeout_ms", 1000}}), now));
  EXPECT_EQ(r["id"], 2);
  EXPECT_EQ(valueOf(r), std::string("x\0y", 3));

  EXPECT_EQ(only(s.handle("w0", request(3, "add", {{"key", "n"}, {"amount", 5}}), now))["count"], 5);
  EXPECT_EQ(only(s.handle("w0", request(4, "add", {{"key", "n"}, {"amount", -2}}), now))["count"], 3);

  // compareSet, as TCPStore: missing + empty expected sets; a mismatch keeps the value.
  r = only(s.handle("w0", request(5, "compare_set", {{"key", "c"}, {"expected", ""}, {"value", toHex("one")}}), now));
  EXPECT_EQ(valueOf(r), "one");
  r = only(s.handle("w0", request(6, "compare_set", {{"key", "c"}, {"expected", toHex("two")}, {"value", toHex("three")}}), now));
  EXPECT_EQ(valueOf(r), "one");
  r = only(s.handle("w0", request(7, "compare_set", {{"key", "c"}, {"expected", toHex("one")}, {"value", toHex("three")}}), now));
  EXPECT_EQ(valueOf(r), "three");
  r = only(s.handle("w0", request(8, "compare_set", {{"key", "m"}, {"expected", toHex("x")}, {"value", toHex("y")}}), now));
  EXPECT_EQ(valueOf(r), "x");  // missing and left missing: the expected value back
  EXPECT_FALSE(only(s.handle("w0", request(9, "check", {{"keys", {"m"}}}), now))["present"]);

  EXPECT_TRUE(only(s.handle("w0", request(10, "check", {{"keys", {"a", "n", "c"}}}), now))["present"]);
  EXPECT_EQ(only(s.handle("w0", request(11, "num_keys"), now))["count"], 3);
  EXPECT_TRUE(only(s.handle("w0", request(12, "delete", {{"key", "a"}}), now))["deleted"]);
  EXPECT_FALSE(only(s.handle("w0", request(13, "delete", {{"key", "a"}}), now))["deleted"]);
  EXPECT_FALSE(only(s.handle("w0", request(14, "check", {{"keys", {"a", "n"}}}), now))["present"]);
}

TEST(StoreService, WaitsAreAnsweredByTheWriteThatCompletesThem) {
  StoreService s;
  const auto now = Clock::now();
  EXPECT_TRUE(s.handle("w1", request(1, "get", {{"key", "addr/0"}, {"timeout_ms", 5000}}), now).empty());
  EXPECT_TRUE(s.handle("w2", request(7, "wait", {{"keys", {"addr/0", "addr/1"}}, {"timeout_ms", 5000}}), now).empty());
  EXPECT_EQ(s.waiting(), 2u);

  // The first write completes w1's get, not w2's wait.
  auto replies = s.handle("w0", request(2, "set", {{"key", "addr/0"}, {"value", toHex("10.0.0.1:7")}}), now);
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].to, "w0");
  EXPECT_EQ(replies[1].to, "w1");
  EXPECT_EQ(replies[1].message["id"], 1);
  EXPECT_EQ(valueOf(replies[1].message), "10.0.0.1:7");

  // An add creates the last key w2 waits for.
  replies = s.handle("w3", request(3, "add", {{"key", "addr/1"}, {"amount", 1}}), now);
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[1].to, "w2");
  EXPECT_EQ(replies[1].message["id"], 7);
  EXPECT_TRUE(replies[1].message["ok"]);
  EXPECT_EQ(s.waiting(), 0u);
}

TEST(StoreService, WaitsTimeOutNamingTheMissingKeysAndGoneRequestersAreForgotten) {
  StoreService s;
  const auto now = Clock::now();
  s.handle("w0", request(1, "set", {{"key", "here"}, {"value", ""}}), now);
  s.handle("w1", request(2, "wait", {{"keys", {"here", "late"}}, {"timeout_ms", 100}}), now);
  s.handle("w2", request(3, "get", {{"key", "never"}, {"timeout_ms", 10000}}), now);
  EXPECT_EQ(s.nextDeadline(), now + std::chrono::milliseconds(100));
  EXPECT_TRUE(s.expire(now + std::chrono::milliseconds(50)).empty());
  auto late = s.expire(now + std::chrono::milliseconds(150));
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].to, "w1");
  EXPECT_FALSE(late[0].message["ok"]);
  EXPECT_EQ(late[0].message["error"], "store: timed out waiting for late");
  s.forget("w2");
  EXPECT_EQ(s.waiting(), 0u);
  EXPECT_EQ(s.nextDeadline(), Clock::time_point::max());
}

TEST(StoreService, AFinishedGenerationsKeysAreErased) {
  StoreService s;
  const auto now = Clock::now();
  for (const char* k : {"gen1/0", "gen1/1", "gen10/0", "gen2/0"}) s.handle("w0", request(1, "set", {{"key", k}, {"value", ""}}), now);
  EXPECT_EQ(s.erasePrefix("gen1/"), 2u);
  EXPECT_EQ(s.size(), 2u);
  EXPECT_TRUE(only(s.handle("w0", request(2, "check", {{"keys", {"gen10/0", "gen2/0"}}}), now))["present"]);
}

TEST(StoreService, DeletePrefixErasesAStepsKeysInOneRequest) {
  StoreService s;
  const auto now = Clock::now();
  for (const char* k : {"gen0/flexrr/3/1/n", "gen0/flexrr/3/1/m0", "gen0/flexrr/3/1/c7", "gen0/flexrr/3/10/n",
                        "gen0/flexrr/4/1/n"}) {
    s.handle("w0", request(1, "set", {{"key", k}, {"value", ""}}), now);
  }
  EXPECT_EQ(only(s.handle("w0", request(2, "delete_prefix", {{"key", "gen0/flexrr/3/1/"}}), now))["deleted"], 3);
  EXPECT_EQ(s.size(), 2u);
  const Json empty = only(s.handle("w0", request(3, "delete_prefix", {{"key", ""}}), now));
  EXPECT_FALSE(empty["ok"]);
  EXPECT_EQ(s.size(), 2u);
}

TEST(StoreService, HostileRequestsAreRefusedNamingTheField) {
  StoreService s;
  const auto now = Clock::now();
  const std::vector<std::pair<Json, std::string>> bad = {
      {request(1, "set", {{"key", "k"}, {"value", "xyz"}}), "\"value\" is not hex"},
      {request(1, "set", {{"key", "k"}, {"value", std::string(2 * kMaxStoreValue + 2, 'a')}}), "more than the 16384"},
      {request(1, "set", {{"key", std::string(kMaxStoreKey + 1, 'k')}, {"value", ""}}), "\"key\" must be 1 to 512 bytes"},
      {request(1, "set", {{"key", ""}, {"value", ""}}), "\"key\" must be 1 to 512 bytes"},
      {request(1, "set", {{"key", 5}, {"value", ""}}), "\"key\" must be a string"},
      {request(1, "get", {{"key", "k"}, {"timeout_ms", -1}}), "\"timeout_ms\" must be a whole number from 0 to 3600000"},
      {request(1, "get", {{"key", "k"}}), "\"timeout_ms\""},
      {request(1, "add", {{"key", "k"}, {"amount", 1.5}}), "\"amount\" must be a whole number"},
      {request(1, "wait", {{"keys", "k"}, {"timeout_ms", 1}}), "\"keys\" must be an array"},
      {request(1, "watch", {{"key", "k"}}), "unknown op \"watch\""},
      {Json{{"type", "store"}, {"op", "num_keys"}}, "\"id\" must be a whole number"},
  };
  for (const auto& [r, message] : bad) {
    const Json reply = only(s.handle("w0", r, now));
    EXPECT_FALSE(reply["ok"]) << r.dump();
    EXPECT_NE(reply["error"].get<std::string>().find(message), std::string::npos) << reply.dump();
  }
  EXPECT_EQ(s.size(), 0u);  // nothing stored by any of them

  // A value that is not a number cannot be added to; an add that would overflow is refused.
  s.handle("w0", request(2, "set", {{"key", "text"}, {"value", toHex("abc")}}), now);
  EXPECT_NE(only(s.handle("w0", request(3, "add", {{"key", "text"}, {"amount", 1}}), now))["error"].get<std::string>().find(
                "not a number"),
            std::string::npos);
  s.handle("w0", request(4, "set", {{"key", "big"}, {"value", toHex(std::to_string(INT64_MAX - 1))}}), now);
  EXPECT_NE(only(s.handle("w0", request(5, "add", {{"key", "big"}, {"amount", 2}}), now))["error"].get<std::string>().find(
                "overflows"),
            std::string::npos);
}

}  // namespace
}  // namespace hydrozoa::wire
