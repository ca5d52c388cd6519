#include "core/files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

namespace hydrozoa {
namespace {

std::string tempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "." + std::to_string(::getpid()))).string();
}

TEST(ReadJsonFile, MissingFileIsNotFound) {
  auto r = readJsonFile("/nonexistent/p.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/p.json"), std::string::npos);
}

TEST(ReadJsonFile, TruncatedFileSaysSoWithLine) {
  const std::string path = tempPath("trunc.json");
  ASSERT_TRUE(writeFileAtomically(path, "{\n  \"a\": [1, 2,\n").ok());
  auto r = readJsonFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kParseError);
  EXPECT_NE(r.status().message().find(path), std::string::npos);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos);
  std::remove(path.c_str());
}

TEST(ReadJsonFile, EmptyFile) {
  const std::string path = tempPath("empty.json");
  ASSERT_TRUE(writeFileAtomically(path, "").ok());
  auto r = readJsonFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("empty"), std::string::npos);
  std::remove(path.c_str());
}

TEST(WriteFileAtomically, ReplacesWholeFile) {
  const std::string path = tempPath("atomic.txt");
  ASSERT_TRUE(writeFileAtomically(path, "first version, long").ok());
  ASSERT_TRUE(writeFileAtomically(path, "second").ok());
  EXPECT_EQ(*readTextFile(path), "second");
  std::remove(path.c_str());
}

TEST(WriteFileAtomically, UnwritableDirectoryIsAnError) {
  EXPECT_FALSE(writeFileAtomically("/nonexistent-dir/x.json", "{}").ok());
}

TEST(ParseYaml, ScalarsBecomeTypedValues) {
  auto r = parseYaml("a: 1\nb: 2.5\nc: true\nd: hello\ne: \"7\"\nf: [1, x]\ng: ~\n", "t.yaml");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Json& j = *r;
  EXPECT_TRUE(j["a"].is_number_integer());
  EXPECT_DOUBLE_EQ(j["b"].get<double>(), 2.5);
  EXPECT_TRUE(j["c"].get<bool>());
  EXPECT_EQ(j["d"], "hello");
  EXPECT_TRUE(j["e"].is_string());
  EXPECT_EQ(j["f"][1], "x");
  EXPECT_TRUE(j["g"].is_null());
}

