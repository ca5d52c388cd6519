// Injected stragglers and FlexRR's settings in a job spec and on the
// command line (cluster/stragglers.h): every form parses, round-trips
// through job.yaml, and every bad value is one error naming it.
#include "cluster/stragglers.h"

#include <gtest/gtest.h>

#include "cluster/job_spec.h"
#include "cluster/job_yaml.h"

namespace hydrozoa::cluster {
namespace {

TEST(Stragglers, TheCommandLineForms) {
  auto s = parseStragglers("worker=1,slowdown=3x", "--stragglers");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->size(), 1u);
  EXPECT_EQ((*s)[0].worker, 1);
  EXPECT_DOUBLE_EQ((*s)[0].slowdown, 3);
  EXPECT_EQ((*s)[0].mode, "auto");
  EXPECT_EQ((*s)[0].duration, 0);  // persistent

  s = parseStragglers("worker=0, slowdown=200%, mode=pause, start=10s, for=30s; worker=2,pause=200ms,every=2s",
                      "--stragglers");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_DOUBLE_EQ((*s)[0].slowdown, 3);  // a 200% delay
  EXPECT_EQ((*s)[0].mode, "pause");
  EXPECT_DOUBLE_EQ((*s)[0].start, 10);
  EXPECT_DOUBLE_EQ((*s)[0].duration, 30);
  EXPECT_DOUBLE_EQ((*s)[1].pause, 0.2);
  EXPECT_DOUBLE_EQ((*s)[1].every, 2);
  // Formatted and parsed again: the same.
  for (const StragglerSpec& x : *s) {
    auto back = parseStragglers(formatStraggler(x), "x");
    ASSERT_TRUE(back.ok()) << formatStraggler(x) << ": " << back.status().message();
    EXPECT_EQ(formatStraggler((*back)[0]), formatStraggler(x));
  }
}

TEST(Stragglers, BadFormsAreOneErrorNamingTheProblem) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "no straggler given"},
      {"slowdown=3x", "names no worker"},
      {"worker=1", "says nothing to do"},
      {"worker=1,slowdown=1x", "says nothing to do"},
      {"worker=1,slowdown=0.5", "more than 1x"},
      {"worker=1,slowdown=1000x", "at most 100x"},
      {"worker=1,slowdown=abc", "is not a slowdown"},
      {"worker=1,slowdown=nan", "is not a slowdown"},
      {"worker=-1,slowdown=3x", "worker"},
      {"worker=99999999999,slowdown=3x", "out of range"},
      {"worker=1,slowdown=3x,mode=turbo", "mode \"turbo\""},
      {"worker=1,slowdown=3x,pause=1s,every=2s", "either a slowdown or random pauses"},
      {"worker=1,pause=1s", "need both pause"},
      {"worker=1,pause=1s,every=2s,mode=quota", "SIGSTOP bursts"},
      {"worker=1,slowdown=3x,speed=2", "unknown key \"speed\""},
      {"worker=1,slowdown", "is not key=value"},
      {"worker=1,slowdown=3x,start=-5s", "start"},
  };
  for (const auto& [text, want] : bad) {
    auto s = parseStragglers(text, "--stragglers");
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_NE(s.status().message().find(want), std::string::npos) << text << ": " << s.status().message();
    EXPECT_NE(s.status().message().find("--stragglers"), std::string::npos) << s.status().message();
  }
}

TEST(Stragglers, AJobSpecsStragglersAndFlexrrRoundTrip) {
  auto s = parse(R"(
model: cnn
cluster:
  workers: 4
  stragglers:
    - {worker: 1, slowdown: 3x, mode: sleep, start: 5s, for: 20s}
    - worker=3,pause=100ms,every=1s
flexrr: {helper_group: 2, threshold: 30%, report_at: 0.5}
)");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->stragglers.size(), 2u);
  EXPECT_EQ(s->stragglers[0].mode, "sleep");
  EXPECT_DOUBLE_EQ(s->stragglers[0].duration, 20);
  EXPECT_EQ(s->stragglers[1].worker, 3);
  EXPECT_TRUE(s->flexrr.enabled);
  EXPECT_EQ(s->flexrr.helper_group, 2);
  EXPECT_DOUBLE_EQ(s->flexrr.threshold, 0.3);
  EXPECT_DOUBLE_EQ(s->flexrr.report_at, 0.5);
  EXPECT_DOUBLE_EQ(s->flexrr.initial, 0.025);  // the thesis's defaults for the rest
  auto again = parseJobSpec(jobSpecToJson(*s), "job.yaml (resolved)");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(jobSpecToJson(*again), jobSpecToJson(*s));

  auto on = parse("model: cnn\nflexrr: true\n");
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(on->flexrr.enabled);
  auto off = parse("model: cnn\n");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->flexrr.enabled);
}

TEST(Stragglers, AJobSpecsBadStragglersAndFlexrrNameTheField) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"cluster: {workers: 4, stragglers: [\"worker=4,slowdown=3x\"]}", "worker 4 does not exist: the job's workers are 0 to 3"},
      {"cluster: {workers: 4, stragglers: \"worker=1,slowdown=3x; worker=1,slowdown=2x\"}", "worker 1 is named twice"},
      {"cluster: {workers: 4, stragglers: [{worker: 1}]}", "says nothing to do"},
      {"cluster: {workers: 4, stragglers: [{worker: 1, slowdown: 2, color: red}]}", "unknown key \"color\""},
      {"cluster: {workers: 4, stragglers: 7}", "expected a list of stragglers"},
      {"flexrr: {helper_group: 0}", "helper_group"},
      {"flexrr: {threshold: 2}", "threshold"},
      {"flexrr: {report_at: 0}", "report_at"},
      {"flexrr: {initial: -1}", "initial"},
      {"flexrr: {speed: 1}", "unknown key \"speed\""},
      {"flexrr: maybe", "flexrr"},
  };
  for (const auto& [yaml, want] : bad) {
    auto s = parse("model: cnn\n" + yaml + "\n");
    ASSERT_FALSE(s.ok()) << yaml;
    EXPECT_NE(s.status().message().find(want), std::string::npos) << yaml << ": " << s.status().message();
  }
}

}  // namespace
}  // namespace hydrozoa::cluster
