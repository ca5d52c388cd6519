// The report library on run directories built here from small files: every
// series is loaded and drawn, several runs overlay with a legend each, and a
// partial or foreign directory gives a partial report or one clear error.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "core/files.h"
#include "plan/plan.h"
#include "report/html.h"
#include "report/run_report.h"
#include "report/stage_timing.h"
#include "report/svg_chart.h"
#include "report/text.h"

namespace hydrozoa::report {
namespace {

namespace fs = std::filesystem;

// A 2×2 plan of a 4-layer model: 4 microbatches of 16; stage 0 predicts
// 4 × (1 + 2) ms of compute per step, stage 1 4 × (2 + 4) ms.
plan::Plan fixturePlan() {
  plan::Plan p;
  p.model = "cnn";
  p.layer_names = {"conv1", "conv2", "fc1", "fc2"};
  p.data_parallel = 2;
  p.pipeline_stages = 2;
  p.microbatch_size = 16;
  p.num_microbatches = 4;
  plan::PlanStage s0, s1;
  s0.first_layer = 0, s0.last_layer = 0, s0.forward_seconds = 0.001, s0.backward_seconds = 0.002;
  s0.allreduce_seconds = 0.0008, s0.allreduce_exposed_seconds = 0.0005, s0.update_seconds = 0.04;
  s0.memory_bytes = 1000000, s0.worker = "1 vCPU, 2.00 GB";
  s1.first_layer = 1, s1.last_layer = 3, s1.forward_seconds = 0.002, s1.backward_seconds = 0.004;
  s1.allreduce_seconds = 0.005, s1.allreduce_exposed_seconds = 0.003;
  s1.memory_bytes = 2000000, s1.worker = "1 vCPU, 2.00 GB";
  p.stages = {s0, s1};
  p.iteration_seconds = 0.03;
  p.samples_per_second = 4266;
  p.workers = 4;
  p.objective = "fastest";
  p.platform = "aci";
  plan::PlanAlternative a, b, c;
  a.data_parallel = 4, a.pipeline_stages = 1, a.microbatch_size = 32, a.num_microbatches = 1, a.feasible = true;
  a.iteration_seconds = 0.04, a.note = "slower";
  b.data_parallel = 2, b.pipeline_stages = 2, b.microbatch_size = 16, b.num_microbatches = 4, b.feasible = true;
  b.chosen = true, b.iteration_seconds = 0.03;
  c.data_parallel = 1, c.pipeline_stages = 4, c.feasible = false, c.note = "needs 5 layers";
  p.alternatives = {a, b, c};
  return p;
}

class RunFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("hzreport." + std::to_string(::getpid()) + "." +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  static void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  // A complete run: 10 steps, an evaluation, a lost worker and its
  // recovery, a change of replicas, a summary and a trace.
  std::string completeRun(const std::string& name, double lossScale = 1) const {
    const fs::path dir = root_ / name;
    write(dir / "job.yaml", "name: job-" + name + "\nmodel: {name: cnn}\n");
    EXPECT_TRUE(plan::savePlan(fixturePlan(), (dir / "plan.json").string()).ok());
    std::string m;
    for (int k = 1; k <= 10; ++k) {
      m += Json({{"t", 0.1 * k}, {"epoch", k <= 5 ? 1 : 2}, {"step", k}, {"loss", lossScale * (2.0 - 0.1 * k)},
                 {"samples_per_s", 1000 + 10 * k}, {"workers", k <= 6 ? 4 : 2}, {"cost_usd", 0.001 * k}})
               .dump() +
           "\n";
      if (k == 5) {
        m += R"({"t": 0.55, "epoch": 1, "test_loss": 0.9, "test_accuracy": 0.75, "cost_usd": 0.0055})" "\n";
      }
      if (k == 3) {
        m += R"({"t": 0.32, "event": "worker_lost", "generation": 0, "worker": 3, "why": "worker 3 killed by signal 9", "steps_completed": 3})" "\n";
        m += R"({"event": "recovered", "generation": 1, "worker": 3, "why": "worker 3 killed", "lost_at": 0.32, "restored_from": "live replicas", "restore_step": 3, "lost_steps": 0, "seconds_to_training": 0.05})" "\n";
      }
      if (k == 6) {
        m += R"({"t": 0.65, "event": "scaled", "epoch": 2, "step": 6, "replicas_before": 2, "replicas": 1, "workers": 2, "global_batch": 64, "why": "schedule"})" "\n";
      }
    }
    m += R"({"t": 1.1, "epoch": 2, "test_loss": 0.7, "test_accuracy": 0.8125, "cost_usd": 0.011})" "\n";
    write(dir / "metrics.jsonl", m);
    write(dir / "summary.json", R"({"status": "completed", "reason": "", "model": "cnn",
      "steps": {"done": 10, "total": 10, "this_run": 10}, "epochs_completed": 2, "generations": 2,
      "samples": 640, "final_loss": 1.0, "final_test_accuracy": 0.8125, "final_test_loss": 0.7,
      "wall_seconds": 3.5, "training_seconds": 1.1, "throughput_samples_per_s": 1050.25,
      "iteration_seconds": {"measured_median": 0.036, "predicted": 0.03, "relative_error": 0.2},
      "bubble_fraction": {"measured_median": 0.3, "predicted": 0.25},
      "cost_usd": 0.011, "samples_per_dollar": 58181.8,
      "scaling": {"policy": "schedule", "segments": [], "events": []}, "launcher": {"kind": "local"}})");
    write(dir / "trace.json", traceJson().dump());
    return dir.string();
  }