TEST(ToYaml, RoundTripsThroughParseYaml) {
  const Json j = {{"name", "job"}, {"n", 3}, {"x", 0.5}, {"flag", true}, {"digits", "32"}, {"list", {1, 2}},
                  {"nested", {{"a", "b"}, {"none", nullptr}}}};
  auto back = parseYaml(toYaml(j), "t.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, j);
}

TEST(ParseYaml, SyntaxErrorHasLine) {
  auto r = parseYaml("a: [1, 2\nb: 3\n", "job.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("job.yaml"), std::string::npos);
  EXPECT_NE(r.status().message().find("line"), std::string::npos);
}

// Issue 53 §3: inputs that recursed without bound or expanded without
// limit (a segmentation fault, a hang) are one clear error each.
TEST(ParseYaml, AnAliasThatContainsItselfIsRefused) {
  auto r = parseYaml("name: x\nmodel: &a [1, *a]\n", "job.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("job.yaml: refused at line 2"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("nested more than 64 deep"), std::string::npos) << r.status().message();
  r = parseYaml("a: &a {b: *a}\n", "c.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("an alias that contains itself"), std::string::npos) << r.status().message();
}

TEST(ParseYaml, ABillionLaughsIsRefusedAtAMillionValues) {
  std::string yaml = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  std::string prev = "a";
  for (const char* name : {"b", "c", "d", "e", "f", "g", "h", "i"}) {
    yaml += std::string(name) + ": &" + name + " [";
    for (int i = 0; i < 10; ++i) yaml += (i ? ", *" : "*") + prev;
    yaml += "]\n";
    prev = name;
  }
  const auto start = std::chrono::steady_clock::now();
  auto r = parseYaml(yaml, "catalog.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("expand to more than 1000000 values"), std::string::npos)
      << r.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // Aliases used as people use them are fine.
  auto ok = parseYaml("base: &b {lr: 0.1, batch: 32}\nruns: [*b, *b, {lr: 0.2}]\n", "sweep.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ((*ok)["runs"][1]["batch"], 32);
}

TEST(ParseYaml, DeepNestingIsRefusedNotRecursed) {
  const int deep = 200000;
  auto r = parseYaml("x: " + std::string(deep, '[') + std::string(deep, ']') + "\n", "deep.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("deep.yaml: lists and maps nested more than"), std::string::npos)
      << r.status().message();
  // Within yaml-cpp's own bound but past ours.
  r = parseYaml("x: " + std::string(100, '[') + std::string(100, ']') + "\n", "deep.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more than 64 deep"), std::string::npos) << r.status().message();
  EXPECT_TRUE(parseYaml("x: " + std::string(60, '[') + std::string(60, ']') + "\n", "ok.yaml").ok());
}

TEST(ParseJson, DeepNestingIsRefusedBeforeParsing) {
  const int deep = 200000;
  const std::string text = "{\"a\": " + std::string(deep, '[') + std::string(deep, ']') + "}";
  auto r = parseJson(text, "p.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "p.json: arrays and objects nested more than 64 deep at line 1, column 70; no hydrozoa file nests "
            "that deep");
  EXPECT_TRUE(parseJsonOrDiscarded(text).is_discarded());
  EXPECT_TRUE(parseJsonOrDiscarded("{\"a\": [1,").is_discarded());
  // Brackets inside strings are text, escaped quotes included.
  const std::string quoted = "{\"a\": \"\\\"" + std::string(1000, '[') + "\"}";
  ASSERT_TRUE(parseJson(quoted, "q.json").ok());
  EXPECT_EQ(parseJsonOrDiscarded(quoted)["a"].get<std::string>().size(), 1001u);
  EXPECT_TRUE(parseJson(std::string(64, '[') + std::string(64, ']'), "ok.json").ok());
  EXPECT_FALSE(parseJson(std::string(65, '[') + std::string(65, ']'), "no.json").ok());
}

TEST(ObjectReader, ReportsFirstBadFieldWithPath) {
  Json j = {{"forward_ms", "fast"}, {"backward_ms", -1}};
  ObjectReader r(j, "p.json: layers[3]");
  r.nonNegative("forward_ms");
  r.nonNegative("backward_ms");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "p.json: layers[3].forward_ms: expected a number, got a string \"fast\"");
}

TEST(ObjectReader, MissingAndRanges) {
  Json j = {{"n", 0}, {"x", 2.0}};
  {
    ObjectReader r(j, "f");
    r.integer("n", 1);
    EXPECT_NE(r.status().message().find("f.n: 0 is out of range; expected a whole number from 1 to "), std::string::npos)
        << r.status().message();
  }
  {
    ObjectReader r(j, "f");
    EXPECT_EQ(r.integer("x"), 2);  // 2.0 is a whole number
    r.string("name");
    EXPECT_NE(r.status().message().find("f.name: missing"), std::string::npos);
  }
}

TEST(ObjectReader, RejectsUnknownKeys) {
  Json j = {{"epochs", 3}, {"lr", 0.1}};
  ObjectReader r(j, "job.yaml: training");
  r.integer("epochs");
  r.optNumber("learning_rate");
  r.rejectUnknownKeys();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown key \"lr\""), std::string::npos);
  EXPECT_NE(r.status().message().find("learning_rate"), std::string::npos);
}

TEST(ObjectReader, NonObject) {
  ObjectReader r(Json::array(), "plan.json");
  EXPECT_FALSE(r.ok());
}

TEST(ObjectReader, IntegersOutOfRangeNameTheFieldAndTheRange) {
  auto j = parseYaml("a: 4294967296\nb: 1e30\nc: nan\nd: 18446744073709551615\ne: 4.0\n", "f.yaml");
  ASSERT_TRUE(j.ok());
  {
    ObjectReader r(*j, "f.yaml");
    (void)r.count("a", kWorkersRange);
    EXPECT_EQ(r.status().message(), "f.yaml.a: 4294967296 is out of range; expected a whole number from 1 to 65,536");
  }
  {
    ObjectReader r(*j, "f.yaml");
    (void)r.count("b", kWorkersRange);
    EXPECT_NE(r.status().message().find("f.yaml.b: 1e+30 is out of range"), std::string::npos) << r.status().message();
  }
  {
    ObjectReader r(*j, "f.yaml");
    (void)r.count("c", kWorkersRange);
    EXPECT_NE(r.status().message().find("f.yaml.c: expected a whole number, got a string"), std::string::npos);
  }
  {
    auto big = parseJson("{\"d\": 18446744073709551615}", "f.json");  // unsigned in JSON
    ObjectReader r(*big, "f.json");
    (void)r.integer("d");
    EXPECT_NE(r.status().message().find("does not fit in a 64-bit whole number"), std::string::npos)
        << r.status().message();
  }
  {
    ObjectReader r(*j, "f.yaml");
    EXPECT_EQ(r.count("e", kWorkersRange), 4);
    EXPECT_TRUE(r.ok());
  }
}

TEST(ObjectReader, UnknownKeysSuggestTheClosestKnownOne) {
  auto j = parseYaml("workers: 2\nbandwith: 3\n", "f.yaml");
  ObjectReader r(*j, "f.yaml");
  (void)r.has("bandwidth");
  (void)r.count("workers", kWorkersRange);
  r.rejectUnknownKeys();
  EXPECT_EQ(r.status().message(),
            "f.yaml: unknown key \"bandwith\"; did you mean \"bandwidth\"? (known keys: bandwidth, workers)");
  EXPECT_EQ(closestName("wrkers", {"workers", "stages"}), "workers");
  EXPECT_EQ(closestName("zzzzzz", {"workers", "stages"}), "");
}

}  // namespace
}  // namespace hydrozoa
