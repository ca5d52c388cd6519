// CIFAR-10, binary version: data_batch_1..5.bin and test_batch.bin, each a
// run of records of 1 label byte and 3x32x32 channel-major pixel bytes.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "data/datasets.h"

namespace hydrozoa::data {

Result<std::shared_ptr<const Dataset>> openCifar10(const std::string& dir, Split split) {
  constexpr std::int64_t kRecord = 1 + 3 * 32 * 32;
  const std::string hint = "set data.path to the directory of CIFAR-10's binary version (data_batch_1.bin ...)";
  if (dir.empty()) return invalidArgument("data.path: the cifar10 dataset needs a path; " + hint);
  if (!std::filesystem::is_directory(dir)) return notFound(fmt::format("data.path: {} is not a directory; {}", dir, hint));
  std::vector<std::string> files;
  if (split == Split::kTrain) {
    for (int i = 1; i <= 5; ++i) files.push_back(fmt::format("{}/data_batch_{}.bin", dir, i));
  } else {
    files.push_back(dir + "/test_batch.bin");
  }
  std::vector<unsigned char> bytes;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) return notFound(fmt::format("data.path: {} is missing; {}", f, hint));
    std::vector<unsigned char> content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (content.empty() || content.size() % kRecord != 0) {
      return parseError(fmt::format("{}: {} bytes is not a whole number of {}-byte records (truncated?)", f,
                                    content.size(), kRecord));
    }
    bytes.insert(bytes.end(), content.begin(), content.end());
  }
  const std::int64_t n = static_cast<std::int64_t>(bytes.size()) / kRecord;
  torch::Tensor raw = torch::from_blob(bytes.data(), {n, kRecord}, torch::kUInt8).clone();
  torch::Tensor labels = raw.select(1, 0).to(torch::kLong);
  if (labels.max().item<int>() > 9) return parseError(fmt::format("{}: labels beyond the 10 classes", dir));
  torch::Tensor images = raw.narrow(1, 1, kRecord - 1).reshape({n, 3, 32, 32}).contiguous();
  return std::shared_ptr<const Dataset>(new ImageDataset(
      images, labels, {0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}, 10,
      fmt::format("CIFAR-10 {} ({} samples) from {}", split == Split::kTrain ? "train" : "test", n, dir)));
}

}  // namespace hydrozoa::data
