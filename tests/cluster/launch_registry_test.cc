// The launchers by name (cluster/launch/registry.h): every registered kind is
// one a job spec accepts, an unknown name lists the known ones, and `local`
// starts and stops a real worker process.
#include "cluster/launch/registry.h"

#include <gtest/gtest.h>

#include "cluster/job_spec.h"
#include "core/files.h"

namespace hydrozoa::cluster {
namespace {

LauncherContext running(const std::string& executable) {
  LauncherContext c;
  c.executable = executable;
  return c;
}

TEST(LauncherRegistry, EveryKindIsOneAJobSpecAccepts) {
  ASSERT_GE(launcherKinds().size(), 3u);
  for (const LauncherKind& k : launcherKinds()) {
    auto j = parseYaml("model: cnn\ncluster: {launcher: " + k.name + "}\n", "job.yaml");
    ASSERT_TRUE(j.ok());
    auto spec = parseJobSpec(*j, "job.yaml");
    EXPECT_TRUE(spec.ok()) << k.name << ": " << spec.status().message();
  }
}

TEST(LauncherRegistry, AnUnknownNameListsTheKnownOnes) {
  auto l = makeLauncher("k8s", running("/bin/true"));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().message(), "unknown launcher \"k8s\" (known: local, container, function, slurm)");
}

TEST(LauncherRegistry, LocalStartsAndStopsARealProcess) {
  auto l = makeLauncher("local", running("/bin/sleep"));
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_STREQ((*l)->name(), "local");
  EXPECT_TRUE((*l)->sharesHostMemory());
  WorkerLaunch w;
  w.id = 7;
  w.args = {"30"};
  w.log_path = "/dev/null";
  ASSERT_TRUE((*l)->launch(w).ok());
  EXPECT_TRUE((*l)->alive(7));
  const auto exits = (*l)->stopAll(1.0);
  ASSERT_EQ(exits.size(), 1u);
  EXPECT_EQ(exits[0].id, 7);
  EXPECT_TRUE(exits[0].killed);
  EXPECT_FALSE((*l)->alive(7));
}

}  // namespace
}  // namespace hydrozoa::cluster
