#include "cluster/job_spec.h"

#include <gtest/gtest.h>

namespace hydrozoa::cluster {
namespace {

Result<JobSpec> parse(const std::string& yaml) {
  auto j = parseYaml(yaml, "job.yaml");
  EXPECT_TRUE(j.ok()) << j.status().message();
  return parseJobSpec(*j, "job.yaml");
}

TEST(JobSpec, MinimalSpecGetsDefaults) {
  auto s = parse("model: cnn\n");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->model, "cnn");
  EXPECT_EQ(s->dataset, "synthetic");
  EXPECT_EQ(s->epochs, 1);
  EXPECT_EQ(s->optimizer.name, "sgd");
  EXPECT_EQ(s->workers, 1);
  EXPECT_EQ(s->max_recoveries, 3);
  EXPECT_TRUE(s->plan_file.empty());
}

TEST(JobSpec, TheExampleParses) {
  auto s = loadJobSpec(std::string(HYDROZOA_SOURCE_DIR) + "/examples/fashion_mnist_cnn.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->dataset, "fashion_mnist");
  EXPECT_EQ(*s->data_parallel, 2);
  EXPECT_EQ(*s->stages, 2);
  EXPECT_EQ(s->lr_schedule.name, "cosine");
  EXPECT_DOUBLE_EQ(s->optimizer.weight_decay, 0.0005);
}

TEST(JobSpec, FullSpecRoundTrips) {
  auto s = parse(R"(
name: full
model: {name: resnet18, options: {image_size: 32, width: 0.25, small_stem: true}}
data: {dataset: synthetic, synthetic_train: 100, synthetic_test: 10, shuffle: false}
training:
  epochs: 2
  max_steps: 7
  global_batch: 32
  optimizer: {name: adam, lr: 0.001, beta1: 0.8}
  lr_schedule: {name: step, step_epochs: 1, gamma: 0.5, warmup_steps: 3}
  seed: 42
  threads: 2
cluster: {workers: 4, bandwidth: 1Gbit/s, memory: 2GB, heartbeat_interval: 500ms, heartbeat_timeout: 5s}
plan: {data_parallel: 2, stages: 2, microbatches: 4, objective: samples-per-dollar}
output: {dir: runs/full, checkpoint_every_epochs: 2, trace_steps: 5}
)");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->model_options.size(), 3u);
  EXPECT_DOUBLE_EQ(*s->bandwidth, 125e6);
  EXPECT_EQ(*s->memory, 2 * kGB);
  EXPECT_DOUBLE_EQ(s->heartbeat_interval, 0.5);
  auto back = parseJobSpec(parseYaml(toYaml(jobSpecToJson(*s)), "resolved.yaml").value(), "resolved.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(jobSpecToJson(*back), jobSpecToJson(*s));
}

TEST(JobSpec, UnknownKeysAreErrorsNamingTheKnownOnes) {
  auto s = parse("model: cnn\ntraining: {epochs: 2, learning_rate: 0.1}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("job.yaml.training: unknown key \"learning_rate\""), std::string::npos)
      << s.status().message();
  s = parse("model: cnn\nclustr: {workers: 2}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("unknown key \"clustr\""), std::string::npos);
}

TEST(JobSpec, BadValuesNameTheField) {
  struct Case {
    std::string yaml, expect;
  };
  for (const Case& c : std::vector<Case>{
           {"data: {dataset: mnist}\nmodel: cnn\n", "data.dataset: unknown dataset \"mnist\""},
           {"model: cnn\ntraining: {epochs: 0}\n", "training.epochs: must be at least 1"},
           {"model: cnn\ntraining: {global_batch: -8}\n", "global_batch: must be at least 1"},
           {"model: cnn\ntraining: {optimizer: lion}\n", "unknown optimizer \"lion\""},
           {"model: cnn\ntraining: {device: tpu}\n", "training.device"},
           {"model: cnn\ncluster: {launcher: k8s}\n", "unknown launcher \"k8s\""},
           {"model: cnn\ncluster: {bandwidth: fast}\n", "cluster.bandwidth"},
           {"model: cnn\ncluster: {max_recoveries: -1}\n", "max_recoveries"},
           {"model: cnn\ncluster: {max_recoveries: 5000}\n", "cluster.max_recoveries: must be 0 to 1000"},
           {"model: cnn\ncluster: {workers: 2}\nplan: {data_parallel: 2, stages: 2}\n", "needs 4 workers"},
           {"model: cnn\ntraining: {global_batch: 10}\nplan: {data_parallel: 3}\n", "do not divide"},
           {"model: cnn\ndata: {dataset: text}\n", "data.path: the text dataset needs a path"},
           {"training: {epochs: 1}\n", "model"},
       }) {
    auto s = parse(c.yaml);
    ASSERT_FALSE(s.ok()) << c.yaml;
    EXPECT_NE(s.status().message().find(c.expect), std::string::npos) << s.status().message();
  }
}

TEST(JobSpec, PlanAsAFileOrAuto) {
  EXPECT_EQ(parse("model: cnn\nplan: plan.json\n")->plan_file, "plan.json");
  EXPECT_TRUE(parse("model: cnn\nplan: auto\n")->plan_file.empty());
}

TEST(JobSpec, InvalidYamlIsOneClearError) {
  auto j = parseYaml("model: {name: cnn\ntraining: [", "bad.yaml");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("bad.yaml: not valid YAML at line"), std::string::npos);
}

}  // namespace
}  // namespace hydrozoa::cluster

namespace hydrozoa::cluster {
namespace {

TEST(JobSpec, ScalingSectionsParseAndRoundTrip) {
  auto s = parseJobSpec(parseYaml("model: cnn\nscaling: {policy: adabatch, min_replicas: 1, max_replicas: 4, "
                                  "every_epochs: 2, lr_decay: 0.5, replan: true}\n",
                                  "job.yaml")
                            .value(),
                        "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->scaling.policy, "adabatch");
  EXPECT_EQ(s->scaling.max_replicas, 4);
  EXPECT_EQ(s->scaling.every_epochs, 2);
  EXPECT_DOUBLE_EQ(s->scaling.lr_decay, 0.5);
  EXPECT_TRUE(s->scaling.replan);
  s = parseJobSpec(parseYaml("model: cnn\nscaling: {policy: schedule, schedule: {1: 1, 3: 2, 5: 4}}\n", "job.yaml")
                       .value(),
                   "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->scaling.schedule.size(), 3u);
  EXPECT_EQ(s->scaling.schedule.at(3), 2);
  auto back = parseJobSpec(parseYaml(toYaml(jobSpecToJson(*s)), "resolved.yaml").value(), "resolved.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(jobSpecToJson(*back), jobSpecToJson(*s));
  s = parseJobSpec(parseYaml("model: cnn\nscaling: adabatch\n", "job.yaml").value(), "job.yaml");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->scaling.policy, "adabatch");
  s = parseJobSpec(parseYaml("model: cnn\nscaling: {policy: rule, rule: \"replicas +\"}\n", "job.yaml").value(),
                   "job.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("job.yaml: scaling.rule: \"replicas +\""), std::string::npos)
      << s.status().message();
  s = parseJobSpec(parseYaml("model: cnn\nscaling: {polcy: fixed}\n", "job.yaml").value(), "job.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("unknown key \"polcy\""), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace hydrozoa::cluster
