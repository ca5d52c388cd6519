#include "data/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <numeric>
#include <thread>

#include "core/cpus.h"
#include "data/loader.h"

namespace hydrozoa::data {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("hzdata." + std::to_string(::getpid()) + "." +
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& n) const { return (path_ / n).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

DataSpec spec(const std::string& kind, const std::string& path = "", std::int64_t seqLen = 0) {
  DataSpec s;
  s.kind = kind;
  s.path = path;
  s.seq_len = seqLen;
  return s;
}

const bool kHaveFashion = fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");

TEST(FashionMnist, LoadsBothSplitsNormalised) {
  if (!kHaveFashion) GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/setup installs it)";
  auto train = openDataset(spec("fashion_mnist"), Split::kTrain);
  auto test = openDataset(spec("fashion_mnist"), Split::kTest);
  ASSERT_TRUE(train.ok()) << train.status().message();
  ASSERT_TRUE(test.ok());
  EXPECT_EQ((*train)->size(), 60000);
  EXPECT_EQ((*test)->size(), 10000);
  EXPECT_EQ((*train)->input().shape, (model::Shape{1, 28, 28}));
  EXPECT_EQ((*train)->task().classes, 10);
  const Batch b = (*train)->get({0, 59999, 7});
  EXPECT_EQ(b.inputs.sizes().vec(), (std::vector<std::int64_t>{3, 1, 28, 28}));
  EXPECT_EQ(b.labels.sizes().vec(), (std::vector<std::int64_t>{3}));
  EXPECT_GE(b.labels.min().item<int>(), 0);
  EXPECT_LE(b.labels.max().item<int>(), 9);
  // The first training image is an ankle boot (class 9) and its top-left
  // pixel is background: 0 bytes normalise to -0.2860 / 0.3530.
  EXPECT_EQ(b.labels[0].item<int>(), 9);
  EXPECT_NEAR(b.inputs[0][0][0][0].item<float>(), -0.2860f / 0.3530f, 1e-5);
}

// Writes a gzip file.
void writeGz(const std::string& path, const std::vector<unsigned char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

std::vector<unsigned char> idxHeader(std::uint32_t magic, std::vector<std::uint32_t> dims) {
  std::vector<unsigned char> h;
  auto put = [&](std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) h.push_back(static_cast<unsigned char>(v >> s));
  };
  put(magic);
  for (auto d : dims) put(d);
  return h;
}

TEST(FashionMnist, TruncatedAndForeignFilesAreNamed) {
  TempDir dir;
  auto images = idxHeader(0x803, {4, 28, 28});
  images.resize(images.size() + 3 * 28 * 28);  // one image short
  writeGz(dir / "train-images-idx3-ubyte.gz", images);
  auto labels = idxHeader(0x801, {4});
  labels.resize(labels.size() + 4);
  writeGz(dir / "train-labels-idx1-ubyte.gz", labels);
  auto r = openDataset(spec("fashion_mnist", dir.str()), Split::kTrain);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("train-images-idx3-ubyte.gz: holds"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos);

  writeGz(dir / "train-images-idx3-ubyte.gz", idxHeader(0x801, {4}));
  r = openDataset(spec("fashion_mnist", dir.str()), Split::kTrain);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not an IDX file"), std::string::npos) << r.status().message();

  // Bytes past what the header declares.
  images = idxHeader(0x803, {4, 28, 28});
  images.resize(images.size() + 4 * 28 * 28 + 1);
  writeGz(dir / "train-images-idx3-ubyte.gz", images);
  r = openDataset(spec("fashion_mnist", dir.str()), Split::kTrain);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more than the 3136 data bytes its header declares"), std::string::npos)
      << r.status().message();

  // A header declaring far more than the file can hold: refused before
  // anything is allocated (4G × 4G × 4G bytes would not fit anywhere).
  writeGz(dir / "train-images-idx3-ubyte.gz", idxHeader(0x803, {0xffffffff, 0xffffffff, 0xffffffff}));
  r = openDataset(spec("fashion_mnist", dir.str()), Split::kTrain);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("more than a gzip file of"), std::string::npos) << r.status().message();
  writeGz(dir / "train-images-idx3-ubyte.gz", idxHeader(0x803, {1000, 1000, 1000}));
  r = openDataset(spec("fashion_mnist", dir.str()), Split::kTrain);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("declares 1000000000 data bytes"), std::string::npos) << r.status().message();
}

