// Mutation tests of every input format's parser: start from a valid file,
// apply thousands of seeded random edits (tests/fuzz/mutator.h), parse each
// result in-process, and require that the parser returns: a value, or an
// error whose message names the file in one line. A crash kills the test, an
// escaped exception fails it with the seed and the edits, and a parse that
// runs for seconds aborts it with the same (the watchdog).
//
// What a parse accepted must also be usable (tests/fuzz/parsers.h): it reads
// back the same through its writer, and the functions that read it first
// (the plan table, right-sizing on a catalog, the scaling record of a
// manifest) run on it.
//
// Longer runs with coverage guidance: fuzz/README.md (libFuzzer).

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>

#include "core/files.h"
#include "fuzz/mutator.h"
#include "fuzz/parsers.h"

namespace hydrozoa::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

struct Format {
  std::string name;     // test name suffix
  std::string fixture;  // a valid file, relative to the source tree
  Parser parse;
  int mutations = 10000;
};

void PrintTo(const Format& f, std::ostream* os) { *os << f.name; }

std::string sourceFile(const std::string& relative) { return std::string(HYDROZOA_SOURCE_DIR) + "/" + relative; }

std::vector<Format> formats() {
  std::vector<Format> f = {
      {"graph_txt", "tests/fixtures/pipedream_small.txt", parseGraph},
      {"profile_json", "tests/fixtures/profile_cnn_k80.json", parseProfileJson},
      {"plan_json", "tests/fixtures/plan_cnn_k80.json", parsePlanJson},
      {"plan_json_interleaved", "tests/fixtures/plan_interleaved.json", parsePlanJson, 3000},
      {"job_yaml", "examples/fashion_mnist_cnn.yaml", parseJobYaml},
      {"checkpoint_manifest", "tests/fixtures/checkpoint_manifest.json", parseManifest},
      {"checkpoint_scaling_record", "tests/fixtures/checkpoint_manifest.json", parseScalingRecord, 5000},
  };
  for (const char* catalog : {"aci", "lambda", "aws_vm", "azure_vm"}) {
    std::string file = catalog;
    std::replace(file.begin(), file.end(), '_', '-');
    f.push_back({std::string("catalog_") + catalog, "data/pricing/" + file + ".yaml", parseCatalog, 4000});
  }
  for (const char* device : {"k80", "v100", "a100", "h100"}) {
    f.push_back({std::string("device_") + device, std::string("data/devices/") + device + ".yaml", parseDevice, 3000});
  }
  f.push_back({"device_cpu_calibrated", "tests/fixtures/device_cpu.yaml", parseDevice, 3000});
  return f;
}

// --- the watchdog -------------------------------------------------------------

// Aborts the process, printing the case, when one parse runs longer than
// `limit`: a hang would otherwise only show as the test's timeout.
class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds limit) : limit_(limit), thread_([this] { watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void begin(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    what_ = std::move(what);
    started_ = Clock::now();
    busy_ = true;
  }
  void end() {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
  }

 private:
  void watch() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      if (busy_ && Clock::now() - started_ > limit_) {
        std::cerr << "HANG: one parse ran longer than " << limit_.count() << " s: " << what_ << std::endl;
        std::abort();
      }
    }
  }

  const std::chrono::seconds limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, busy_ = false;
  std::string what_;
  Clock::time_point started_;
  std::thread thread_;
};

// --- the property ----------------------------------------------------------

// A few seconds per format at most, whatever the machine: the seeds run in
// order, so a slow machine runs a prefix of the same cases.
constexpr auto kBudget = std::chrono::seconds(2);
constexpr int kMaxReported = 10;

// The first seed of a format: its name's FNV-1a hash (std::hash differs
// between standard libraries), so formats that share a fixture differ.
std::uint64_t seedBase(const std::string& name) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ULL;
  return h >> 20 << 20;
}

class MutationTest : public ::testing::TestWithParam<Format> {};

TEST_P(MutationTest, ParsesTheFixture) {
  const Format& f = GetParam();
  auto text = readTextFile(sourceFile(f.fixture));
  ASSERT_TRUE(text.ok()) << text.status().message();
  const Outcome o = f.parse(*text, f.fixture);
  EXPECT_TRUE(o.status.ok()) << o.status.message();
  EXPECT_EQ(o.broken, "");
}

TEST_P(MutationTest, EveryMutationParsesOrFailsWithAMessage) {
  const Format& f = GetParam();
  auto text = readTextFile(sourceFile(f.fixture));
  ASSERT_TRUE(text.ok()) << text.status().message();
  const std::string origin = "fuzz/" + f.name;
  Watchdog watchdog(std::chrono::seconds(10));
  const auto start = Clock::now();
  int done = 0, accepted = 0, reported = 0;
  for (int i = 0; i < f.mutations && reported < kMaxReported; ++i) {
    if (Clock::now() - start > kBudget) break;
    const std::uint64_t seed = seedBase(f.name) + static_cast<std::uint64_t>(i);
    const Mutation m = mutate(*text, seed);
    const std::string what = fmt::format("{} seed {} ({})", f.name, seed, m.description);
    watchdog.begin(what);
    Outcome o;
    try {
      o = f.parse(m.text, origin);
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": escaped exception: " << e.what();
      ++reported;
    } catch (...) {
      ADD_FAILURE() << what << ": escaped a non-standard exception";
      ++reported;
    }
    watchdog.end();
    ++done;
    if (const std::string wrong = violation(o, origin); !wrong.empty()) {
      ADD_FAILURE() << what << ": " << wrong;
      ++reported;
    } else if (o.status.ok()) {
      ++accepted;
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::cout << f.name << ": " << done << " mutations in " << fmt::format("{:.2f}", seconds) << " s, " << accepted
            << " accepted\n";
  // The budget guards the time; a machine that cannot run 100 cases in it
  // tests too little to pass.
  EXPECT_GE(done, std::min(f.mutations, 100));
}

INSTANTIATE_TEST_SUITE_P(fuzz, MutationTest, ::testing::ValuesIn(formats()),
                         [](const ::testing::TestParamInfo<Format>& info) { return info.param.name; });

}  // namespace
}  // namespace hydrozoa::fuzz
