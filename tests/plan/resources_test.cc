#include "plan/resources.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/files.h"

namespace hydrozoa::plan {
namespace {

Catalog load(const std::string& name) {
  auto c = loadCatalog(name);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return *c;
}

TEST(Catalogs, BuiltInsLoad) {
  for (const char* name : {"aci", "lambda", "alibaba-fc", "azure-vm", "aws-vm", "gcp-vm"}) {
    const Catalog c = load(name);
    EXPECT_EQ(c.name, name);
    EXPECT_GT(c.network_bandwidth, 0);
  }
}

TEST(RightSize, AciCpuContainerPricesTable3) {
  // 2.5 GB needed + 10% margin = 2.75 GB -> 3 GB in 1 GB steps; 4 vCPUs.
  const WorkerSpec w = rightSize(load("aci"), {2500 * kMB, 100 * kMB, ""});
  ASSERT_TRUE(w.feasible) << w.reason;
  EXPECT_EQ(w.memory, 3 * kGB);
  EXPECT_NEAR(w.cost_per_hour, 4 * 0.04050 + 3 * 0.00445, 1e-12);
}

TEST(RightSize, AciGpuContainerAddsTheAccelerator) {
  // Host memory: 2 GB + parameters (1 GB) * 1.1 = 3.1 GB -> 4 GB.
  const WorkerSpec w = rightSize(load("aci"), {10 * kGB, 1 * kGB, "k80"});
  ASSERT_TRUE(w.feasible) << w.reason;
  EXPECT_EQ(w.memory, 4 * kGB);
  EXPECT_NEAR(w.cost_per_hour, 4 * 0.03165 + 4 * 0.00425 + 0.36, 1e-12);
  const WorkerSpec v = rightSize(load("aci"), {10 * kGB, 1 * kGB, "v100"});
  EXPECT_NEAR(v.cost_per_hour - w.cost_per_hour, 2.8548 - 0.36, 1e-12);
}

TEST(RightSize, ReasonsWhenThePlatformCannot) {
  EXPECT_NE(rightSize(load("aci"), {1 * kGB, 0, "h100"}).reason.find("offers no h100"), std::string::npos);
  EXPECT_NE(rightSize(load("aci"), {20 * kGB, 0, ""}).reason.find("at most 16.0 GB"), std::string::npos);
  EXPECT_NE(rightSize(load("lambda"), {1 * kGB, 0, "k80"}).reason.find("no accelerators"), std::string::npos);
  EXPECT_NE(rightSize(load("lambda"), {12 * kGB, 0, ""}).reason.find("at most 10.0 GB"), std::string::npos);
}

TEST(RightSize, LambdaBillsMemoryOnly) {
  const WorkerSpec w = rightSize(load("lambda"), {9 * kGB, 0, ""});
  ASSERT_TRUE(w.feasible);
  EXPECT_EQ(w.memory, 9900 * kMB);
  EXPECT_NEAR(w.cost_per_hour, 9.9 * 0.06, 1e-9);
  // The minimum function size applies to tiny workers.
  EXPECT_EQ(rightSize(load("lambda"), {1 * kMB, 0, ""}).memory, 128 * kMB);
}

TEST(RightSize, VmsPickTheCheapestInstancePerWorker) {
  EXPECT_EQ(rightSize(load("azure-vm"), {8 * kGB, 1 * kGB, "k80"}).instance, "NC6");
  EXPECT_NEAR(rightSize(load("azure-vm"), {8 * kGB, 1 * kGB, "k80"}).cost_per_hour, 0.90, 1e-12);
  // p3.2xlarge ($3.06 for one V100) beats a quarter of p3.8xlarge ($3.67).
  EXPECT_EQ(rightSize(load("aws-vm"), {8 * kGB, 1 * kGB, "v100"}).instance, "p3.2xlarge");
  const WorkerSpec a100 = rightSize(load("aws-vm"), {8 * kGB, 1 * kGB, "a100"});
  EXPECT_EQ(a100.workers_per_instance, 8);
  EXPECT_NEAR(a100.cost_per_hour, 32.77 / 8, 1e-12);
}

TEST(TotalCost, VmsBillWholeInstances) {
  const Catalog aws = load("aws-vm");
  const WorkerSpec w = rightSize(aws, {8 * kGB, 1 * kGB, "a100"});
  EXPECT_NEAR(totalCostPerHour(aws, std::vector<WorkerSpec>(3, w)), 32.77, 1e-9);   // one instance
  EXPECT_NEAR(totalCostPerHour(aws, std::vector<WorkerSpec>(9, w)), 2 * 32.77, 1e-9);  // two
  const Catalog aci = load("aci");
  const WorkerSpec c = rightSize(aci, {1 * kGB, 0, ""});
  EXPECT_NEAR(totalCostPerHour(aci, std::vector<WorkerSpec>(5, c)), 5 * c.cost_per_hour, 1e-12);
}

TEST(PlatformMemoryLimit, CpuWorkersAreCappedGpuWorkersAreNot) {
  EXPECT_EQ(*platformMemoryLimit(load("aci"), ""), static_cast<Bytes>(16 * kGB / 1.1));
  EXPECT_FALSE(platformMemoryLimit(load("aci"), "k80").has_value());
}

TEST(LoadCatalog, ErrorsNameFileAndField) {
  auto r = loadCatalog("gcp");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("built in: aci"), std::string::npos);
  const std::string path = std::filesystem::temp_directory_path() / ("cat." + std::to_string(::getpid()) + ".yaml");
  ASSERT_TRUE(writeFileAtomically(path, "name: x\nkind: container\nbilling: per_second\nnetwork_bandwidth: fast\n"
                                        "cpu: {vcpus: 2, max_memory: 8GB, vcpu_per_hour: 0.1, memory_gb_per_hour: 0.01}\n")
                  .ok());
  r = loadCatalog(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(path + ".network_bandwidth"), std::string::npos) << r.status().message();
  ASSERT_TRUE(writeFileAtomically(path, "name: x\nkind: container\nbilling: per_second\nnetwork_bandwidth: 1Gbit/s\n"
                                        "cpu: {vcpus: 2, max_memory: 8GB, vcpu_per_hour: 0.1, memory_gb_per_hour: 0.01, gpus: 1}\n")
                  .ok());
  r = loadCatalog(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown key \"gpus\""), std::string::npos) << r.status().message();
  std::filesystem::remove(path);
}

