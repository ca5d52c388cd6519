// A job through its handle (cluster/job_handle.h), in this process, with
// real workers: its events, a preemption and a resumption elsewhere (the
// round-based scheduler's two moves, issue 13 §1 and §4), a resize, a
// failure before training.
#include "cluster/job_handle.h"

#include <torch/torch.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "integration/harness.h"
#include "runtime/checkpoint.h"

namespace hydrozoa {
namespace {

using testing::ScratchDir;

// The zoo's CNN on synthetic images, 2 replicas of 2 stages: steps of some
// tens of milliseconds, so that a stop lands some steps ahead (agreedStep).
std::string cnnJob(int epochs, int samples) {
  return "name: handle\n"
         "model: {name: cnn, options: {width: 0.25}}\n"
         "data: {dataset: synthetic, synthetic_train: " + std::to_string(samples) + ", synthetic_test: 64}\n"
         "training: {epochs: " + std::to_string(epochs) + ", global_batch: 32, seed: 3,\n"
         "           optimizer: {name: sgd, lr: 0.05, momentum: 0.9}}\n"
         "cluster: {workers: 4}\n"
         "plan: {data_parallel: 2, stages: 2, microbatches: 2}\n";
}

cluster::TrainOptions optionsFor(const ScratchDir& dir, const std::string& yaml, const std::string& out) {
  std::ofstream(dir / "job.yaml") << yaml;
  auto spec = cluster::loadJobSpec(dir / "job.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  cluster::TrainOptions o;
  o.spec = *spec;
  o.spec.out_dir = dir / out;
  o.executable = HYDROZOA_BINARY;
  o.progress = false;
  return o;
}

// Every event of the job, to its end.
std::vector<Json> drain(cluster::JobHandle& job, const std::function<void(const Json&)>& each = {}) {
  std::vector<Json> events;
  while (!job.ended()) {
    if (auto e = job.nextEvent(0.1)) {
      if (each) each(*e);
      events.push_back(std::move(*e));
    }
  }
  return events;
}

// Every tensor of every layer of a checkpoint, by layer and name.
std::map<std::string, torch::Tensor> weights(const std::string& checkpoint, int layers) {
  std::map<std::string, torch::Tensor> all;
  for (int layer = 0; layer < layers; ++layer) {
    torch::serialize::InputArchive archive;
    archive.load_from(checkpoint + "/" + runtime::layerFileName(layer));
    for (const std::string& key : archive.keys()) {
      torch::Tensor t;
      if (archive.try_read(key, t)) all[std::to_string(layer) + "/" + key] = t;
    }
  }
  return all;
}

std::string finalCheckpoint(const std::string& runDir) {
  std::string name = testing::slurp(runDir + "/checkpoints/latest");
  name.erase(name.find_last_not_of(" \n") + 1);
  return runDir + "/checkpoints/" + name;
}

TEST(JobHandle, AJobPreemptedThreeTimesAndResumedElsewhereEndsAsIfNeverPreempted) {
  REQUIRE_CONTAINERS();  // containers of 1 and ½ vCPU: root
  ScratchDir dir;
  const std::string yaml = cnnJob(1, 6400);  // 200 steps
  {
    auto job = cluster::JobHandle::start(optionsFor(dir, yaml, "whole"));
    drain(*job);
    ASSERT_TRUE(job->wait().ok()) << job->wait().status().message();
  }
  // The same job, preempted some steps after each start and resumed on
  // other workers: containers of 1 CPU, then processes, then containers of
  // half a CPU.
  cluster::TrainOptions o = optionsFor(dir, yaml, "split");
  std::string runDir;
  int preemptions = 0;
  std::vector<std::string> launchers;
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto job = cluster::JobHandle::start(std::move(o));
    std::int64_t first = -1;
    const auto events = drain(*job, [&](const Json& e) {
      if (e["event"] == "running") {
        first = e["step"].get<std::int64_t>();
        launchers.push_back(e["launcher"].get<std::string>());
      }
      if (e["event"] == "step" && preemptions < 3 && first >= 0 && e["step"].get<std::int64_t>() >= first + 2) {
        job->preempt();
      }
    });
    const auto& r = job->wait();
    ASSERT_TRUE(r.ok()) << r.status().message();
    runDir = r->run_dir;
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back()["event"], "finished");
    if (!r->preempted) {
      EXPECT_EQ(events.back()["status"], "completed");
      break;
    }
    EXPECT_EQ(events.back()["status"], "preempted");
    EXPECT_EQ(readJsonFile(runDir + "/summary.json")->value("status", ""), "preempted");
    EXPECT_TRUE(testing::noWorkersLeft(runDir));
    ++preemptions;
    auto next = cluster::resumeOptions(runDir);
    ASSERT_TRUE(next.ok()) << next.status().message();
    o = std::move(*next);
    o.executable = HYDROZOA_BINARY;
    o.progress = false;
    if (preemptions != 2) {
      o.spec.launcher = "container";
      o.spec.cpu_limit = preemptions == 1 ? 1.0 : 0.5;
    } else {
      o.spec.launcher = "local";
    }
  }
  ASSERT_EQ(preemptions, 3) << "the job ended before its third preemption";
  ASSERT_EQ(launchers.size(), 4u);
  EXPECT_EQ(launchers[1], "container");
  EXPECT_EQ(launchers[2], "local");
  EXPECT_EQ(launchers[3], "container");