  // Workers 0, 1: stage 0; 2, 3: stage 1. Stage 0 computes 10 ms per step
  // (median of 9, 10, 30 ms); stage 1's workers 20 and 24 ms. Stage 1's
  // buckets start 1 ms before its last backward ends and the last ends 2 ms
  // after it: 2 ms of allreduce per step that the compute did not hide.
  static Json traceJson() {
    Json events = Json::array();
    const int stage[] = {0, 0, 1, 1};
    for (int w = 0; w < 4; ++w) {
      events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", w},
                        {"args", {{"name", fmt::format("worker {} (replica {}, stage {})", w, w % 2, stage[w])}}}});
    }
    auto span = [&](int pid, const std::string& name, const char* cat, double tsUs, double durUs, int step) {
      Json e = {{"name", name}, {"cat", cat}, {"ph", "X"}, {"pid", pid}, {"tid", 0}, {"ts", tsUs}, {"dur", durUs}};
      if (step >= 0) e["args"] = {{"step", step}};
      events.push_back(e);
    };
    const double stage0[] = {9000, 10000, 30000};
    for (int w = 0; w < 2; ++w) {
      for (int step = 0; step < 3; ++step) {
        const double at = 100000.0 * step;
        span(w, "forward mb0", "compute", at, stage0[step] / 2, step);
        span(w, "backward mb0", "compute", at + stage0[step] / 2, stage0[step] / 2, step);
        span(w, "optimizer step", "compute", at + stage0[step], 50000, step);  // not the pipeline's compute
      }
    }
    for (int w = 2; w < 4; ++w) {
      const double forward = w == 2 ? 8000 : 10000, backward = w == 2 ? 12000 : 14000;
      for (int step = 0; step < 3; ++step) {
        const double at = 100000.0 * step, backwardEnd = at + forward + backward;
        span(w, "forward mb0", "compute", at, forward, step);
        span(w, "backward mb0", "compute", at + forward, backward, step);
        span(w, "allreduce bucket 0", "allreduce", backwardEnd - 1000, 1500, -1);
        span(w, "allreduce bucket 1", "allreduce", backwardEnd - 1000, 3000, -1);
      }
    }
    return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  }

  fs::path root_;
};

TEST_F(RunFixture, LoadsEverySeriesEventAndTheOutcome) {
  auto run = loadRunReport(completeRun("a"));
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->label, "a");
  EXPECT_EQ(run->job_name, "job-a");
  EXPECT_EQ(run->model, "cnn");
  EXPECT_EQ(run->status(), "completed");
  ASSERT_EQ(run->steps.size(), 10u);
  EXPECT_DOUBLE_EQ(run->steps[2].loss, 1.7);
  EXPECT_EQ(run->steps[9].workers, 2);
  EXPECT_DOUBLE_EQ(*run->steps[9].samples_per_second, 1100);
  ASSERT_EQ(run->evals.size(), 2u);
  EXPECT_DOUBLE_EQ(run->evals[1].test_accuracy, 0.8125);
  ASSERT_EQ(run->events.size(), 3u);
  EXPECT_EQ(run->events[0].kind, "worker_lost");
  EXPECT_EQ(run->events[0].label, "lost worker 3");
  EXPECT_EQ(run->events[1].kind, "recovered");
  EXPECT_NEAR(run->events[1].t, 0.37, 1e-9);  // lost at 0.32, training again 0.05 s later
  EXPECT_EQ(run->events[2].label, "2 \u2192 1 replicas");
  EXPECT_NE(run->events[2].detail.find("global batch 64"), std::string::npos);
  ASSERT_TRUE(run->outcome);
  EXPECT_DOUBLE_EQ(*run->outcome->throughput, 1050.25);
  EXPECT_DOUBLE_EQ(*run->outcome->iteration_predicted, 0.03);
  ASSERT_TRUE(run->plan);
  EXPECT_EQ(run->plan->alternatives.size(), 3u);
  EXPECT_TRUE(run->notes.empty()) << run->notes.front();
}

