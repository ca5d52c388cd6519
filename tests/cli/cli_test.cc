// End-to-end tests: the real `hydrozoa` binary on real files, as a user runs
// it. Every bad input must end in one line "hydrozoa: error: ..." naming the
// problem, a non-zero exit, and no half-written output.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "core/files.h"
#include "plan/cost/pipeline.h"
#include "plan/plan.h"

namespace hydrozoa {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  int code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hzcli." + std::to_string(::getpid()) + "." +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Starts the binary (`binary`, else the build's) in the test directory with stdout and stderr into these files.
  pid_t spawn(std::vector<std::string> args, const std::string& outPath, const std::string& errPath,
              const std::string& binary = HYDROZOA_BINARY) const {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (::chdir(dir_.c_str()) != 0) ::_exit(127);
      const int out = ::open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(out, 1);
      ::dup2(err, 2);
      args.insert(args.begin(), binary);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(binary.c_str(), argv.data());
      ::_exit(127);
    }
    return pid;
  }

  // Runs the binary in the test directory; stdout and stderr are captured.
  Outcome run(std::vector<std::string> args, const std::string& binary = HYDROZOA_BINARY) const {
    const std::string outPath = path(".stdout"), errPath = path(".stderr");
    const pid_t pid = spawn(std::move(args), outPath, errPath, binary);
    int status = 0;
    ::waitpid(pid, &status, 0);
    Outcome r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(outPath);
    r.err = slurp(errPath);
    return r;
  }

  // A failed run: non-zero exit and exactly one error line that contains `expect`.
  void expectError(const std::vector<std::string>& args, const std::string& expect) const {
    const Outcome r = run(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_NE(r.code, 0) << joined;
    const auto at = r.err.find("hydrozoa: error: ");
    ASSERT_NE(at, std::string::npos) << joined << "\nstderr: " << r.err;
    const std::string line = r.err.substr(at);
    EXPECT_EQ(line.find('\n'), line.size() - 1) << "the error must be one line: " << line;
    EXPECT_NE(line.find(expect), std::string::npos) << joined << "\n" << line;
  }

  void write(const std::string& name, const std::string& text) const { std::ofstream(path(name)) << text; }

  std::string tinyProfile() const {
    const Outcome r = run({"profile", "--model", "cnn", "--microbatch-sizes", "1,2,4", "--repeats", "2", "-o", "p.json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return path("p.json");
  }

  fs::path dir_;
};

const std::string kGraph = std::string(HYDROZOA_TEST_DATA_DIR) + "/pipedream_small.txt";

TEST_F(Cli, HelpForEveryCommand) {
  EXPECT_EQ(run({"--help"}).code, 0);
  for (const char* cmd : {"models", "profile", "plan", "show", "report", "train", "cleanup", "select", "simulate",
                          "allocate"}) {
    const Outcome r = run({cmd, "--help"});
    EXPECT_EQ(r.code, 0) << cmd;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << cmd;
  }
  EXPECT_NE(run({"plan", "--help"}).out.find("--global-batch"), std::string::npos);
  EXPECT_NE(run({}).code, 0);  // a subcommand is required
}

// NOTE [The front end and the full program]: build/hydrozoa loads no
// libtorch; it checks and plans alone and hands the rest, command line and
// all, to build/hydrozoa-torch, which it says how to build when missing.
TEST_F(Cli, TheFrontEndNeedsNoLibtorchAndHandsTheRestToTheFullProgram) {
  std::FILE* elf = ::popen(("readelf -d " + std::string(HYDROZOA_BINARY)).c_str(), "r");
  ASSERT_NE(elf, nullptr);
  std::string needed;
  for (char line[512]; std::fgets(line, sizeof line, elf);) {
    if (std::strstr(line, "(NEEDED)")) needed += line;
  }
  ASSERT_EQ(::pclose(elf), 0);
  ASSERT_NE(needed.find("libc.so"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("torch"), std::string::npos) << needed;
  EXPECT_EQ(needed.find("c10"), std::string::npos) << needed;

  // The front end alone, without the full program next to it.
  fs::create_directories(path("alone"));
  const std::string alone = path("alone/hydrozoa");
  fs::copy_file(HYDROZOA_BINARY, alone);
  Outcome r = run({"plan", "--profile", kGraph, "--workers", "4", "--bandwidth", "1GB/s", "-o", "plan.json"}, alone);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(path("plan.json")));
  write("job.yaml", "model: mlp\ndata: {dataset: synthetic}\n");
  r = run({"train", "job.yaml", "--workers", "0"}, alone);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("hydrozoa: error: --workers"), std::string::npos) << r.err;
  for (const auto& [args, what] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"train", "job.yaml", "--max-steps", "1", "--out", "run"}, "training needs libtorch"},
           {{"profile", "--help"}, "`hydrozoa profile` needs libtorch"},
           {{"worker", "--join", "x", "--id", "0"}, "`hydrozoa worker` needs libtorch"}}) {
    r = run(args, alone);
    EXPECT_EQ(r.code, 1) << what;
    EXPECT_NE(r.err.find("hydrozoa: error: " + what + ", which hydrozoa keeps in " + path("alone/hydrozoa-torch")),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("(No such file or directory); build both with scripts/setup"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(path("run")));

  // Handed over in the middle of a command: what the front end printed
  // before is not printed twice.
  r = run({"plan", "--model", "mlp", "-O", "hidden=32", "--device", "cpu", "--workers", "2", "--global-batch", "32",
           "-o", "cpu.json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto first = r.err.find("calibrating this CPU");
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("calibrating this CPU", first + 1), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(path("cpu.json")));
}

TEST_F(Cli, ModelsListsTheZoo) {
  const Outcome r = run({"models", "-v"});
  ASSERT_EQ(r.code, 0);
  for (const char* name : {"resnet34", "bert", "gpt", "vgg19", "alexnet", "image_size"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  }
  EXPECT_NE(r.out.find("21.8M"), std::string::npos);  // ResNet-34
}

// The commands of the issue, exactly as written.
TEST_F(Cli, ProfileThenPlanResNet34AsWritten) {
  Outcome r = run({"profile", "--model", "resnet34", "--microbatch-sizes", "1,2,4,8", "-o", "p.json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto profile = readJsonFile(path("p.json"));
  ASSERT_TRUE(profile.ok());
  EXPECT_EQ((*profile)["layers"].size(), 18u);
  EXPECT_EQ((*profile)["measurements"].size(), 4u);

  r = run({"plan", "--profile", "p.json", "--workers", "16", "--memory", "12GB", "--bandwidth", "10Gbit/s",
           "--global-batch", "256", "-o", "plan.json"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* row : {"16×1", "8×2", "4×4", "2×8", "1×16"}) EXPECT_NE(r.out.find(row), std::string::npos) << row;
  auto plan = readJsonFile(path("plan.json"));
  ASSERT_TRUE(plan.ok());
  const Json& j = *plan;
  EXPECT_EQ(j["strategy"]["data_parallel"].get<int>() * j["microbatch_size"].get<int>() * j["num_microbatches"].get<int>(),
            256);
  for (const auto& s : j["stages"]) EXPECT_LE(s["memory_bytes"].get<long>(), 12'000'000'000L);
  EXPECT_GT(j["predicted"]["samples_per_dollar"].get<double>(), 0);
}

TEST_F(Cli, PredictBert12OnK80AsWritten) {
  const Outcome r = run({"plan", "--model", "bert12", "--device", "k80", "--workers", "16", "--global-batch", "256"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Plan for bert"), std::string::npos);
  // BERT's vocabulary (30,522) lets t = 2 in: every strategy as p×t×d (issue 15).
  for (const char* row : {"p1×t1×d16", "p2×t1×d8", "p4×t1×d4", "p8×t1×d2", "p1×t2×d8"}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row;
  }
  ASSERT_TRUE(fs::exists(path("plan.json")));  // the default output
  auto plan = readJsonFile(path("plan.json"));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ((*plan)["profile"]["device"], "k80");
  for (const auto& s : (*plan)["stages"]) EXPECT_LE(s["memory_bytes"].get<long>(), 12L * 1024 * 1024 * 1024);
}

// Issue 11 §3, as written: every schedule's best plan side by side, the
// best by the objective chosen and written; 1F1B needs less memory.
TEST_F(Cli, PlanEverySchedule) {
  const Outcome r = run({"plan", "--model", "gpt", "-O", "layers=8", "-O", "hidden=256", "-O", "heads=4", "-O",
                         "vocab=1024", "-O", "seq_len=128", "--device", "k80", "--workers", "8", "--global-batch",
                         "64", "--schedule", "auto"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Schedules (the best plan of each"), std::string::npos) << r.out;
  auto plan = readJsonFile(path("plan.json"));
  ASSERT_TRUE(plan.ok());
  const std::string chosen =
      (*plan)["schedule"].get<std::string>() + ((*plan)["recompute"].get<bool>() ? " + recompute" : "");
  // One row per schedule, with and without recomputation: "  *  1f1b + recompute   4×2 ...", or with
  // tensor parallelism considered (issue 15) "  *  1f1b + recompute   p2×t1×d4 ...".
  std::map<std::string, bool> rows;  // name -> marked chosen
  // (The schedules' table, before the tensor-parallel comparison and the plan.)
  std::istringstream lines(r.out.substr(0, std::min(r.out.find("\nBest plan without"), r.out.find("\nPlan for"))));
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, std::regex(R"(^  ([* ])  (\S+( \+ recompute)?) +(\d+×\d+|p\d+×t\d+×d\d+) )"))) {
      rows[m[2].str()] = m[1].str() == "*";
    }
  }
  ASSERT_EQ(rows.size(), 12u) << r.out;
  // 2bw's weights are one update stale; the others' are not.
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n  [* ]  2bw .* 1 *\n)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n  [* ]  pipedream .* per-stage *\n)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n  [* ]  pipedream-vs .* p - 1 *\n)"))) << r.out;
  for (const auto& [name, marked] : rows) EXPECT_EQ(marked, name == chosen) << name << "\n" << r.out;
  EXPECT_NE(r.out.find("schedule " + (*plan)["schedule"].get<std::string>()), std::string::npos);
  // Pinned: the plan says so.
  ASSERT_EQ(run({"plan", "--model", "gpt", "--device", "k80", "--workers", "4", "--global-batch", "16", "--schedule",
                 "1f1b"})
                .code,
            0);
  EXPECT_EQ((*readJsonFile(path("plan.json")))["schedule"], "1f1b");
  ASSERT_EQ(run({"plan", "--model", "gpt", "--device", "k80", "--workers", "4", "--global-batch", "16", "--schedule",
                 "interleaved", "--chunks", "2", "--stages", "2"})
                .code,
            0);
  const Json interleaved = *readJsonFile(path("plan.json"));
  EXPECT_EQ(interleaved["schedule"], "interleaved");
  EXPECT_EQ(interleaved["chunks"], 2);
  EXPECT_EQ(interleaved["stages"][0]["chunks"].size(), 2u);
  expectError({"plan", "--model", "gpt", "--device", "k80", "--workers", "4", "--global-batch", "16", "--schedule",
               "interleaved", "--chunks", "17"},
              "--chunks");
}

// Issue 15 §3, as written but for the device (k80: no calibration): the best
// plan with and without tensor parallelism side by side, the chosen plan's
// strategy as p×t×d, plan.json's tensor_parallel; and §6's bad input.
TEST_F(Cli, PlanTensorParallel) {
  const std::vector<std::string> gpt = {"plan", "--model", "gpt", "-O", "layers=8", "-O", "hidden=256", "-O",
                                        "heads=4", "-O", "vocab=1024", "-O", "seq_len=128", "--device", "k80",
                                        "--workers", "8", "--global-batch", "64"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = gpt;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const Outcome r = run(with({"--schedule", "auto"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Best plan without and with tensor parallelism"), std::string::npos) << r.out;
  std::smatch without, tensor;
  ASSERT_TRUE(std::regex_search(r.out, without, std::regex(R"(\n  ([* ])  without  +(p\d+×t1×d\d+) )"))) << r.out;
  ASSERT_TRUE(
      std::regex_search(r.out, tensor, std::regex(R"(\n  ([* ])  with tensor parallelism  (p\d+×t[24]×d\d+) )")))
      << r.out;
  EXPECT_NE(without[1].str() == "*", tensor[1].str() == "*") << "exactly one of them is chosen\n" << r.out;
  auto plan = readJsonFile(path("plan.json"));
  ASSERT_TRUE(plan.ok());
  const Json& j = *plan;
  const int t = j["strategy"]["tensor_parallel"].get<int>();
  EXPECT_EQ(t * j["strategy"]["pipeline_stages"].get<int>() * j["strategy"]["data_parallel"].get<int>(), 8);
  EXPECT_EQ(t > 1, tensor[1].str() == "*");
  EXPECT_NE(r.out.find("Chosen: " + (t > 1 ? tensor[2].str() : without[2].str())), std::string::npos) << r.out;
  // The issue's command as written, on this CPU (calibrated: about 10 s).
  std::vector<std::string> cpu = with({"--schedule", "auto"});
  std::replace(cpu.begin(), cpu.end(), std::string("k80"), std::string("cpu"));
  const Outcome onCpu = run(cpu);
  ASSERT_EQ(onCpu.code, 0) << onCpu.err;
  EXPECT_NE(onCpu.out.find("Best plan without and with tensor parallelism"), std::string::npos) << onCpu.out;
  // Pinned.
  ASSERT_EQ(run(with({"--tensor-parallel", "2", "--schedule", "1f1b"})).code, 0);
  EXPECT_EQ((*readJsonFile(path("plan.json")))["strategy"]["tensor_parallel"], 2);
  ASSERT_EQ(run(with({"--tensor-link-workers", "1"})).code, 0);
  EXPECT_EQ((*readJsonFile(path("plan.json")))["strategy"]["tensor_parallel"], 1);
  // Bad input: one line naming the constraint and the values that keep it.
  expectError(with({"--tensor-parallel", "3"}), "--tensor-parallel 3 does not divide heads=4: use 1, 2 or 4");
  expectError(with({"--tensor-parallel", "2", "--stages", "2", "--data-parallel", "4"}),
              "--tensor-parallel 2 × --stages 2 × --data-parallel 4 needs 16 workers but --workers is 8: use "
              "--data-parallel 2");
  expectError(with({"--tensor-parallel", "0"}), "--tensor-parallel");
  expectError({"plan", "--model", "cnn", "--device", "k80", "--workers", "4", "--global-batch", "16",
               "--tensor-parallel", "2"},
              "--tensor-parallel 2: cnn has no layer that tensor parallelism splits (transformer, embedding or "
              "lm_head): use 1");
}

// Issue 11 §3: PipeDream's optimizer on its published VGG-16 profile, one
// level and two, as written; and its mistakes.
// PipeDream-2BW's planner (issue 11 §3): its table of every d × p with the
// best microbatch size, recomputation and schedule; Hydrozoa then cuts and
// sizes the choice as a runnable plan.json (2bw or 1f1b, the pins agreeing).
TEST_F(Cli, TwoBwPlanner) {
  const std::vector<std::string> base = {"plan", "--model", "gpt", "-O", "layers=8", "-O", "hidden=256", "-O",
                                         "heads=4", "-O", "vocab=1024", "-O", "seq_len=128", "--device", "k80",
                                         "--workers", "8", "--planner", "2bw"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = base;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  const Outcome r = run(with({"--global-batch", "64", "--bandwidth", "1GB/s,100MB/s"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("PipeDream-2BW's planner: 8 workers, batch 64, 1.00 GB/s between stages, 100 MB/s between "
                       "replicas"),
            std::string::npos)
      << r.out;
  for (const char* split : {"1×8", "2×4", "4×2", "8×1"}) EXPECT_NE(r.out.find(split), std::string::npos) << split;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(\n  \*  (\d+)×(\d+)  (2bw|1f1b \(flush\)) +(\d+) +(\d+) +(yes|no) )")))
      << r.out;
  auto plan = readJsonFile(path("plan.json"));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ((*plan)["strategy"]["data_parallel"], std::stoi(m[1].str()));
  EXPECT_EQ((*plan)["strategy"]["pipeline_stages"], std::stoi(m[2].str()));
  EXPECT_EQ((*plan)["schedule"], m[3].str() == "2bw" ? "2bw" : "1f1b");
  EXPECT_EQ((*plan)["microbatch_size"], std::stoi(m[4].str()));
  EXPECT_EQ((*plan)["num_microbatches"], std::stoi(m[5].str()));
  EXPECT_EQ((*plan)["recompute"], m[6].str() == "yes");
  expectError(with({"--global-batch", "64", "--schedule", "gpipe"}), "--planner 2bw chooses between 2bw and 1f1b");
  expectError(with({"--global-batch", "64", "--bandwidth", "1GB/s,1GB/s,1GB/s"}), "--bandwidth IN[,CROSS]");
  expectError(with({}), "--planner 2bw needs --global-batch");
  expectError(with({"--global-batch", "64", "--memory", "1MB"}), "1.00 MB");
  // The schedule itself, pinned with fewer microbatches than stages.
  expectError({"plan", "--model", "gpt", "--device", "k80", "--workers", "3", "--stages", "3", "--microbatches", "2",
               "--global-batch", "16", "--schedule", "2bw"},
              "the 2bw schedule needs at least as many microbatches (2) as stages (3)");
}

TEST_F(Cli, PipeDreamPlannerAsWritten) {
  const std::string vgg = std::string(HYDROZOA_SOURCE_DIR) + "/tests/fixtures/pipedream/vgg16.graph.txt";
  Outcome r = run({"plan", "--profile", vgg, "--planner", "pipedream", "--machines", "4", "--bandwidth", "1GB/s"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Level 1: 4 machines at"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Time per microbatch of the slowest stage: 176 ms"), std::string::npos) << r.out;
  r = run({"plan", "--profile", vgg, "--planner", "pipedream", "--machines", "4,4", "--bandwidth", "10GB/s,1GB/s",
           "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_NEAR(j["time_per_stage_seconds"].get<double>(), 0.0443458714667, 1e-9);
  EXPECT_EQ(j["levels"].size(), 2u);
  expectError({"plan", "--profile", vgg, "--planner", "pipedream"}, "--planner pipedream needs --machines");
  expectError({"plan", "--profile", vgg, "--planner", "pipedream", "--machines", "4,4", "--bandwidth", "1GB/s"},
              "one --bandwidth per level");
  expectError({"plan", "--profile", vgg, "--planner", "pipedream", "--machines", "0", "--bandwidth", "1GB/s"},
              "--machines");
  expectError({"plan", "--profile", vgg, "--planner", "gavel", "--workers", "2"}, "unknown planner \"gavel\"");
  // -o: the partition as a plan.json, its stages replicated unevenly.
  r = run({"plan", "--profile", vgg, "--planner", "pipedream", "--machines", "4", "--bandwidth", "1GB/s", "-o",
           "plan.json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Wrote plan.json (schedule pipedream; its workers unsized and unpriced: a graph.txt names no "
                       "device)"),
            std::string::npos)
      << r.out;
  auto p = plan::loadPlan(path("plan.json"));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->schedule, plan::ScheduleKind::kPipeDream);
  EXPECT_EQ(p->replicasOf(0), 3);
  EXPECT_EQ(p->replicasOf(1), 1);
}

// `hydrozoa allocate` as issue 13 writes it, on examples/cluster (the
// thesis's worked example as files): the table, --json's shape and values,
// and every mistake one line naming it (docs/cluster.md).
TEST_F(Cli, AllocateAsWritten) {
  const std::string ex = std::string(HYDROZOA_SOURCE_DIR) + "/examples/cluster/";
  const std::vector<std::string> base = {"allocate", "--throughputs", ex + "throughputs.json", "--jobs",
                                         ex + "jobs.trace", "--cluster", "v100=1,k80=1"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = base;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  Outcome r = run(with({"--policy", "max_min_fairness"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("objective: 0.727273"), std::string::npos) << r.out;
  r = run(with({"--policy", "max_min_fairness", "--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_NEAR(j["objective"].get<double>(), 8.0 / 11, 1e-9);
  EXPECT_NEAR(j["allocation"]["0"]["v100"].get<double>(), 5.0 / 11, 1e-9);
  EXPECT_NEAR(j["allocation"]["2"]["k80"].get<double>(), 10.0 / 11, 1e-9);
  for (const char* policy : {"finish_time_fairness", "min_makespan", "max_total_throughput", "fifo",
                             "max_min_fairness_agnostic", "min_makespan_agnostic"}) {
    r = run(with({"--policy", policy, "--json"}));
    EXPECT_EQ(r.code, 0) << policy << ": " << r.err;
  }
  expectError(with({"--policy", "sjf"}), "unknown policy \"sjf\"; known: max_min_fairness");
  // Entities for the hierarchical policy.
  r = run(with({"--policy", "hierarchical", "--entities", "team=2:fairness:0-2,solo=1:fifo:2-3", "--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  expectError(with({"--policy", "hierarchical"}), "policy hierarchical needs entities (--entities");
  expectError(with({"--policy", "hierarchical", "--entities", "team=2:fairness:0-2"}),
              "job 2 (Transformer (batch size 128)) belongs to no entity");
  expectError(with({"--policy", "hierarchical", "--entities", "team=2:lottery:0-3"}), "\"team=2:lottery:0-3\" is not");
  expectError(with({"--policy", "hierarchical", "--entities", "a=1:fifo:0-2,b=1:fifo:1-3"}),
              "job 1 is in both a and b");
  expectError(with({"--policy", "hierarchical", "--entities", "a=1:fifo:0-9"}), "a's jobs 0-9 are not a range");
  // The cost policies: prices per worker-hour, a budget.
  r = run(with({"--policy", "min_cost", "--prices", "v100=3.06,k80=0.9", "--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NEAR(Json::parse(r.out)["allocation"]["0"]["v100"].get<double>(), 1, 1e-6);  // ResNet-50: V100 per dollar
  r = run(with({"--policy", "min_makespan_budget", "--prices", "v100=3.06,k80=0.9", "--budget", "100", "--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  expectError(with({"--policy", "min_cost"}), "policy min_cost needs a price per worker type (--prices");
  expectError(with({"--policy", "min_cost", "--prices", "v100=3.06"}), "--prices: no price for k80");
  expectError(with({"--policy", "min_cost", "--prices", "v100=3.06,k80=free"}), "--prices: \"k80=free\" is not");
  expectError(with({"--policy", "min_makespan_budget", "--prices", "v100=3.06,k80=0.9"}),
              "needs a budget in dollars (--budget");
  expectError(with({"--policy", "min_makespan_budget", "--prices", "v100=3.06,k80=0.9", "--budget", "0.01"}),
              "no allocation finishes the jobs within $0.01");
  std::ofstream(path("short.trace")) << "A3C\t-\t-\t-\t0\t5000\t1\t1\t-1\n";
  expectError({"allocate", "--throughputs", ex + "throughputs.json", "--jobs", "short.trace", "--cluster", "v100=1"},
              "short.trace:1: 9 tab-separated fields, expected 10");
  std::ofstream(path("other.trace")) << "VGG-16\t-\t-\t-\t0\t5000\t1\t1\t-1\t0\n";
  expectError({"allocate", "--throughputs", ex + "throughputs.json", "--jobs", "other.trace", "--cluster", "v100=1"},
              "job 0 (VGG-16, 1 worker) has no throughput");
  expectError({"allocate", "--throughputs", ex + "throughputs.json", "--jobs", ex + "jobs.trace", "--cluster",
               "v100=1,a100=2"},
              "worker type a100 has no throughputs (the file has k80, v100)");
  expectError({"allocate", "--throughputs", ex + "throughputs.json", "--jobs", ex + "jobs.trace", "--cluster", "v100"},
              "--cluster: \"v100\" is not TYPE=COUNT");
  expectError({"allocate", "--throughputs", "missing.json", "--jobs", ex + "jobs.trace", "--cluster", "v100=1"},
              "missing.json");
}

// `hydrozoa simulate` as issue 13 writes it, on examples/cluster: every
// policy side by side, --json with each job's finish and finish-time
// fairness, mistakes named.
TEST_F(Cli, SimulateAsWritten) {
  const std::string ex = std::string(HYDROZOA_SOURCE_DIR) + "/examples/cluster/";
  const std::vector<std::string> base = {"simulate", "--trace", ex + "jobs.trace", "--throughputs",
                                         ex + "throughputs.json", "--cluster", "v100=1,k80=1"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = base;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  Outcome r = run(with({"--policy", "all"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("3 jobs of"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("max_min_fairness_agnostic"), std::string::npos) << r.out;
  r = run(with({"--policy", "max_min_fairness", "--round", "1min", "--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  ASSERT_EQ(j["jobs"].size(), 3u);
  for (const Json& job : j["jobs"]) {
    EXPECT_GT(job["finish"].get<double>(), job["arrival"].get<double>());
    EXPECT_GT(job["finish_time_fairness"].get<double>(), 0);
    EXPECT_LE(job["finish_time_fairness"].get<double>(), j["finish_time_fairness"]["max"].get<double>());
  }
  EXPECT_GT(j["average_jct_seconds"].get<double>(), 0);
  EXPECT_GT(j["finish_time_fairness"]["mean"].get<double>(), 0);
  // A generated trace, kept, its steady state measured.
  r = run({"simulate", "--generate", "60", "--rate", "2", "--seed", "3", "--throughputs", ex + "throughputs.json",
           "--cluster", "v100=2,k80=2", "--measure", "20-40", "--write-trace", "gen.trace", "--policy", "all"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("60 jobs of a continuous-single trace at 2 jobs/h (seed 3)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("average JCT of jobs 20-40"), std::string::npos) << r.out;
  std::ifstream kept(path("gen.trace"));
  int lines = 0;
  for (std::string line; std::getline(kept, line);) ++lines;
  EXPECT_EQ(lines, 60);
  expectError({"simulate", "--throughputs", ex + "throughputs.json", "--cluster", "v100=1"},
              "give the jobs as --trace FILE or --generate N --rate JOBS_PER_HOUR");
  expectError({"simulate", "--generate", "10", "--rate", "0", "--throughputs", ex + "throughputs.json", "--cluster",
               "v100=1"},
              "--rate: jobs per hour, above 0");
  expectError(with({"--measure", "5"}), "--measure 5: expected FIRST-LAST");
  expectError(with({"--measure", "1-9"}), "the jobs measured, 1 to 9, are not a range of the trace's 0 to 3");
  expectError(with({"--policy", "lottery"}), "unknown policy \"lottery\"");
  expectError(with({"--round", "0s"}), "--round must be from 1 s to 24 h");
  r = run(with({"--preemption-cost", "30s", "--policy", "shortest_job_first"}));
  EXPECT_EQ(r.code, 0) << r.err;
  expectError(with({"--preemption-cost", "10min"}), "--preemption-cost must be from 0 s to less than a round");
  // As Gavel's own simulator: no new allocation sooner than 32 minutes after
  // the last; idle workers left idle (the mechanism as it was).
  for (const std::vector<std::string>& gavel :
       {std::vector<std::string>{"--reallocate-after", "32min"}, std::vector<std::string>{"--no-fill-idle"}}) {
    r = run(with(gavel));
    EXPECT_EQ(r.code, 0) << r.err;
  }
  expectError(with({"--reallocate-after", "soon"}), "--reallocate-after: \"soon\" is not a duration");
  expectError({"simulate", "--trace", "none.trace", "--throughputs", ex + "throughputs.json", "--cluster", "v100=1"},
              "none.trace");
}

// Space sharing (issue 13 §3): pairs from the throughputs file, as rows
// "(a, b)" of the allocation; policies that do not weigh them say so.
TEST_F(Cli, SpaceSharingAllocatesAndSimulatesPairs) {
  const std::string ex = std::string(HYDROZOA_SOURCE_DIR) + "/examples/cluster/";
  const std::vector<std::string> allocate = {"allocate", "--throughputs", ex + "throughputs.json", "--jobs",
                                             ex + "jobs.trace", "--cluster", "v100=1,k80=1", "--space-sharing"};
  auto with = [](std::vector<std::string> args, std::vector<std::string> more) {
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  Outcome r = run(with(allocate, {"--policy", "max_total_throughput", "--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  ASSERT_TRUE(j["allocation"].contains("(0, 1)")) << r.out;  // ResNet-50 and A3C share the V100
  EXPECT_GT(j["allocation"]["(0, 1)"]["v100"].get<double>(), 0.5) << r.out;
  r = run(with(allocate, {"--policy", "max_min_fairness"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(0, 1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("shared"), std::string::npos) << r.out;
  expectError(with(allocate, {"--policy", "min_cost", "--prices", "v100=3,k80=1"}),
              "policy min_cost does not space-share; drop --space-sharing");
  r = run({"simulate", "--trace", ex + "jobs.trace", "--throughputs", ex + "throughputs.json", "--cluster",
           "v100=1,k80=1", "--prices", "v100=3,k80=1", "--policy", "all", "--space-sharing"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("max_total_throughput"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("  min_cost "), std::string::npos) << r.out;  // left out: it does not space-share
  EXPECT_NE(r.out.find("min_cost_agnostic"), std::string::npos) << r.out;  // the agnostic forms drop the pairs
  EXPECT_EQ(r.out.find("failed"), std::string::npos) << r.out;
}

// Spot workers (issue 13 §6): prices from a VM catalog, spot workers drawn
// coming and going and the draw kept; replaying it gives the same run.
TEST_F(Cli, SimulateOnTheSpotMarket) {
  const std::string ex = std::string(HYDROZOA_SOURCE_DIR) + "/examples/cluster/";
  const std::vector<std::string> base = {"simulate", "--trace", ex + "jobs.trace", "--throughputs",
                                         ex + "throughputs.json", "--cluster", "v100=1,k80:spot=2", "--round", "1min",
                                         "--preemption-cost", "10s"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = base;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  Outcome r = run(with({"--prices", "gcp-vm", "--spot-uptime", "5min", "--spot-downtime", "2min", "--seed", "4",
                        "--write-spot-trace", "spot.trace"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("reclaimed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("$"), std::string::npos) << r.out;
  r = run(with({"--prices", "gcp-vm", "--spot-uptime", "5min", "--spot-downtime", "2min", "--seed", "4", "--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const Json drawn = Json::parse(r.out);
  EXPECT_GT(drawn["reclaimed"].get<int>(), 0) << r.out;
  r = run(with({"--prices", "gcp-vm", "--spot-trace", path("spot.trace"), "--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const Json replayed = Json::parse(r.out);
  EXPECT_EQ(replayed["reclaimed"], drawn["reclaimed"]);
  EXPECT_NEAR(replayed["average_jct_seconds"].get<double>(), drawn["average_jct_seconds"].get<double>(), 1.0);
  EXPECT_NEAR(replayed["cost_usd"].get<double>(), drawn["cost_usd"].get<double>(), 0.01);
  // Prices given by hand, a spot trace of one's own.
  {
    std::ofstream out(path("mine.trace"));
    out << "0 k80:spot price 0.2\n300 k80:spot available 0\n900 k80:spot available 2\n";
  }
  r = run(with({"--prices", "v100=2.67,k80:spot=0.175", "--spot-trace", path("mine.trace"), "--policy", "min_cost"}));
  EXPECT_EQ(r.code, 0) << r.err;
  expectError(with({"--prices", "aws-vm"}), "--prices aws-vm: catalog aws-vm sells no k80 spot instance");
  expectError(with({"--spot-trace", path("mine.trace"), "--spot-uptime", "1h"}), "one of the two");
  expectError(with({"--write-spot-trace", "x.trace"}), "--write-spot-trace writes the spot trace");
  {
    std::ofstream out(path("bad.trace"));
    out << "0 k80:spot available 3\n";
  }
  expectError(with({"--spot-trace", path("bad.trace")}),
              "bad.trace:1: available \"3\" is not a count of workers from 0 to k80:spot's 2");
  expectError({"simulate", "--trace", ex + "jobs.trace", "--throughputs", ex + "throughputs.json", "--cluster",
               "v100=1", "--spot-uptime", "1h"},
              "no spot worker types in the cluster");
}

// Proteus's BidBrain as issue 16 writes it: four strategies on the example
// history, BidBrain the cheapest of the spot ones on a job long enough to
// bid for; a synthetic history written in the cloud's format and replayed
// the same; bad input named.
TEST_F(Cli, BidBrainAsWritten) {
  const std::string src = std::string(HYDROZOA_SOURCE_DIR) + "/";
  Outcome r = run({"simulate", "--bidbrain", "--spot-trace", src + "examples/spot_prices.json", "--job",
                   src + "examples/fashion_mnist_cnn.yaml"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"on-demand", "spot+checkpoint", "fixed bid", "bidbrain", "180000 samples"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  // The thesis's footprint (64 instances, a 2-hour job on demand): BidBrain
  // the cheapest (on a small one the reliable instance's price outweighs
  // what it saves).
  r = run({"simulate", "--bidbrain", "--spot-trace", src + "examples/spot_prices.json", "--work-hours", "128",
           "--tiers", "reliable=1,transient=63", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  ASSERT_EQ(j["strategies"].size(), 4u);
  const double onDemand = j["strategies"][0]["cost_usd"], checkpoint = j["strategies"][1]["cost_usd"],
               bidbrain = j["strategies"][3]["cost_usd"];
  EXPECT_LT(bidbrain, checkpoint) << r.out;
  EXPECT_LT(bidbrain, 0.2 * onDemand) << r.out;
  EXPECT_EQ(j["learnt_hours"], 24);  // the first half of the 2-day history
  EXPECT_GT(j["strategies"][3]["decisions"], 0);
  EXPECT_EQ(j["strategies"][3]["lost_instance_hours"], 0);

  r = run({"simulate", "--bidbrain", "--synthetic-spot-days", "1", "--seed", "2", "--write-spot-trace",
           path("synthetic.json"), "--work-hours", "8", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Outcome again = run({"simulate", "--bidbrain", "--spot-trace", path("synthetic.json"), "--work-hours", "8",
                             "--json"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(Json::parse(again.out), Json::parse(r.out));

  expectError({"simulate", "--bidbrain", "--work-hours", "8"}, "--bidbrain needs a spot price history");
  expectError({"simulate", "--bidbrain", "--spot-trace", src + "examples/spot_prices.json", "--work-hours", "8",
               "--tiers", "reliable=0,transient=4"},
              "leaves no reliable worker, and the training state lives on the reliable tier");
  {
    std::ofstream out(path("no_prices.json"));
    out << R"({"SpotPriceHistory": [{"InstanceType": "m4.large", "AvailabilityZone": "us-east-1a",
              "ProductDescription": "Linux/UNIX", "SpotPrice": "0.02", "Timestamp": "2016-03-14T00:00:00Z"}]})";
  }
  expectError({"simulate", "--bidbrain", "--spot-trace", path("no_prices.json"), "--work-hours", "8"},
              "records for m4.large but no on-demand price for it");
  expectError({"simulate", "--bidbrain", "--spot-trace", path("no_prices.json"), "--work-hours", "8", "--on-demand",
               "m4.large=0.1"},
              "no work rate for m4.large: BidBrain weighs each type by the work an instance of it does in an hour "
              "(ν; the thesis uses its vCPUs): add --work-rate m4.large=N");
  r = run({"simulate", "--bidbrain", "--spot-trace", path("no_prices.json"), "--work-hours", "8", "--on-demand",
           "m4.large=0.1", "--work-rate", "m4.large=2"});
  EXPECT_EQ(r.code, 0) << r.err;
  expectError({"simulate", "--bidbrain", "--spot-trace", path("no_prices.json"), "--work-hours", "8", "--on-demand",
               "m4.large=0.1", "--work-rate", "m4.large=two"},
              "--work-rate: \"m4.large=two\" is not TYPE=WORK_PER_HOUR");
  expectError({"simulate", "--bidbrain", "--spot-trace", src + "examples/spot_prices.json", "--work-hours", "8",
               "--scaling", "2"},
              "the scaling factor φ must be in (0, 1]");
  expectError({"simulate", "--bidbrain", "--spot-trace", path("no_prices.json"), "--work-hours", "8",
               "--on-demand", "m4.large"},
              "--on-demand: \"m4.large\" is not TYPE=USD_PER_HOUR");
  std::ofstream(path("other.json")) << R"({"prices": []})";
  expectError({"simulate", "--bidbrain", "--spot-trace", path("other.json"), "--work-hours", "8"},
              "expected the cloud's spot price history");
}

// The issue's command (FuncPipe's co-optimiser on Lambda): the frontier,
// fastest first, its recommendation marked, --json; bad input named.
TEST_F(Cli, FuncPipePlannerAsWritten) {
  const std::string k80 = std::string(HYDROZOA_TEST_DATA_DIR) + "/profile_cnn_k80.json";
  Outcome r = run({"plan", "--platform", "lambda", "--planner", "funcpipe", "--profile", k80, "--workers", "16"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("FuncPipe's co-optimiser on lambda"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cheapest"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  *  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MILPs solved exactly (COIN-OR CBC)"), std::string::npos) << r.out;
  r = run({"plan", "--platform", "alibaba-fc", "--planner", "funcpipe", "--profile", k80, "--workers", "8",
           "--global-batch", "32", "--latency", "5ms", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  ASSERT_GE(j["frontier"].size(), 1u);
  int recommended = 0;
  for (const Json& p : j["frontier"]) {
    recommended += p["recommended"].get<bool>();
    EXPECT_LE(p["data_parallel"].get<int>() * static_cast<int>(p["stages"].size()), 8);
    EXPECT_EQ(p["microbatches"].get<int>() * p["microbatch_size"].get<int>(), 32);
  }
  EXPECT_EQ(recommended, 1);
  expectError({"plan", "--platform", "aci", "--planner", "funcpipe", "--profile", k80, "--workers", "4"},
              "platform aci is not a function platform");
  expectError({"plan", "--platform", "lambda", "--planner", "funcpipe", "--profile", k80}, "needs --workers");
  // -o: the recommendation as a plan to train (--launcher function).
  r = run({"plan", "--platform", "lambda", "--planner", "funcpipe", "--profile", k80, "--workers", "4", "-o",
           "p.json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Wrote p.json (the recommendation"), std::string::npos) << r.out;
  auto written = readJsonFile(path("p.json"));
  ASSERT_TRUE(written.ok()) << written.status().message();
  EXPECT_EQ((*written)["inputs"]["platform"], "lambda");
  EXPECT_LE((*written)["strategy"]["data_parallel"].get<int>() * static_cast<int>((*written)["stages"].size()), 4);
  for (const Json& st : (*written)["stages"]) {
    const double gb = st["worker"]["memory_bytes"].get<double>() / 1e9;
    EXPECT_TRUE(gb == 0.512 || gb == 1 || gb == 2 || gb == 3 || gb == 4 || gb == 6 || gb == 8 || gb == 10) << gb;
  }
  // --frontier-point N: the frontier's N-th configuration (the fastest
  // first), as the bench trains each (bench/funcpipe_choice_bench.sh).
  r = run({"plan", "--platform", "lambda", "--planner", "funcpipe", "--profile", k80, "--workers", "4", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Json frontier = Json::parse(r.out)["frontier"];
  const std::string last = std::to_string(frontier.size());
  r = run({"plan", "--platform", "lambda", "--planner", "funcpipe", "--profile", k80, "--workers", "4", "-o",
           "last.json", "--frontier-point", last});
  ASSERT_EQ(r.code, 0) << r.err;
  auto cheapest = readJsonFile(path("last.json"));
  ASSERT_TRUE(cheapest.ok()) << cheapest.status().message();
  EXPECT_EQ((*cheapest)["strategy"]["data_parallel"], frontier.back()["data_parallel"]);
  EXPECT_EQ((*cheapest)["stages"].size(), frontier.back()["stages"].size());
  EXPECT_EQ((*cheapest)["stages"][0]["worker"]["memory_bytes"], frontier.back()["stages"][0]["memory_bytes"]);
  expectError({"plan", "--platform", "lambda", "--planner", "funcpipe", "--profile", k80, "--workers", "4", "-o",
               "x.json", "--frontier-point", std::to_string(frontier.size() + 1)},
              "--frontier-point " + std::to_string(frontier.size() + 1) + ": the frontier has " + last);
  expectError({"plan", "--platform", "lambda", "--planner", "funcpipe", "--profile", k80, "--workers", "4",
               "--frontier-point", "1"},
              "give -o plan.json too");
  expectError({"plan", "--platform", "lambda", "--planner", "funcpipe", "--profile", k80, "--workers", "4",
               "--latency", "soon"},
              "--latency");
  expectError({"plan", "--platform", "lambda", "--planner", "funcpipe", "--profile", k80, "--workers", "4",
               "--merge-layers", "1"},
              "--merge-layers");
  // Merged down to 2 layers for the program: stages still name the profile's layers.
  r = run({"plan", "--platform", "lambda", "--planner", "funcpipe", "--profile", k80, "--workers", "4",
           "--merge-layers", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("over 2 layers (the profile's 4 merged by compute time)"), std::string::npos) << r.out;
}

// Hydrozoa's search under the pipedream schedule weighs PipeDream's stages
// replicated unevenly beside the even strategies, and here chooses them.
TEST_F(Cli, PipeDreamScheduleSearchesStagesReplicatedUnevenly) {
  const std::string k80 = std::string(HYDROZOA_TEST_DATA_DIR) + "/profile_cnn_k80.json";
  const Outcome r = run({"plan", "--profile", k80, "--workers", "5", "--global-batch", "128", "--schedule", "pipedream",
                         "--bandwidth", "1GB/s", "-o", "rr.json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("*  1+2+1+1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1F1B-RR: stages replicated unevenly"), std::string::npos) << r.out;
  auto p = plan::loadPlan(path("rr.json"));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_FALSE(p->evenlyReplicated());
  EXPECT_EQ(p->workersUsed(), 5);
  EXPECT_EQ(p->globalBatch(), 128);
  // A pinned strategy keeps to the even rows.
  const Outcome pinned = run({"plan", "--profile", k80, "--workers", "5", "--global-batch", "128", "--schedule",
                              "pipedream", "--bandwidth", "1GB/s", "--stages", "1", "-o", "-"});
  ASSERT_EQ(pinned.code, 0) << pinned.err;
  EXPECT_EQ(pinned.out.find("1F1B-RR"), std::string::npos) << pinned.out;
}

// Issue 9 §2: `--device cpu` calibrates this CPU per layer kind, says so,
// and --save-device writes the calibration, which a later plan reuses.
TEST_F(Cli, CpuDeviceCalibratedSavedAndReused) {
  Outcome r = run({"profile", "--model", "cnn", "--device", "cpu", "--microbatch-sizes", "4,8", "--save-device",
                   "cpu.yaml", "-o", "cnn-cpu.json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("per-kind time factors at microbatch 8 (forward / backward): "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("input_conv ×"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("Wrote cpu.yaml"), std::string::npos) << r.out;
  auto saved = readYamlFile(path("cpu.yaml"));
  ASSERT_TRUE(saved.ok()) << saved.status().message();
  EXPECT_EQ((*saved)["name"], "cpu");
  EXPECT_TRUE((*saved)["kinds"].contains("conv"));
  EXPECT_TRUE((*saved)["kinds"].contains("input_conv"));
  EXPECT_TRUE(saved->contains("fresh_memory_bandwidth"));

  // The saved file is a device like any other: no second calibration.
  r = run({"plan", "--model", "cnn", "--device", "cpu.yaml", "--workers", "2", "--global-batch", "32"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err.find("calibrating"), std::string::npos) << r.err;
  auto plan = readJsonFile(path("plan.json"));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ((*plan)["profile"]["device"], "cpu");

  expectError({"profile", "--model", "cnn", "--save-device", "x.yaml"}, "add --device");
  EXPECT_FALSE(fs::exists(path("x.yaml")));
}

// NOTE [Profiles on a GPU]: `--on` takes cpu, cuda or cuda:N; without a
// usable GPU, cuda is refused with the count (the measurement itself runs
// in scripts/gpu-check's gpu tests); --on and --device exclude each other.
TEST_F(Cli, ProfileOnAGpuNeedsOne) {
  expectError({"profile", "--model", "cnn", "--on", "tpu"}, "--on tpu: use cpu, cuda or cuda:N");
  expectError({"profile", "--model", "cnn", "--on", "cuda", "--device", "h100"}, "give one of them");
  if (fs::exists("/dev/nvidiactl")) GTEST_SKIP() << "this machine has an NVIDIA driver: the refusal may not happen";
  expectError({"profile", "--model", "cnn", "--on", "cuda:1", "-o", "g.json"},
              "--on cuda:1: this machine has 0 usable CUDA device(s)");
  EXPECT_FALSE(fs::exists(path("g.json")));
}

TEST_F(Cli, PipeDreamGraphPinnedAsWrittenIsExactlyR) {
  fs::copy_file(kGraph, path("graph.txt"));
  const Outcome r = run({"plan", "--profile", "graph.txt", "--data-parallel", "1", "--stages", "4", "--microbatches", "8",
                     "--bandwidth", "100MB/s", "-o", "plan.json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto plan = readJsonFile(path("plan.json"));
  ASSERT_TRUE(plan.ok());
  const Json& j = *plan;
  EXPECT_EQ(j["strategy"]["data_parallel"], 1);
  EXPECT_EQ(j["strategy"]["pipeline_stages"], 4);
  EXPECT_EQ(j["num_microbatches"], 8);
  // Recompute R from the graph's numbers (ms, bytes) and the plan's stages.
  plan::ChainCosts c{{1.0e-3, 0.1e-3, 2.0e-3, 0, 0, 0.5e-3},
                     {2.0e-3, 0.1e-3, 4.0e-3, 0, 0, 1.0e-3},
                     {16000 / 100e6, 16000 / 100e6, 8000 / 100e6, 8004 / 100e6, 8000 / 100e6}};
  plan::Partition p;
  for (const auto& s : j["stages"]) p.first.push_back(s["first_layer"].get<int>());
  EXPECT_NEAR(j["predicted"]["iteration_seconds"].get<double>(), plan::pipelineTime(c, p, 8).total, 1e-12);
}

TEST_F(Cli, TorchScriptModelProfilesAndPlans) {
  write("make.py",
        "import torch, torch.nn as nn\n"
        "m = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8*14*14, 10))\n"
        "torch.jit.script(m).save('model.pt')\n");
  FILE* f = ::popen(("cd " + dir_.string() + " && " HYDROZOA_PYTHON " make.py 2>&1").c_str(), "r");
  ASSERT_NE(f, nullptr);
  char buf[2048] = {0};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  const int rc = ::pclose(f);
  ASSERT_EQ(rc, 0) << HYDROZOA_PYTHON << " (scripts/setup makes it) failed: " << std::string(buf, n);
  Outcome r = run({"profile", "--model", "model.pt", "-O", "input_shape=1x28x28", "--microbatch-sizes", "1,2", "--repeats",
               "2", "-o", "ts.json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("script"), std::string::npos);
  r = run({"plan", "--profile", "ts.json", "--workers", "2", "--bandwidth", "1Gbit/s", "--global-batch", "8"});
  ASSERT_EQ(r.code, 0) << r.err;
}

TEST_F(Cli, ShowValidatesAndPrintsEachKind) {
  tinyProfile();
  ASSERT_EQ(run({"plan", "--profile", "p.json", "--workers", "2", "--bandwidth", "1Gbit/s", "-o", "plan.json"}).code, 0);
  fs::copy_file(kGraph, path("graph.txt"));
  EXPECT_NE(run({"show", "p.json"}).out.find("Profile of cnn"), std::string::npos);
  EXPECT_NE(run({"show", "plan.json"}).out.find("Chosen:"), std::string::npos);
  EXPECT_NE(run({"show", "graph.txt"}).out.find("pipedream"), std::string::npos);
  // A profile with the network probe's figures shows them, the shared-memory allreduce's too.
  const Outcome measured = run({"show", std::string(HYDROZOA_TEST_DATA_DIR) + "/profile_cnn_k80.json"});
  EXPECT_NE(measured.out.find("Allreduce through shared memory (replicas on one machine): 4.2e-10 s/B"),
            std::string::npos)
      << measured.out;
  write("other.json", "{\"schema\": \"something/1\"}");
  expectError({"show", "other.json"}, "not a hydrozoa profile or plan");
}

TEST_F(Cli, ProfileWithNetworkFeedsThePlan) {
  Outcome r = run({"profile", "--model", "mlp", "--microbatch-sizes", "1", "--repeats", "1", "--network", "-o", "p.json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Network:"), std::string::npos);
  r = run({"plan", "--profile", "p.json", "--workers", "2", "--global-batch", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("measured, from the profile"), std::string::npos) << r.err;
  // The probe's workers meet through its store with its token (issue 10 §1); without one, one line.
  expectError({"netprobe-worker", "--join", "tcp://127.0.0.1:1", "--rank", "0", "--world", "2", "--sizes", "8,16"},
              "needs the probe's token ($HYDROZOA_TOKEN)");
}

// --- bad input (issue §6): each one line, non-zero, naming the thing ------------

TEST_F(Cli, UnknownModel) {
  expectError({"profile", "--model", "resnet35"}, "unknown model \"resnet35\"");
  expectError({"plan", "--model", "resnet35", "--device", "k80", "--workers", "4"}, "unknown model \"resnet35\"");
  expectError({"profile", "--model", "resnet18", "-O", "imagesize=32"}, "unknown option \"imagesize\"");
}

TEST_F(Cli, MalformedOrTruncatedProfile) {
  const std::string p = tinyProfile();
  const std::string text = slurp(p);
  write("trunc.json", text.substr(0, text.size() / 2));
  expectError({"plan", "--profile", "trunc.json", "--workers", "2"}, "trunc.json: not valid JSON");
  expectError({"plan", "--profile", "trunc.json", "--workers", "2"}, "truncated");
  auto j = *readJsonFile(p);
  j["measurements"][0]["layers"][2]["backward_ms"] = "fast";
  write("bad.json", j.dump());
  expectError({"plan", "--profile", "bad.json", "--workers", "2"}, "bad.json.measurements[0].layers[2].backward_ms");
  expectError({"plan", "--profile", "missing.json", "--workers", "2"}, "missing.json: no such file");
  write("empty.json", "");
  expectError({"show", "empty.json"}, "empty");
}

TEST_F(Cli, MalformedOrTruncatedPlan) {
  tinyProfile();
  ASSERT_EQ(run({"plan", "--profile", "p.json", "--workers", "2", "--bandwidth", "1Gbit/s", "-o", "plan.json"}).code, 0);
  const std::string text = slurp(path("plan.json"));
  write("trunc.json", text.substr(0, text.size() - 30));
  expectError({"show", "trunc.json"}, "truncated");
  auto j = *readJsonFile(path("plan.json"));
  j["stages"][0]["first_layer"] = 2;
  write("bad.json", j.dump());
  expectError({"show", "bad.json"}, "stages must be consecutive");
}

TEST_F(Cli, MalformedGraphTxt) {
  const std::string good = slurp(kGraph);
  write("graph.txt", good.substr(0, good.find('\n') + 1) + "node9 -- Oops -- forward_compute_time=abc\n");
  expectError({"plan", "--profile", "graph.txt", "--stages", "2", "--bandwidth", "1GB/s"}, "graph.txt:2");
  write("edges.txt", good + "\tnode2 -- node99\n");
  expectError({"plan", "--profile", "edges.txt", "--stages", "2", "--bandwidth", "1GB/s"}, "node99");
}

TEST_F(Cli, ZeroOrNegativeSizes) {
  const std::string p = tinyProfile();
  expectError({"plan", "--profile", p, "--workers", "0"}, "--workers");
  expectError({"plan", "--profile", p, "--workers", "4", "--global-batch", "-4"}, "--global-batch");
  expectError({"plan", "--profile", p, "--workers", "4", "--memory", "0GB"}, "--memory must be positive");
  expectError({"plan", "--profile", p, "--workers", "4", "--microbatches", "0"}, "--microbatches");
  expectError({"profile", "--model", "cnn", "--microbatch-sizes", "0,2"}, "--microbatch-sizes");
  expectError({"profile", "--model", "cnn", "-O", "image_size=0"}, "image_size=0 must be at least 1");
  expectError({"profile", "--model", "cnn", "-O", "width=-1"}, "width");
}

TEST_F(Cli, MemoryLimitNothingFitsIn) {
  const std::string p = tinyProfile();
  expectError({"plan", "--profile", p, "--workers", "2", "--memory", "50MB", "--bandwidth", "1Gbit/s"},
              "nothing fits in 50.0 MB per worker");
  expectError({"plan", "--profile", p, "--workers", "2", "--memory", "50MB", "--bandwidth", "1Gbit/s"}, "--memory");
}

TEST_F(Cli, UnreadableTorchScript) {
  write("junk.pt", "definitely not a zip archive");
  expectError({"profile", "--model", "junk.pt", "-O", "input_shape=1x28x28"}, "not a TorchScript module");
  expectError({"profile", "--model", "nowhere/model.pt", "-O", "input_shape=1x28x28"}, "no such TorchScript file");
}

TEST_F(Cli, UnknownUnits) {
  const std::string p = tinyProfile();
  expectError({"plan", "--profile", p, "--workers", "2", "--bandwidth", "10Gfoo/s"}, "unknown bandwidth unit \"Gfoo/s\"");
  expectError({"plan", "--profile", p, "--workers", "2", "--memory", "12GX"}, "unknown size unit \"GX\"");
}

TEST_F(Cli, OtherMistakes) {
  const std::string p = tinyProfile();
  expectError({"plan", "--model", "bert12", "--device", "tpu9", "--workers", "4"}, "unknown device \"tpu9\"");
  expectError({"plan", "--profile", p, "--workers", "2", "--platform", "gcp"}, "unknown platform \"gcp\"");
  expectError({"plan", "--profile", p, "--model", "cnn", "--workers", "2"}, "either --profile or --model");
  expectError({"plan", "--model", "cnn", "--workers", "2"}, "needs --device");
  expectError({"plan", "--profile", p}, "--workers is required");
  expectError({"plan", "--profile", p, "--workers", "2", "--objective", "quickest"}, "unknown objective");
  expectError({"plan", "--profile", p, "--workers", "2", "--partition", "0-1,3-3"}, "--partition");
  expectError({"plan", "--profile", p, "--workers", "2", "--schedule", "pipe"},
              "--schedule: unknown pipeline schedule \"pipe\"; available: gpipe, 1f1b, interleaved");
  expectError({"plan", "--profile", p, "--workers", "2", "-o", "/nonexistent-dir/plan.json", "--bandwidth", "1Gbit/s"},
              "/nonexistent-dir/plan.json");
}

// Issue 8 §1: the commands that died of SIGFPE, as written.
TEST_F(Cli, HugeCountsAreOneClearLineNotASignal) {
  expectError({"plan", "--profile", kGraph, "--data-parallel", "4294967296", "--global-batch", "64", "--workers", "4"},
              "--data-parallel: 4294967296 is out of range; expected a whole number from 1 to 65,536");
  write("job.yaml", "model: cnn\nplan: {data_parallel: 4294967296}\n");
  expectError({"train", "job.yaml"}, "plan.data_parallel: 4294967296 is out of range");
}

// Every numeric flag of plan and train, walked with values that are zero,
// negative, past 32 and 64 bits, huge, not a number and not numeric: a value
// out of the flag's range is one error line naming the flag; none is a signal.
TEST_F(Cli, EveryNumericFlagRejectsOutOfRangeValues) {
  const std::vector<std::string> values = {"0",   "-1",   "2147483648", "4294967296", "9223372036854775807",
                                           "1e30", "nan", "abc"};
  const std::set<std::string> big = {"2147483648", "4294967296"};
  struct Flag {
    std::string command, flag;
    std::set<std::string> legit;
  };
  const std::vector<Flag> flags = {
      {"plan", "--workers", {}},          {"plan", "--data-parallel", {}},      {"plan", "--stages", {}},
      {"plan", "--microbatches", {}},     {"plan", "--microbatch-size", {}},    {"plan", "--global-batch", {}},
      {"plan", "--max-microbatches", {}}, {"plan", "--graph-batch-size", {}},   {"plan", "--memory", big},
      {"plan", "--bandwidth", big},       {"plan", "--allreduce-alpha", {"0"}}, {"plan", "--allreduce-beta", {"0"}},
      {"train", "--data-parallel", {}},   {"train", "--stages", {}},            {"train", "--microbatches", {}},
      {"train", "--microbatch-size", {}}, {"train", "--max-steps", big},        {"train", "--epochs", big},
      {"train", "--workers", {}},         {"train", "--global-batch", {}},      {"train", "--max-recoveries", {"0"}},
      {"train", "--min-replicas", {}},    {"train", "--max-replicas", {}},      {"train", "--every-epochs", big},
      {"train", "--memory-limit", big},   {"train", "--cpu-limit", {}},         {"train", "--bandwidth", big},
      {"train", "--latency", {"0"}},      {"train", "--seed", {"0", "2147483648", "4294967296", "9223372036854775807"}},
  };
  // A job that stops at its missing data once the flags are in: nothing trains.
  write("job.yaml", "model: cnn\ndata: {dataset: fashion_mnist, path: /nonexistent/fmnist}\n");
  struct Case {
    std::string flag, value;
    bool legit;
    std::vector<std::string> args;
  };
  std::vector<Case> cases;
  for (const Flag& f : flags) {
    for (const std::string& v : values) {
      Case c{f.flag, v, f.legit.count(v) > 0, {}};
      if (f.command == "plan") {
        c.args = {"plan", "--profile", kGraph, "--bandwidth", "1GB/s", "--workers", "4", "-o", "-"};
        if (f.flag == "--bandwidth") c.args = {"plan", "--profile", kGraph, "--workers", "4", "-o", "-"};
        if (f.flag == "--workers") c.args = {"plan", "--profile", kGraph, "--bandwidth", "1GB/s", "-o", "-"};
      } else {
        c.args = {"train", "job.yaml", "--no-progress", "--launcher", "local", "--out", "run"};
        if (f.flag == "--latency") c.args = {"train", "job.yaml", "--no-progress", "--out", "run"};
      }
      c.args.push_back(f.flag);
      c.args.push_back(v);
      cases.push_back(std::move(c));
    }
  }
  // Eight processes at a time, each with its own output files.
  for (size_t begin = 0; begin < cases.size(); begin += 8) {
    std::vector<std::pair<pid_t, size_t>> running;
    for (size_t i = begin; i < std::min(cases.size(), begin + 8); ++i) {
      running.emplace_back(spawn(cases[i].args, "/dev/null", path(".err" + std::to_string(i))), i);
    }
    for (const auto& [pid, i] : running) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      const Case& c = cases[i];
      const std::string err = slurp(path(".err" + std::to_string(i)));
      ASSERT_TRUE(WIFEXITED(status)) << c.flag << " " << c.value << " ended by signal " << WTERMSIG(status) << ": " << err;
      if (c.legit) continue;
      EXPECT_NE(WEXITSTATUS(status), 0) << c.flag << " " << c.value;
      const auto at = err.find("hydrozoa: error: ");
      ASSERT_NE(at, std::string::npos) << c.flag << " " << c.value << ": " << err;
      EXPECT_NE(err.find(c.flag, at), std::string::npos) << c.flag << " " << c.value << ": " << err.substr(at);
    }
  }
}

TEST_F(Cli, MisspeltFlagsAndLevelsAreNamed) {
  Outcome r = run({"plan", "--wokers", "4"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("did you mean --workers"), std::string::npos) << r.err;
  r = run({"--log-level", "verbose", "models"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("verbose"), std::string::npos) << r.err;
  r = run({"--version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("hydrozoa 0."), std::string::npos) << r.out;
}

TEST_F(Cli, MemoryAboveThePlatformsLargestWorkerIsSaid) {
  Outcome r = run({"plan", "--profile", kGraph, "--workers", "2", "--bandwidth", "1GB/s", "--memory", "64GB", "-o", "-"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Note: --memory 64.0 GB is more than the largest aci worker"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--accelerator (a GPU's own memory) or a catalog of your own"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("--memory 64.0 GB is more than"), std::string::npos) << r.err;
  r = run({"plan", "--profile", kGraph, "--workers", "2", "--bandwidth", "1GB/s", "--memory", "12GB", "-o", "-",
           "--platform", "lambda"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("--platform aci (up to 14.5 GB)"), std::string::npos) << r.out;
}

// Issue 8 §6: a file given where another kind was expected says what it is
// and what was expected, and never suggests writing over it.
TEST_F(Cli, WrongFilesSayWhatTheyAre) {
  ASSERT_EQ(run({"plan", "--profile", kGraph, "--workers", "2", "--bandwidth", "1GB/s", "-o", "plan.json"}).code, 0);
  expectError({"plan", "--profile", "plan.json", "--workers", "2"}, "plan.json: this is a plan (plan.json");
  write("job.yaml", "model: cnn\ntraining: {epochs: 1}\n");
  for (const auto& args : std::vector<std::vector<std::string>>{{"show", "job.yaml"},
                                                                {"plan", "--profile", "job.yaml", "--workers", "2"}}) {
    const Outcome r = run(args);
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("job.yaml: a job spec (YAML)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("hydrozoa train job.yaml"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("-o job.yaml"), std::string::npos) << r.err;
  }
}

TEST_F(Cli, AFailedPlanLeavesThePreviousPlanUntouched) {
  const std::string p = tinyProfile();
  ASSERT_EQ(run({"plan", "--profile", p, "--workers", "2", "--bandwidth", "1Gbit/s", "-o", "plan.json"}).code, 0);
  const std::string before = slurp(path("plan.json"));
  expectError({"plan", "--profile", p, "--workers", "2", "--memory", "50MB", "-o", "plan.json"}, "nothing fits");
  EXPECT_EQ(slurp(path("plan.json")), before);
}

}  // namespace
}  // namespace hydrozoa
