#include "core/files.h"

#include <gtest/gtest.h>
#include <unistd.h>

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
