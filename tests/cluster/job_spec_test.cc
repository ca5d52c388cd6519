#include "cluster/job_spec.h"
#include "cluster/job_yaml.h"

#include <gtest/gtest.h>

#include <set>

namespace hydrozoa::cluster {
namespace {

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
  precision: bf16
cluster: {workers: 4, bandwidth: 1Gbit/s, memory: 2GB, heartbeat_interval: 500ms, heartbeat_timeout: 5s}
plan: {data_parallel: 2, stages: 2, microbatches: 4, objective: samples-per-dollar, schedule: 1f1b, chunks: 3,
       recompute: true, scatter_gather: true}
output: {dir: runs/full, checkpoint_every_epochs: 2, trace_steps: 5}
)");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->model_options.size(), 3u);
  EXPECT_DOUBLE_EQ(*s->bandwidth, 125e6);
  EXPECT_EQ(*s->memory, 2 * kGB);
  EXPECT_DOUBLE_EQ(s->heartbeat_interval, 0.5);
  EXPECT_EQ(s->schedule, "1f1b");
  EXPECT_EQ(s->chunks, 3);
  EXPECT_EQ(s->recompute, true);
  EXPECT_EQ(s->scatter_gather, true);
  EXPECT_EQ(s->precision, "bf16");
  auto back = parseJobSpec(parseYaml(toYaml(jobSpecToJson(*s)), "resolved.yaml").value(), "resolved.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(jobSpecToJson(*back), jobSpecToJson(*s));
}

// NOTE [Loss scaling]: fp16 with its scale's start and growth interval,
// which the resolved job.yaml keeps.
TEST(JobSpec, Fp16WithItsLossScale) {
  auto s = parse("model: cnn\ntraining: {precision: fp16, loss_scale: {initial: 1024, growth_interval: 50}}\n"
                 "plan: {schedule: 1f1b}\n");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->loss_scale_initial, 1024);
  EXPECT_EQ(s->loss_scale_growth_interval, 50);
  auto back = parseJobSpec(parseYaml(toYaml(jobSpecToJson(*s)), "resolved.yaml").value(), "resolved.yaml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->loss_scale_initial, 1024);
  EXPECT_EQ(back->loss_scale_growth_interval, 50);
  s = parse("model: cnn\ntraining: {precision: fp16}\n");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->loss_scale_initial, 65536);
  EXPECT_EQ(s->loss_scale_growth_interval, 2000);
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
           {"model: cnn\ntraining: {epochs: 0}\n", "training.epochs: 0 is out of range; expected a whole number from 1"},
           {"model: cnn\ntraining: {global_batch: -8}\n", "global_batch: -8 is out of range"},
           {"model: cnn\ntraining: {optimizer: lion}\n", "unknown optimizer \"lion\""},
           {"model: cnn\ntraining: {device: tpu}\n", "training.device"},
           {"model: cnn\ntraining: {precision: fp8}\n", "training.precision: \"fp8\" must be fp32, bf16 or fp16"},
           {"model: cnn\ntraining: {precision: fp16}\nplan: {schedule: 2bw}\n",
            "training.precision: fp16 skips a step with an inf or NaN gradient on every worker at once, and the 2bw "
            "schedule updates its stages at different steps: use a synchronous schedule"},
           {"model: cnn\ntraining: {precision: fp16, loss_scale: {initial: 0.5}}\n",
            "training.loss_scale.initial: must be from 1 to 2^64"},
           {"model: cnn\ntraining: {precision: fp16, loss_scale: {growth_interval: 0}}\n",
            "training.loss_scale.growth_interval"},
           {"model: cnn\ntraining: {precision: fp16, loss_scale: {start: 8}}\n", "unknown key \"start\""},
           {"model: cnn\ncluster: {launcher: k8s}\n", "unknown launcher \"k8s\""},
           {"model: cnn\ncluster: {bandwidth: fast}\n", "cluster.bandwidth"},
           {"model: cnn\ncluster: {max_recoveries: -1}\n", "max_recoveries"},
           {"model: cnn\ncluster: {max_recoveries: 5000}\n",
            "cluster.max_recoveries: 5000 is out of range; expected a whole number from 0 to 1,000"},
           {"model: cnn\ncluster: {workers: 2}\nplan: {data_parallel: 2, stages: 2}\n", "needs 4 workers"},
           {"model: cnn\ntraining: {global_batch: 10}\nplan: {data_parallel: 3}\n", "do not divide"},
           {"model: cnn\ndata: {dataset: text}\n", "data.path: the text dataset needs a path"},
           {"training: {epochs: 1}\n", "model"},
           {"model: cnn\nplan: {schedule: zero-bubble}\n",
            "plan.schedule: unknown pipeline schedule \"zero-bubble\"; available: gpipe, 1f1b, interleaved"},
       }) {
    auto s = parse(c.yaml);
    ASSERT_FALSE(s.ok()) << c.yaml;
    EXPECT_NE(s.status().message().find(c.expect), std::string::npos) << s.status().message();
  }
}

