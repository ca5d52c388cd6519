// Byte-level language modelling on any file: non-overlapping windows of
// seq_len + 1 bytes; the input is the first seq_len, the label the same
// bytes shifted by one. The first 90% of the windows train, the rest test.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "data/datasets.h"

namespace hydrozoa::data {
namespace {

class TextDataset final : public Dataset {
 public:
  TextDataset(torch::Tensor bytes, std::int64_t first, std::int64_t windows, std::int64_t seqLen, std::string what)
      : bytes_(std::move(bytes)), first_(first), windows_(windows), seq_(seqLen), what_(std::move(what)) {}

  std::int64_t size() const override { return windows_; }
  Batch get(const std::vector<std::int64_t>& indices) const override {
    const auto n = static_cast<std::int64_t>(indices.size());
    torch::Tensor window = torch::empty({n, seq_ + 1}, torch::kLong);
    for (std::int64_t i = 0; i < n; ++i) {
      window[i].copy_(bytes_.narrow(0, (first_ + indices[i]) * (seq_ + 1), seq_ + 1));
    }
    return {window.narrow(1, 0, seq_).contiguous(), window.narrow(1, 1, seq_).contiguous()};
  }
  model::InputSpec input() const override { return {model::InputKind::kTokens, {seq_}, 256}; }
  model::TaskSpec task() const override { return {model::TaskKind::kLanguageModel, 256}; }
  std::string describe() const override { return what_; }
  std::int64_t memoryBytes() const override { return bytes_.nbytes(); }  // shared by the splits

 private:
  torch::Tensor bytes_;  // uint8, the whole file
  std::int64_t first_, windows_, seq_;
  std::string what_;
};

}  // namespace

Result<std::shared_ptr<const Dataset>> openText(const std::string& path, std::int64_t seqLen, Split split) {
  if (path.empty()) return invalidArgument("data.path: the text dataset needs a file");
  if (seqLen < 1) return invalidArgument("the text dataset needs a token model (its seq_len sets the window)");
  std::ifstream in(path, std::ios::binary);
  if (!in) return notFound(fmt::format("data.path: cannot read {}", path));
  std::vector<unsigned char> content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::int64_t windows = static_cast<std::int64_t>(content.size()) / (seqLen + 1);
  if (windows < 2) {
    return invalidArgument(fmt::format("data.path: {} has {} bytes; windows of seq_len + 1 = {} bytes need at least {}",
                                       path, content.size(), seqLen + 1, 2 * (seqLen + 1)));
  }
  const std::int64_t test = std::max<std::int64_t>(1, windows / 10), train = windows - test;
  torch::Tensor bytes = torch::from_blob(content.data(), {static_cast<std::int64_t>(content.size())}, torch::kUInt8)
                            .to(torch::kLong);
  const bool isTrain = split == Split::kTrain;
  return std::shared_ptr<const Dataset>(new TextDataset(
      bytes, isTrain ? 0 : train, isTrain ? train : test, seqLen,
      fmt::format("bytes of {} ({} windows of {})", path, isTrain ? train : test, seqLen)));
}

}  // namespace hydrozoa::data