TEST_F(RunFixture, StageTimesArePredictedFromThePlanAndMeasuredFromTheTrace) {
  const plan::Plan p = fixturePlan();
  const auto stages = stageTimingsFromTrace(traceJson(), &p);
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_NEAR(*stages[0].predicted_compute, 0.012, 1e-12);
  EXPECT_NEAR(*stages[1].predicted_compute, 0.024, 1e-12);
  EXPECT_NEAR(*stages[0].measured_compute, 0.010, 1e-12);  // the median, not the 30 ms outlier
  EXPECT_NEAR(*stages[1].measured_compute, 0.022, 1e-12);  // mean of the replicas' 20 and 24 ms
  EXPECT_EQ(stages[1].workers_traced, 2);
  EXPECT_EQ(stages[1].steps_traced, 3);
  EXPECT_FALSE(stages[0].measured_allreduce);
  EXPECT_NEAR(*stages[1].measured_allreduce, 0.002, 1e-12);
  EXPECT_NEAR(*stages[1].predicted_allreduce, 0.003, 1e-12);
  EXPECT_EQ(*stages[1].first_layer, 1);
  EXPECT_EQ(*stages[1].last_layer, 3);
  EXPECT_NEAR(*stages[0].predicted_update, 0.04, 1e-12);  // the plan's update_seconds
  EXPECT_NEAR(*stages[0].measured_update, 0.05, 1e-12);   // its "optimizer step" spans
  EXPECT_FALSE(stages[1].predicted_update);               // planned without one
  EXPECT_FALSE(stages[1].measured_update);                // and not traced

  // Without a trace: predictions only; without a plan: measurements only.
  const auto planned = stageTimingsFromTrace(Json::object(), &p);
  ASSERT_EQ(planned.size(), 2u);
  EXPECT_FALSE(planned[0].measured_compute);
  const auto measured = stageTimingsFromTrace(traceJson(), nullptr);
  ASSERT_EQ(measured.size(), 2u);
  EXPECT_FALSE(measured[0].predicted_compute);
  EXPECT_TRUE(measured[0].measured_compute);
}

// Every series of every run, as the page marks them.
bool hasSeries(const std::string& html, const std::string& run, const std::string& series) {
  return html.find("data-run=\"" + run + "\" data-series=\"" + series + "\"") != std::string::npos;
}

TEST_F(RunFixture, TheHtmlHoldsEveryRunsSeriesOverlaidWithALegend) {
  std::vector<RunReport> runs;
  for (const char* name : {"a", "b"}) {
    auto run = loadRunReport(completeRun(name, name[0] == 'a' ? 1.0 : 0.5));
    ASSERT_TRUE(run.ok()) << run.status().message();
    runs.push_back(std::move(*run));
  }
  labelRuns(runs);
  const std::string html = renderHtmlReport(runs);
  for (const char* run : {"a", "b"}) {
    for (const char* series : {"loss", "test_accuracy", "samples_per_s", "workers", "cost_usd",
                               "stage_compute_predicted", "stage_compute_measured", "stage_allreduce_predicted",
                               "stage_allreduce_measured"}) {
      EXPECT_TRUE(hasSeries(html, run, series)) << run << " " << series;
    }
    EXPECT_NE(html.find("<section class=\"run\" data-run=\"" + std::string(run) + "\""), std::string::npos);
  }
  // Overlaid: each time chart holds both runs' lines, in the runs' colours, with a legend entry each.
  const auto chart = html.find("id=\"chart-loss\"");
  ASSERT_NE(chart, std::string::npos);
  const std::string loss = html.substr(chart, html.find("</svg>", chart) - chart);
  EXPECT_TRUE(hasSeries(loss, "a", "loss"));
  EXPECT_TRUE(hasSeries(loss, "b", "loss"));
  EXPECT_NE(loss.find(runColor(0)), std::string::npos);
  EXPECT_NE(loss.find(runColor(1)), std::string::npos);
  std::smatch m;
  const std::regex legend("class=\"legend-item\"");
  EXPECT_EQ(std::distance(std::sregex_iterator(loss.begin(), loss.end(), legend), std::sregex_iterator()), 2);
  // Axes with units; the events as markers; the plan and its alternatives.
  EXPECT_NE(loss.find("training time (s)"), std::string::npos);
  EXPECT_NE(html.find("samples/s"), std::string::npos);
  EXPECT_NE(html.find("cost (US$)"), std::string::npos);
  EXPECT_NE(html.find("lost worker 3"), std::string::npos);
  EXPECT_NE(html.find("2 \u2192 1 replicas"), std::string::npos);
  EXPECT_NE(html.find("class=\"chosen\""), std::string::npos);
  EXPECT_NE(html.find("infeasible: needs 5 layers"), std::string::npos);
  // Self-contained: nothing to fetch, no script.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
}

