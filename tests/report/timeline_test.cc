// The pipeline timeline (report/timeline.h) from a small trace.json.
#include "report/timeline.h"

#include <gtest/gtest.h>

#include <regex>

namespace hydrozoa::report {
namespace {

Json span(int pid, const std::string& name, double ts, double dur, std::int64_t step) {
  return {{"ph", "X"}, {"cat", "compute"}, {"pid", pid}, {"tid", 0}, {"name", name},
          {"ts", ts},  {"dur", dur},       {"args", {{"step", step}}}};
}

Json trace() {
  Json events = Json::array();
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"args", {{"name", "worker 1 (stage 1)"}}}});
  // Step 3 on two workers (1F1B on two stages, one microbatch of chunk 1), and step 4.
  events.push_back(span(0, "forward mb0", 1000, 100, 3));
  events.push_back(span(1, "forward mb0", 1200, 100, 3));
  events.push_back(span(1, "backward mb0 c1", 1300, 200, 3));
  events.push_back(span(0, "backward mb0", 1600, 200, 3));
  events.push_back(span(0, "optimizer step", 1800, 50, 3));
  events.push_back(span(0, "forward mb0", 5000, 100, 4));
  events.push_back({{"ph", "X"}, {"cat", "activation"}, {"pid", 0}, {"name", "send act mb0"}, {"ts", 1100},
                    {"dur", 10}, {"args", {{"peer", 1}}}});
  return {{"traceEvents", events}};
}

TEST(Timeline, TheStepsComputeSpansOneLanePerWorker) {
  auto t = timelineFromTrace(trace(), 3);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->lanes.size(), 2u);
  EXPECT_EQ(t->lanes[0], "worker 0");
  EXPECT_EQ(t->lanes[1], "worker 1 (stage 1)");
  ASSERT_EQ(t->spans.size(), 5u);
  EXPECT_DOUBLE_EQ(t->end_ms, 0.85);  // from 1000 µs to 1850 µs
  int backwardChunk1 = 0;
  for (const TimelineSpan& s : t->spans) {
    if (s.kind == TimelineSpan::Kind::kBackward && s.chunk == 1 && s.lane == 1) ++backwardChunk1;
  }
  EXPECT_EQ(backwardChunk1, 1);
  const std::string svg = renderTimeline(*t, "a <test>");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("a &lt;test&gt;"), std::string::npos);
  const std::regex rect("<g class=\"span\">");
  EXPECT_EQ(std::distance(std::sregex_iterator(svg.begin(), svg.end(), rect), std::sregex_iterator()), 5);
  EXPECT_NE(svg.find("backward mb0 chunk 1"), std::string::npos);
}

// A range of steps: step 4's forward joins step 3's spans, paler.
TEST(Timeline, ARangeOfSteps) {
  auto t = timelineFromTrace(trace(), 3, 4);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->spans.size(), 6u);
  EXPECT_EQ(t->last_step, 4);
  int ofStep4 = 0;
  for (const TimelineSpan& s : t->spans) ofStep4 += s.step == 4;
  EXPECT_EQ(ofStep4, 1);
  const std::string svg = renderTimeline(*t, "range");
  EXPECT_NE(svg.find("fill-opacity=\"0.55\" stroke=\"white\" stroke-width=\"0.5\"><title>step 4 forward mb0"),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find("paler: every other step"), std::string::npos);
}

TEST(Timeline, AStepNotTracedIsAClearError) {
  auto t = timelineFromTrace(trace(), 9);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("no compute spans of step 9"), std::string::npos);
  EXPECT_FALSE(timelineFromTrace(Json::array(), 0).ok());
}

}  // namespace
}  // namespace hydrozoa::report