TEST(FashionMnist, MissingDirectorySaysHowToGetIt) {
  auto r = openDataset(spec("fashion_mnist", "/nonexistent/fashion"), Split::kTrain);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/fashion"), std::string::npos);
  EXPECT_NE(r.status().message().find("dataset-fashion-mnist"), std::string::npos);
}

TEST(Cifar10, ReadsTheBinaryFormat) {
  TempDir dir;
  auto record = [](unsigned char label, unsigned char pixel) {
    std::vector<unsigned char> r(1 + 3072, pixel);
    r[0] = label;
    return r;
  };
  for (int i = 1; i <= 5; ++i) {
    std::ofstream f(dir / ("data_batch_" + std::to_string(i) + ".bin"), std::ios::binary);
    for (int k = 0; k < 2; ++k) {
      const auto r = record(static_cast<unsigned char>(i + k), static_cast<unsigned char>(10 * i));
      f.write(reinterpret_cast<const char*>(r.data()), static_cast<std::streamsize>(r.size()));
    }
  }
  {
    std::ofstream f(dir / "test_batch.bin", std::ios::binary);
    const auto r = record(3, 255);
    f.write(reinterpret_cast<const char*>(r.data()), static_cast<std::streamsize>(r.size()));
  }
  auto train = openDataset(spec("cifar10", dir.str()), Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status().message();
  EXPECT_EQ((*train)->size(), 10);
  const Batch b = (*train)->get({9});  // batch 5, second record
  EXPECT_EQ(b.labels[0].item<int>(), 6);
  EXPECT_NEAR(b.inputs[0][2][5][5].item<float>(), (50 / 255.0f - 0.4465f) / 0.2616f, 1e-5);
  auto test = openDataset(spec("cifar10", dir.str()), Split::kTest);
  ASSERT_TRUE(test.ok());
  EXPECT_EQ((*test)->size(), 1);

  std::ofstream(dir / "test_batch.bin", std::ios::app) << "xx";
  auto bad = openDataset(spec("cifar10", dir.str()), Split::kTest);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("truncated"), std::string::npos);
  EXPECT_FALSE(openDataset(spec("cifar10", dir / "nope"), Split::kTrain).ok());
}

TEST(Text, WindowsAndShiftedLabels) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 100; ++i) text += static_cast<char>('a' + i % 26);
  std::ofstream(dir / "t.txt") << text;
  const DataSpec textSpec = spec("text", dir / "t.txt", 9);
  auto train = openDataset(textSpec, Split::kTrain);
  auto test = openDataset(textSpec, Split::kTest);
  ASSERT_TRUE(train.ok() && test.ok());
  EXPECT_EQ((*train)->size() + (*test)->size(), 10);  // 100 bytes / 10-byte windows
  EXPECT_EQ((*test)->size(), 1);
  const Batch b = (*train)->get({1});
  EXPECT_EQ(b.inputs[0][0].item<std::int64_t>(), 'a' + 10);
  EXPECT_EQ(b.labels[0][0].item<std::int64_t>(), 'a' + 11);
  EXPECT_EQ(b.labels[0][8].item<std::int64_t>(), 'a' + 19);
  EXPECT_EQ((*train)->task().kind, model::TaskKind::kLanguageModel);

  std::ofstream(dir / "small.txt") << "tiny";
  auto small = openDataset(spec("text", dir / "small.txt", 9), Split::kTrain);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("need at least 20"), std::string::npos) << small.status().message();
}