TEST_F(RunFixture, RunsWithTheSameNameGetTheirParentsInTheLegend) {
  std::vector<RunReport> runs;
  for (const char* parent : {"x", "y"}) {
    const std::string dir = completeRun(std::string(parent) + "/run");
    auto run = loadRunReport(dir);
    ASSERT_TRUE(run.ok());
    runs.push_back(std::move(*run));
  }
  labelRuns(runs);
  EXPECT_EQ(runs[0].label, "x/run");
  EXPECT_EQ(runs[1].label, "y/run");
  const std::string html = renderHtmlReport(runs);
  EXPECT_TRUE(hasSeries(html, "x/run", "loss"));
  EXPECT_TRUE(hasSeries(html, "y/run", "loss"));
}

TEST_F(RunFixture, TextAndJsonSayTheSame) {
  auto run = loadRunReport(completeRun("a"));
  ASSERT_TRUE(run.ok());
  const std::string text = renderRunText(*run);
  for (const char* s : {"completed", "2×2 (2 replicas × 2 stages), 4 microbatches of 16", "1,050 samples/s",
                        "36.0 ms measured (median), 30.0 ms predicted (+20%)", "81.25% after epoch 2", "Evaluations",
                        "lost worker 3", "recovered from live replicas", "2 → 1 replicas",
                        "Time per step by stage", "10.0 ms", "-17%", "schedule, 1 change of replicas"}) {
    EXPECT_NE(text.find(s), std::string::npos) << s << "\n" << text;
  }
  const Json j = runReportToJson(*run);
  EXPECT_EQ(j["steps"].size(), 10u);
  EXPECT_EQ(j["evals"].size(), 2u);
  EXPECT_EQ(j["events"][2]["event"], "scaled");
  EXPECT_EQ(j["events"][2]["fields"]["replicas"], 1);
  EXPECT_EQ(j["plan"]["schema"], plan::kPlanSchema);
  EXPECT_EQ(j["stages"][1]["measured_compute_seconds"], 0.022);
  EXPECT_EQ(j["outcome"]["status"], "completed");
  EXPECT_TRUE(Json::parse(j.dump()) == j);
}

// Stages replicated unevenly: each stage's copies and the step's microbatches.
TEST(DescribePlan, StagesReplicatedUnevenly) {
  plan::Plan p = fixturePlan();
  EXPECT_EQ(describePlan(p), "2×2 (2 replicas × 2 stages), 4 microbatches of 16, global batch 128");
  p.stages[1].replicas = 1;
  EXPECT_EQ(describePlan(p),
            "2 stages replicated 2, 1 (3 workers), 8 microbatches of 16 a step dealt round-robin, global batch 128");
}