  const auto a = testing::stepLosses(dir / "whole"), b = testing::stepLosses(runDir);
  ASSERT_EQ(a.size(), 200u);
  ASSERT_EQ(b.size(), 200u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "step " << i + 1;
  const int layers = readJsonFile(finalCheckpoint(runDir) + "/manifest.json")->value("layers", 0);
  ASSERT_GT(layers, 0);
  const auto wa = weights(finalCheckpoint(dir / "whole"), layers), wb = weights(finalCheckpoint(runDir), layers);
  ASSERT_EQ(wa.size(), wb.size());
  ASSERT_FALSE(wa.empty());
  for (const auto& [key, t] : wa) {
    ASSERT_TRUE(wb.count(key)) << key;
    EXPECT_TRUE(torch::equal(t, wb.at(key))) << key;
  }
}

TEST(JobHandle, EventsComeInOrderAndAResizeTakesEffectAtAnEpochBoundary) {
  ScratchDir dir;
  // 960 samples: 30 steps an epoch at 2 replicas, 60 at 1.
  auto job = cluster::JobHandle::start(optionsFor(dir, cnnJob(3, 960), "run"));
  bool asked = false;
  const auto events = drain(*job, [&](const Json& e) {
    if (e["event"] == "step" && !asked) {
      asked = true;
      EXPECT_TRUE(job->resize(1).ok());
    }
  });
  const auto& r = job->wait();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(job->resize(0).ok());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front()["event"], "running");
  EXPECT_EQ(events.front()["replicas"], 2);
  EXPECT_EQ(events.back()["event"], "finished");
  EXPECT_EQ(events.back()["status"], "completed");
  std::int64_t lastStep = 0, scaledAt = -1;
  int epochs = 0;
  for (const Json& e : events) {
    if (e["event"] == "step") {
      EXPECT_EQ(e["step"].get<std::int64_t>(), lastStep + 1);
      lastStep = e["step"].get<std::int64_t>();
    } else if (e["event"] == "epoch") {
      ++epochs;
    } else if (e["event"] == "scaled") {
      scaledAt = e["step"].get<std::int64_t>();
      EXPECT_EQ(e["replicas"], 1);
      EXPECT_EQ(e["why"], "resized by its handle");
    }
  }
  EXPECT_EQ(epochs, 3);
  // At the start of epoch 2 or 3 (where the workers had not begun it).
  ASSERT_TRUE(scaledAt == 30 || scaledAt == 60) << scaledAt;
  EXPECT_EQ(lastStep, scaledAt + (3 - scaledAt / 30) * 60);
  const auto summary = readJsonFile(r->run_dir + "/summary.json");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ((*summary)["samples"].get<double>(), 3 * 960);
  EXPECT_TRUE(testing::noWorkersLeft(r->run_dir));
}

TEST(JobHandle, AJobThatCannotStartHasOnlyItsFinishedEvent) {
  ScratchDir dir;
  cluster::TrainOptions o = optionsFor(dir, cnnJob(1, 64), "run");
  o.spec.dataset = "fashion_mnist";
  o.spec.data_path = dir / "nowhere";
  auto job = cluster::JobHandle::start(std::move(o));
  const auto events = drain(*job);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["event"], "finished");
  EXPECT_EQ(events[0]["status"], "failed");
  EXPECT_NE(events[0]["reason"].get<std::string>().find("nowhere"), std::string::npos) << events[0];
  EXPECT_FALSE(job->wait().ok());
}

}  // namespace
}  // namespace hydrozoa