// Issue 8 §1: every count and size of the job spec, walked with values
// that are zero, negative, past 32 and 64 bits, huge, not a number and not
// numeric. Out of its range, a value is an error naming the field; in range,
// it parses or fails cleanly; nothing crashes.
TEST(JobSpec, EveryNumericFieldRejectsOutOfRangeValuesNamingTheField) {
  const std::vector<std::string> values = {"0",   "-1",   "2147483648", "4294967296", "9223372036854775807",
                                           "1e30", "nan", "abc"};
  struct Field {
    std::string section, key;
    std::set<std::string> legit;  // values within the field's range
  };
  const std::set<std::string> big = {"2147483648", "4294967296"};
  const std::vector<Field> fields = {
      {"data", "synthetic_train", {}},
      {"data", "synthetic_test", {}},
      {"training", "epochs", big},
      {"training", "max_steps", big},
      {"training", "global_batch", {}},
      {"training", "threads", {}},
      {"training", "seed", {"0", "2147483648", "4294967296", "9223372036854775807"}},
      {"cluster", "workers", {}},
      {"cluster", "max_recoveries", {"0"}},
      {"cluster", "control_port", {"0"}},
      {"cluster", "memory", big},
      {"cluster", "memory_limit", big},
      {"cluster", "bandwidth", big},
      {"cluster", "latency", {"0"}},
      {"cluster", "heartbeat_interval", {}},
      {"cluster", "heartbeat_timeout", {}},
      {"cluster", "start_timeout", {}},
      {"cluster", "cpu_limit", {}},
      {"plan", "data_parallel", {}},
      {"plan", "stages", {}},
      {"plan", "microbatches", {}},
      {"plan", "microbatch_size", {}},
      {"scaling", "min_replicas", {}},
      {"scaling", "max_replicas", {"0"}},
      {"scaling", "every_epochs", big},
      {"scaling", "every_steps", {"0", "2147483648", "4294967296"}},
      {"output", "checkpoint_every_epochs", {"0", "2147483648", "4294967296"}},
      {"output", "trace_steps", {"0", "2147483648", "4294967296"}},
  };
  for (const Field& f : fields) {
    for (const std::string& v : values) {
      const std::string yaml = "model: cnn\n" + f.section + ": {" + f.key + ": " + v + "}\n";
      auto j = parseYaml(yaml, "job.yaml");
      ASSERT_TRUE(j.ok());
      Result<JobSpec> s = Status();
      ASSERT_NO_THROW(s = parseJobSpec(*j, "job.yaml")) << yaml;
      if (f.legit.count(v)) continue;  // in range: either outcome, but no crash
      ASSERT_FALSE(s.ok()) << yaml;
      EXPECT_NE(s.status().message().find(f.section + "." + f.key), std::string::npos)
          << yaml << " -> " << s.status().message();
    }
  }
  // The Slurm launcher's section, one level down.
  for (const std::string& v : values) {
    const std::string yaml = "model: cnn\ncluster: {launcher: slurm, slurm: {allocation_timeout: " + v + "}}\n";
    auto j = parseYaml(yaml, "job.yaml");
    ASSERT_TRUE(j.ok());
    Result<JobSpec> s = Status();
    ASSERT_NO_THROW(s = parseJobSpec(*j, "job.yaml")) << yaml;
    ASSERT_FALSE(s.ok()) << yaml;
    EXPECT_NE(s.status().message().find("cluster.slurm.allocation_timeout"), std::string::npos)
        << yaml << " -> " << s.status().message();
  }
  // The schedule table's keys and values too.
  for (const std::string& v : values) {
    auto s = parse("model: cnn\nscaling: {policy: schedule, schedule: {1: " + v + "}}\n");
    EXPECT_FALSE(s.ok()) << v;
    s = parse("model: cnn\nscaling: {policy: schedule, schedule: {" + v + ": 2}}\n");
    if (!big.count(v)) {
      EXPECT_FALSE(s.ok()) << v;  // epochs count to 2^40
    }
  }
}

TEST(JobSpec, UnknownKeysListEveryKnownKeyAndSuggestOne) {
  auto s = parse("model: cnn\ncluster: {workers: 2, bandwith: 1Gbit/s}\n");
  ASSERT_FALSE(s.ok());
  const std::string& m = s.status().message();
  EXPECT_NE(m.find("did you mean \"bandwidth\"?"), std::string::npos) << m;
  for (const char* key : {"bandwidth", "latency", "memory_limit", "heartbeat_interval", "heartbeat_timeout"}) {
    EXPECT_NE(m.find(key), std::string::npos) << key << " missing from: " << m;
  }
  s = parse("model: cnn\ndata: {shufle: false}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("did you mean \"shuffle\"?"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("drop_last"), std::string::npos) << s.status().message();
  s = parse("model: cnn\ntraining: {evaluate: false}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("eval"), std::string::npos) << s.status().message();
  s = parse("model: cnn\nscaling: {policy: adabatch, lr_decy: 0.5}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("did you mean \"lr_decay\"?"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("replan"), std::string::npos) << s.status().message();
}

TEST(JobSpec, LatencyWithPlainProcessesIsAnError) {
  auto s = parse("model: cnn\ncluster: {launcher: local, latency: 1ms}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("cluster.latency"), std::string::npos) << s.status().message();
  EXPECT_TRUE(parse("model: cnn\ncluster: {launcher: container, latency: 1ms}\n").ok());
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
