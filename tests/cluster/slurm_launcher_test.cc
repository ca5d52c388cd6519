// The Slurm launcher's pure parts (cluster/launch/slurm/): the salloc and
// srun command lines it runs, how it rounds resources to Slurm's units, and
// the job spec's cluster.slurm section. Against a real Slurm: tests/slurm/.
#include "cluster/launch/slurm/slurm_launcher.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "cluster/job_spec.h"
#include "core/files.h"

namespace hydrozoa::cluster {
namespace {

bool has(const std::vector<std::string>& argv, const std::string& word) {
  return std::find(argv.begin(), argv.end(), word) != argv.end();
}

TEST(SlurmLauncher, RoundsResourcesUpToSlurmsUnits) {
  EXPECT_EQ(slurmCpus(0), 1);
  EXPECT_EQ(slurmCpus(0.5), 1);
  EXPECT_EQ(slurmCpus(1), 1);
  EXPECT_EQ(slurmCpus(1.25), 2);
  EXPECT_EQ(slurmCpus(4), 4);
  EXPECT_EQ(slurmMegabytes(kMiB), 1);
  EXPECT_EQ(slurmMegabytes(kMiB + 1), 2);
  EXPECT_EQ(slurmMegabytes(kGB), 954);
}

TEST(SlurmLauncher, AllocatesOneTaskPerWorkerWithTheLargestWorkersShare) {
  SlurmSpec spec;
  spec.partition = "gpu";
  spec.account = "ml";
  spec.args = {"--time=1:00:00", "--qos=low"};
  spec.allocation_timeout = 90;
  const auto argv = sallocCommand(spec, "hydrozoa-x", 4, 2, 3 * kGiB, 1);
  EXPECT_EQ(argv.front(), "salloc");
  for (const char* w : {"--no-shell", "--job-name=hydrozoa-x", "--ntasks=4", "--cpus-per-task=2", "--immediate=90",
                        "--mem-per-cpu=1536M", "--gpus-per-task=1", "--partition=gpu", "--account=ml",
                        "--time=1:00:00", "--qos=low"}) {
    EXPECT_TRUE(has(argv, w)) << w;
  }
  // No GPUs, no partition or account: none asked for.
  const auto plain = sallocCommand(SlurmSpec{}, "j", 1, 1, 0, 0);
  for (const auto& w : plain) {
    EXPECT_EQ(w.find("--gpus"), std::string::npos);
    EXPECT_EQ(w.find("--partition"), std::string::npos);
    EXPECT_EQ(w.find("--mem"), std::string::npos);
  }
}

TEST(SlurmLauncher, StartsEachWorkerAsAStepWithItsOwnResources) {
  SlurmSpec spec;
  spec.partition = "gpu";
  spec.args = {"--time=5"};
  const auto argv = srunCommand(spec, "42", "hydrozoa-x.w3", 4, 1 * kGiB + 1, 2);
  EXPECT_EQ(argv.front(), "srun");
  for (const char* w : {"--jobid=42", "--job-name=hydrozoa-x.w3", "--ntasks=1", "--nodes=1", "--cpus-per-task=4",
                        "--exact", "--kill-on-bad-exit=1", "--mem=1025M", "--gres=gpu:2"}) {
    EXPECT_TRUE(has(argv, w)) << w;
  }
  // In the allocation: its partition and options are the allocation's.
  EXPECT_FALSE(has(argv, "--partition=gpu"));
  EXPECT_FALSE(has(argv, "--time=5"));
  // A job of its own (past the allocation's workers): asks as salloc did.
  const auto own = srunCommand(spec, "", "hydrozoa-x.w9", 1, kGiB, 0);
  for (const char* w : {"--job-name=hydrozoa-x.w9", "--partition=gpu", "--time=5", "--cpus-per-task=1"}) {
    EXPECT_TRUE(has(own, w)) << w;
  }
  for (const auto& w : own) EXPECT_EQ(w.find("--jobid"), std::string::npos) << w;
}

TEST(SlurmLauncher, TheJobSpecCarriesItsOptions) {
  auto j = parseYaml("model: cnn\ncluster:\n  launcher: slurm\n  slurm: {partition: p, account: a, args: \"--time=5 "
                     " --qos=q\", coordinator_host: 10.0.0.1, allocation_timeout: 30s}\n",
                     "job.yaml");
  ASSERT_TRUE(j.ok());
  auto spec = parseJobSpec(*j, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->slurm.partition, "p");
  EXPECT_EQ(spec->slurm.account, "a");
  EXPECT_EQ(spec->slurm.args, (std::vector<std::string>{"--time=5", "--qos=q"}));
  EXPECT_EQ(spec->slurm.coordinator_host, "10.0.0.1");
  EXPECT_DOUBLE_EQ(spec->slurm.allocation_timeout, 30);
  // The resolved spec says it again.
  auto again = parseJobSpec(jobSpecToJson(*spec), "resolved");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->slurm.args, spec->slurm.args);
}

TEST(SlurmLauncher, BadOptionsAreNamed) {
  for (const auto& [yaml, field] : std::vector<std::pair<std::string, std::string>>{
           {"slurm: {args: \"time=5\"}", "cluster.slurm.args"},
           {"slurm: {allocation_timeout: 0s}", "cluster.slurm.allocation_timeout"},
           {"slurm: {partiton: p}", "partiton"},
           {"slurm: {partition: [1]}", "cluster.slurm.partition"}}) {
    auto j = parseYaml("model: cnn\ncluster:\n  launcher: slurm\n  " + yaml + "\n", "job.yaml");
    ASSERT_TRUE(j.ok()) << yaml;
    auto spec = parseJobSpec(*j, "job.yaml");
    ASSERT_FALSE(spec.ok()) << yaml;
    EXPECT_NE(spec.status().message().find(field), std::string::npos) << spec.status().message();
  }
}

}  // namespace
}  // namespace hydrozoa::cluster
