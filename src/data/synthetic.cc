// Synthetic samples of any model's input shape, each generated from its own
// seed (seed, split, index), so the same index is the same sample in every
// worker. Labels are learnable: for classification the class whose fixed
// random projection of the input's label features is largest (the input
// itself, or at most kLabelFeatures averages of consecutive runs of it: a
// linear function of the input either way); for token inputs the first
// token decides the class; language models see sequences that follow a
// fixed random successor table (with some noise).
//
// The averages keep labelling cheap. Projecting a whole 3x32x32 image onto
// 1,000 classes read a 12 MB matrix per sample, 150 ms of a core per batch of
// 64 (and a 224x224 image's matrix would be 600 MB): more than some models'
// step on the worker that loads the data.
#include <fmt/format.h>

#include <algorithm>

#include "data/datasets.h"

namespace hydrozoa::data {
namespace {

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = a * 0x9e3779b97f4a7c15ULL + b + 0x632be59bd9b4e019ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return (x ^ (x >> 31)) >> 1;
}

class SyntheticDataset final : public Dataset {
 public:
  SyntheticDataset(const DataSpec& s, Split split)
      : input_(s.synthetic_input), task_(s.synthetic_task), seed_(s.seed), split_(split == Split::kTrain ? 1 : 2),
        size_(split == Split::kTrain ? s.synthetic_train : s.synthetic_test) {
    auto gen = at::detail::createCPUGenerator(mix(seed_, 99));
    if (input_.kind == model::InputKind::kImage) {
      projection_ = torch::randn({std::min(model::numel(input_.shape), kLabelFeatures), task_.classes}, gen);
    } else {
      successor_ = torch::randint(0, input_.vocab, {input_.vocab}, gen, torch::kLong);
    }
  }

  std::int64_t size() const override { return size_; }
  std::int64_t memoryBytes() const override {  // generated when read
    return (projection_.defined() ? projection_.nbytes() : 0) + (successor_.defined() ? successor_.nbytes() : 0);
  }
  Batch get(const std::vector<std::int64_t>& indices) const override {
    std::vector<torch::Tensor> xs, ys;
    for (std::int64_t i : indices) {
      auto gen = at::detail::createCPUGenerator(mix(mix(seed_, split_), static_cast<std::uint64_t>(i)));
      if (input_.kind == model::InputKind::kImage) {
        torch::Tensor x = torch::randn(input_.shape, gen);
        xs.push_back(x);
        ys.push_back(labelFeatures(x).mm(projection_).argmax(1).squeeze(0));
      } else {
        const std::int64_t seq = input_.shape.at(0);
        // A walk through the successor table, one token in eight random.
        torch::Tensor walk = torch::empty({seq + 1}, torch::kLong);
        auto* w = walk.data_ptr<std::int64_t>();
        const torch::Tensor noise = torch::randint(0, input_.vocab, {seq + 1}, gen, torch::kLong);
        const torch::Tensor coin = torch::randint(0, 8, {seq + 1}, gen, torch::kLong);
        const auto* nz = noise.data_ptr<std::int64_t>();
        const auto* cz = coin.data_ptr<std::int64_t>();
        const auto* next = successor_.data_ptr<std::int64_t>();
        w[0] = nz[0];
        for (std::int64_t t = 1; t <= seq; ++t) w[t] = cz[t] == 0 ? nz[t] : next[w[t - 1]];
        xs.push_back(walk.narrow(0, 0, seq));
        if (task_.kind == model::TaskKind::kLanguageModel) {
          ys.push_back(walk.narrow(0, 1, seq));
        } else {
          ys.push_back(torch::tensor(w[0] % task_.classes, torch::kLong));
        }
      }
    }
    if (xs.empty()) {
      std::vector<std::int64_t> shape = {0};
      shape.insert(shape.end(), input_.shape.begin(), input_.shape.end());
      const auto type = input_.kind == model::InputKind::kImage ? torch::kFloat : torch::kLong;
      return {torch::empty(shape, type), torch::empty({0}, torch::kLong)};
    }
    return {torch::stack(xs), torch::stack(ys)};
  }
  model::InputSpec input() const override { return input_; }
  model::TaskSpec task() const override { return task_; }
  std::string describe() const override {
    return fmt::format("synthetic {} ({} samples of {})", split_ == 1 ? "train" : "test", size_,
                       model::shapeString(input_.shape));
  }

 private:
  static constexpr std::int64_t kLabelFeatures = 256;

  // [1, F]: the input, or kLabelFeatures means of consecutive runs of it (nearly equal).
  static torch::Tensor labelFeatures(const torch::Tensor& x) {
    torch::Tensor flat = x.reshape({1, 1, -1});
    if (flat.size(2) > kLabelFeatures) flat = torch::adaptive_avg_pool1d(flat, {kLabelFeatures});
    return flat.reshape({1, -1});
  }

  model::InputSpec input_;
  model::TaskSpec task_;
  std::uint64_t seed_, split_;
  std::int64_t size_;
  torch::Tensor projection_, successor_;
};

}  // namespace

Result<std::shared_ptr<const Dataset>> openSynthetic(const DataSpec& s, Split split) {
  if (s.synthetic_input.shape.empty() || s.synthetic_task.classes < 2) {
    return invalidArgument("synthetic data needs the model's input shape and classes");
  }
  if ((split == Split::kTrain ? s.synthetic_train : s.synthetic_test) < 1) {
    return invalidArgument("data.synthetic_train and data.synthetic_test must be at least 1");
  }
  return std::shared_ptr<const Dataset>(new SyntheticDataset(s, split));
}

}  // namespace hydrozoa::data