// A function catalog's sizes for FuncPipe's planner and its storage latency
// (docs/functions.md): given, defaulted, and refused naming the field.
TEST(LoadCatalog, FunctionTiersAndStorageLatency) {
  const Catalog lambda = load("lambda");
  EXPECT_EQ(lambda.tiers.size(), 8u);
  EXPECT_EQ(lambda.tiers.front(), 512 * kMB);
  EXPECT_EQ(lambda.tiers.back(), 10 * kGB);
  ASSERT_TRUE(lambda.storage_latency.has_value());
  EXPECT_DOUBLE_EQ(*lambda.storage_latency, 0.02);
  const std::string base = "name: f\nkind: function\nbilling: per_millisecond\nnetwork_bandwidth: 70MB/s\n"
                           "min_memory: 128MB\nmax_memory: 3GB\nmemory_gb_per_hour: 0.06\nvcpus_per_gb: 0.6\n";
  auto c = catalogFromYaml(base, "f.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->tiers.size(), 8u);  // FuncPipe's; the planner uses those that fit 128 MB to 3 GB
  EXPECT_EQ(*functionTiers(*c), (std::vector<Bytes>{512 * kMB, kGB, 2 * kGB, 3 * kGB}));
  EXPECT_FALSE(c->storage_latency.has_value());
  auto above = catalogFromYaml(base + "tiers: [4GB, 5GB]\n", "f.yaml");
  ASSERT_TRUE(above.ok()) << above.status().message();
  ASSERT_FALSE(functionTiers(*above).ok());
  EXPECT_NE(functionTiers(*above).status().message().find("none of its function sizes"), std::string::npos);
  for (const auto& [extra, expect] : std::vector<std::pair<std::string, std::string>>{
           {"tiers: [1GB, 512MB]\n", "f.yaml.tiers"},
           {"tiers: [lots]\n", "f.yaml.tiers: \"lots\" is not a size"},
           {"tiers: []\n", "f.yaml.tiers"},
           {"storage_latency: 2min\n", "f.yaml.storage_latency"},
           {"storage_latency: soon\n", "f.yaml.storage_latency"}}) {
    auto bad = catalogFromYaml(base + extra, "f.yaml");
    ASSERT_FALSE(bad.ok()) << extra;
    EXPECT_NE(bad.status().message().find(expect), std::string::npos) << bad.status().message();
  }
}

}  // namespace
}  // namespace hydrozoa::plan