TEST(Synthetic, DeterministicAndLearnableLabels) {
  DataSpec syn = spec("synthetic");
  syn.synthetic_input = {model::InputKind::kImage, {1, 8, 8}, 0};
  syn.synthetic_task = {model::TaskKind::kClassification, 4};
  syn.synthetic_train = 50;
  syn.seed = 3;
  auto a = openDataset(syn, Split::kTrain), b = openDataset(syn, Split::kTrain);
  ASSERT_TRUE(a.ok() && b.ok());
  const Batch x = (*a)->get({4, 9}), y = (*b)->get({9, 4});
  EXPECT_TRUE(torch::equal(x.inputs[0], y.inputs[1]));
  EXPECT_TRUE(torch::equal(x.labels[1], y.labels[0]));
  const Batch all = (*a)->get(std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17});
  EXPECT_GE(all.labels.min().item<int>(), 0);
  EXPECT_LT(all.labels.max().item<int>(), 4);
  EXPECT_GT(std::get<0>(torch::_unique(all.labels)).numel(), 1);  // not one constant class
  // Tokens for a language model: labels are the next tokens.
  syn.synthetic_input = {model::InputKind::kTokens, {12}, 32};
  syn.synthetic_task = {model::TaskKind::kLanguageModel, 32};
  auto lm = openDataset(syn, Split::kTest);
  ASSERT_TRUE(lm.ok());
  const Batch t = (*lm)->get({0});
  EXPECT_TRUE(torch::equal(t.inputs[0].narrow(0, 1, 11), t.labels[0].narrow(0, 0, 11)));
}

TEST(Synthetic, ALinearModelLearnsTheLabels) {
  DataSpec syn = spec("synthetic");
  syn.synthetic_input = {model::InputKind::kImage, {3, 4, 4}, 0};
  syn.synthetic_task = {model::TaskKind::kClassification, 5};
  syn.synthetic_train = 2000;
  syn.synthetic_test = 500;
  auto train = openDataset(syn, Split::kTrain), test = openDataset(syn, Split::kTest);
  ASSERT_TRUE(train.ok() && test.ok());
  std::vector<std::int64_t> all(2000), held(500);
  std::iota(all.begin(), all.end(), 0);
  std::iota(held.begin(), held.end(), 0);
  const Batch tr = (*train)->get(all), te = (*test)->get(held);
  torch::manual_seed(0);
  torch::nn::Linear linear(48, 5);
  torch::optim::Adam adam(linear->parameters(), 0.05);
  for (int i = 0; i < 200; ++i) {
    adam.zero_grad();
    torch::nn::functional::cross_entropy(linear(tr.inputs.reshape({2000, 48})), tr.labels).backward();
    adam.step();
  }
  const double accuracy = linear(te.inputs.reshape({500, 48})).argmax(1).eq(te.labels).to(torch::kFloat).mean().item<double>();
  EXPECT_GT(accuracy, 0.6);  // chance is 0.2
}

TEST(OpenDataset, UnknownKind) {
  auto r = openDataset(spec("imagenet"), Split::kTrain);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("fashion_mnist, cifar10, text or synthetic"), std::string::npos);
}

std::shared_ptr<const Dataset> synthetic(std::int64_t n) {
  DataSpec syn = spec("synthetic");
  syn.synthetic_input = {model::InputKind::kImage, {2}, 0};
  syn.synthetic_task = {model::TaskKind::kClassification, 2};
  syn.synthetic_train = n;
  return *openDataset(syn, Split::kTrain);
}

TEST(PrefetchLoader, YieldsTheSamplersMicrobatchesInOrder) {
  auto data = synthetic(23);
  EpochSampler sampler({23, 8, 2, 2, 5, true, false});
  PrefetchLoader loader(data, sampler, 1, 3);
  for (std::int64_t epoch : {0, 1}) {
    loader.start(epoch, 0);
    for (std::int64_t step = 0; step < sampler.stepsPerEpoch(); ++step) {
      for (int mb = 0; mb < sampler.microbatches(step, 1); ++mb) {
        const Batch got = loader.next();
        const Batch want = data->get(sampler.indices(epoch, step, 1, mb));
        ASSERT_TRUE(torch::equal(got.inputs, want.inputs)) << epoch << "/" << step << "/" << mb;
      }
    }
    EXPECT_THROW(loader.next(), std::logic_error);
  }
  loader.start(0, 2);  // mid-epoch
  EXPECT_TRUE(torch::equal(loader.next().inputs, data->get(sampler.indices(0, 2, 1, 0)).inputs));
}

