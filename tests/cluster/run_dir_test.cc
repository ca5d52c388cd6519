// The run directory as a hostile machine would treat it (issue 53 §3): an
// existing --out keeps its mode, one others can write is refused, and
// checkpoints/latest cannot lead outside the run.
#include "cluster/run_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace hydrozoa::cluster {
namespace {
namespace fs = std::filesystem;

struct Scratch {
  fs::path path = fs::temp_directory_path() / ("hz-rundir-" + std::to_string(::getpid()));
  Scratch() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Scratch() { fs::remove_all(path); }
};

unsigned modeOf(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

TEST(RunDir, AnExistingOutputDirectoryKeepsItsModeAndOneOthersCanWriteIsRefused) {
  Scratch s;
  // Yours, readable by others: used as it is (its mode unchanged); what the run makes inside is private.
  const fs::path shared = s.path / "shared";
  fs::create_directories(shared);
  ::chmod(shared.c_str(), 0755);
  auto run = RunDir::create(shared.string());
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_EQ(modeOf(shared), 0755u);
  EXPECT_EQ(modeOf(shared / "checkpoints"), 0700u);
  EXPECT_EQ(modeOf(shared / "workers"), 0700u);
  // A new directory is the user's alone.
  ASSERT_TRUE(RunDir::create((s.path / "fresh").string()).ok());
  EXPECT_EQ(modeOf(s.path / "fresh"), 0700u);
  // /tmp-like (1777): refused, its mode untouched, nothing made in it.
  const fs::path open = s.path / "open";
  fs::create_directories(open);
  ::chmod(open.c_str(), 01777);
  auto refused = RunDir::create(open.string());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("others can write it (mode 1777"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("--out " + open.string() + "/run makes a private one"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(modeOf(open), 01777u);
  EXPECT_TRUE(fs::is_empty(open));
  // A link in the place of the directory: refused.
  fs::create_directory_symlink(shared, s.path / "link");
  EXPECT_FALSE(RunDir::create((s.path / "link").string()).ok());
  // output.checkpoint_dir: the same rules.
  auto r = RunDir::create((s.path / "r2").string());
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->useCheckpointsDir(open.string()).ok());
  ASSERT_TRUE(r->useCheckpointsDir((s.path / "ckpt").string()).ok());
  EXPECT_EQ(modeOf(s.path / "ckpt"), 0700u);
}

TEST(RunDir, LatestCannotLeadOutsideTheRun) {
  Scratch s;
  auto run = RunDir::create((s.path / "run").string());
  ASSERT_TRUE(run.ok());
  const fs::path ckpts = run->checkpointsDir();
  const fs::path elsewhere = s.path / "elsewhere";
  fs::create_directories(elsewhere / "step-00000001");
  std::ofstream(elsewhere / "step-00000001" / "manifest.json") << "{}";
  for (const char* name : {"../../elsewhere/step-00000001", "/etc", "step-1", "step-00000001/../.."}) {
    std::ofstream(ckpts / "latest", std::ios::trunc) << name << "\n";
    auto latest = run->latestCheckpoint();
    ASSERT_FALSE(latest.ok()) << name;
    EXPECT_NE(latest.status().message().find("not a checkpoint directory of this run"), std::string::npos)
        << latest.status().message();
  }
  // A checkpoint directory that is a link elsewhere, and `latest` itself a link.
  fs::create_directory_symlink(elsewhere / "step-00000001", ckpts / "step-00000001");
  std::ofstream(ckpts / "latest", std::ios::trunc) << "step-00000001\n";
  EXPECT_FALSE(run->latestCheckpoint().ok());
  fs::remove(ckpts / "latest");
  std::ofstream(elsewhere / "latest") << "step-00000001\n";
  fs::create_symlink(elsewhere / "latest", ckpts / "latest");
  auto linked = run->latestCheckpoint();
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.status().message().find("not a file of hydrozoa's"), std::string::npos) << linked.status().message();
  // No `latest`: nothing to resume from, not an error.
  fs::remove(ckpts / "latest");
  auto none = run->latestCheckpoint();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

}  // namespace
}  // namespace hydrozoa::cluster