TEST_F(RunFixture, ARunThatEndedEarlyGivesAPartialReport) {
  // The coordinator was killed after two steps, mid-line: no summary, no trace.
  const fs::path dir = root_ / "early";
  write(dir / "job.yaml", "name: early\nmodel: mlp\n");
  write(dir / "metrics.jsonl", R"({"t": 0.1, "epoch": 1, "step": 1, "loss": 2.3, "samples_per_s": 100, "workers": 2, "cost_usd": 0})"
                               "\n"
                               R"({"t": 0.2, "epoch": 1, "step": 2, "loss": 2.2, "samples_per_s": 110, "workers": 2, "cost_usd": 0})"
                               "\n"
                               R"({"t": 0.3, "epoch": 1, "st)");
  auto run = loadRunReport(dir.string());
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->model, "mlp");
  EXPECT_EQ(run->status(), "unfinished");
  EXPECT_EQ(run->steps.size(), 2u);
  std::string notes;
  for (const auto& n : run->notes) notes += n + "\n";
  for (const char* s : {"cut short", "no summary.json", "no plan.json", "no trace.json"}) {
    EXPECT_NE(notes.find(s), std::string::npos) << s << "\n" << notes;
  }
  const std::string html = renderHtmlReport({*run});
  EXPECT_TRUE(hasSeries(html, "early", "loss"));
  EXPECT_NE(html.find("no summary.json"), std::string::npos);
  EXPECT_NE(renderRunText(*run).find("unfinished"), std::string::npos);

  // Failed before its first step: the files it has, and charts saying so.
  const fs::path failed = root_ / "failed";
  write(failed / "job.yaml", "name: failed\nmodel: mlp\n");
  write(failed / "summary.json", R"({"status": "failed", "reason": "worker 1 failed: out of memory"})");
  run = loadRunReport(failed.string());
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(run->status(), "failed");
  EXPECT_TRUE(run->steps.empty());
  EXPECT_NE(renderHtmlReport({*run}).find("no data in these runs yet"), std::string::npos);
  EXPECT_NE(renderRunText(*run).find("failed: worker 1 failed: out of memory"), std::string::npos);
}

TEST_F(RunFixture, APathThatIsNotARunDirectorySaysWhatItIs) {
  auto r = loadRunReport((root_ / "nowhere").string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.status().message().find("no such directory"), std::string::npos) << r.status().message();

  const std::string run = completeRun("a");
  r = loadRunReport(run + "/summary.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is a file of a run directory; give the directory: " + run), std::string::npos)
      << r.status().message();

  write(root_ / "notes.txt", "hello");
  r = loadRunReport((root_ / "notes.txt").string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is a file, not a run directory"), std::string::npos) << r.status().message();

  fs::create_directories(root_ / "empty");
  r = loadRunReport((root_ / "empty").string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a run directory: it holds none of job.yaml"), std::string::npos)
      << r.status().message();
}

TEST_F(RunFixture, ACorruptFileIsAnErrorNamingIt) {
  const std::string run = completeRun("a");
  write(fs::path(run) / "summary.json", R"({"status": "comp)");
  auto r = loadRunReport(run);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("summary.json"), std::string::npos) << r.status().message();

  const std::string other = completeRun("b");
  write(fs::path(other) / "metrics.jsonl", "{\"t\": 1, \"step\": 1, \"loss\": 1}\nnot json\n{\"t\": 2}\n");
  r = loadRunReport(other);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("metrics.jsonl:2: not a JSON object"), std::string::npos)
      << r.status().message();

  // A broken trace only costs the measured stage times.
  const std::string third = completeRun("c");
  write(fs::path(third) / "trace.json", "{\"traceEvents\": [");
  r = loadRunReport(third);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->stages.size(), 2u);
  EXPECT_FALSE(r->stages[0].measured_compute);
  ASSERT_FALSE(r->notes.empty());
  EXPECT_NE(r->notes.back().find("trace.json skipped"), std::string::npos);
}

TEST(SvgChart, AxesHaveNiceTicksWithUnitsAndLongSeriesAreThinned) {
  LineChart c;
  c.id = "t";
  c.title = "Cost";
  c.x_label = "training time (s)";
  c.y_label = "cost (US$)";
  c.y_format = AxisFormat::kUsd;
  ChartSeries s;
  s.run = "r<1>";
  s.series = "cost_usd";
  s.color = "#000";
  for (int i = 0; i <= 5000; ++i) {
    s.x.push_back(i * 0.01);
    s.y.push_back(i * 0.00001);
  }
  thinSeries(s.x, s.y, 100);
  EXPECT_EQ(s.x.size(), 100u);
  EXPECT_NEAR(s.y.back() / s.x.back(), 0.001, 1e-9);  // averaging keeps the line
  c.series.push_back(s);
  const std::string svg = renderLineChart(c);
  for (const char* tick : {">$0.00<", ">$0.01<", ">$0.05<", ">0<", ">10<", ">50<"}) {
    EXPECT_NE(svg.find(tick), std::string::npos) << tick << "\n" << svg;
  }
  EXPECT_NE(svg.find("data-run=\"r&lt;1&gt;\""), std::string::npos);  // escaped
  EXPECT_EQ(svg.find("r<1>"), std::string::npos);

  EXPECT_EQ(formatValue(0.9101, AxisFormat::kPercent), "91.01%");
  EXPECT_EQ(formatValue(0.045, AxisFormat::kSeconds), "45.0 ms");
  EXPECT_EQ(escapeHtml("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
}

}  // namespace
}  // namespace hydrozoa::report