class FailingDataset : public Dataset {
 public:
  std::int64_t size() const override { return 100; }
  Batch get(const std::vector<std::int64_t>& indices) const override {
    if (indices.front() >= 0) throw std::runtime_error("disk on fire");
    return {};
  }
  model::InputSpec input() const override { return {}; }
  model::TaskSpec task() const override { return {}; }
  std::string describe() const override { return "failing"; }
  std::int64_t memoryBytes() const override { return 0; }
};

TEST(PrefetchLoader, RethrowsTheProducersError) {
  PrefetchLoader loader(std::make_shared<FailingDataset>(), EpochSampler({100, 10, 1, 5, 0, false, false}), 0, 2);
  loader.start(0, 0);
  EXPECT_THROW(loader.next(), std::runtime_error);
}

// Counts the microbatches read from another dataset.
class CountingDataset : public Dataset {
 public:
  explicit CountingDataset(std::shared_ptr<const Dataset> inner) : inner_(std::move(inner)) {}
  std::int64_t size() const override { return inner_->size(); }
  Batch get(const std::vector<std::int64_t>& indices) const override {
    ++reads_;
    return inner_->get(indices);
  }
  model::InputSpec input() const override { return inner_->input(); }
  model::TaskSpec task() const override { return inner_->task(); }
  std::string describe() const override { return "counting"; }
  std::int64_t memoryBytes() const override { return inner_->memoryBytes(); }
  int reads() const { return reads_.load(); }

 private:
  std::shared_ptr<const Dataset> inner_;
  mutable std::atomic<int> reads_{0};
};

// The producer fills its queue (depth 2) and blocks there with the next
// microbatch in hand, reading no further; the loader's destructor then
// ends it within a second.
TEST(PrefetchLoader, StopsWhileTheQueueIsFull) {
  auto data = std::make_shared<CountingDataset>(synthetic(1000));
  auto loader = std::make_unique<PrefetchLoader>(data, EpochSampler({1000, 10, 1, 1, 0, true, false}), 0, 2);
  loader->start(0, 0);
  (void)loader->next();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (data->reads() < 4 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(data->reads(), 4) << "one taken, two queued and one read that waits for room, then no more";
  const auto t0 = std::chrono::steady_clock::now();
  auto destroyed = std::async(std::launch::async, [&loader] { loader.reset(); });
  if (destroyed.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    ADD_FAILURE() << "the loader's destructor hangs with its queue full";
    std::_Exit(1);  // its thread cannot be joined
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
}

// Records the cores of the thread that reads it.
class AffinityDataset : public Dataset {
 public:
  std::int64_t size() const override { return 100; }
  Batch get(const std::vector<std::int64_t>& indices) const override {
    const std::lock_guard<std::mutex> lock(mu_);
    cpus_ = usableCpus();
    return {torch::zeros({static_cast<std::int64_t>(indices.size()), 1}), torch::zeros({1}, torch::kLong)};
  }
  model::InputSpec input() const override { return {}; }
  model::TaskSpec task() const override { return {}; }
  std::string describe() const override { return "affinity"; }
  std::int64_t memoryBytes() const override { return 0; }
  std::vector<int> cpus() const {
    const std::lock_guard<std::mutex> lock(mu_);
    return cpus_;
  }

 private:
  mutable std::mutex mu_;
  mutable std::vector<int> cpus_;
};

// A worker builds its loaders, then pins its compute thread to one core and
// starts them: the producer must not share that core (NOTE [Cores for
// compute threads]).
TEST(PrefetchLoader, ProducesOnTheCoresOfTheThreadThatBuiltIt) {
  const std::vector<int> all = usableCpus();
  if (all.size() < 2) GTEST_SKIP() << "needs two usable cores";
  std::vector<int> seen;
  std::thread([&] {  // pin a thread of our own, not the test runner
    auto data = std::make_shared<AffinityDataset>();
    PrefetchLoader loader(data, EpochSampler({100, 10, 1, 1, 0, false, false}), 0, 1);
    ASSERT_TRUE(runThreadOn({all.front()}));
    ASSERT_EQ(usableCpus(), std::vector<int>{all.front()});
    loader.start(0, 0);
    (void)loader.next();
    seen = data->cpus();
  }).join();
  EXPECT_EQ(seen, all);
}

}  // namespace
}  // namespace hydrozoa::data
