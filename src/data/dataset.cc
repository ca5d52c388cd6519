#include "data/dataset.h"

#include <fmt/format.h>

#include "data/datasets.h"

namespace hydrozoa::data {

std::string defaultDataPath(const std::string& kind) {
  if (kind == "fashion_mnist") return "/usr/share/datasets/fashion-mnist";
  return "";
}

Result<std::shared_ptr<const Dataset>> openDataset(const DataSpec& spec, Split split) {
  const std::string path = spec.path.empty() ? defaultDataPath(spec.kind) : spec.path;
  if (spec.kind == "fashion_mnist") return openFashionMnist(path, split);
  if (spec.kind == "cifar10") return openCifar10(path, split);
  if (spec.kind == "text") return openText(path, spec.seq_len, split);
  if (spec.kind == "synthetic") return openSynthetic(spec, split);
  return invalidArgument(fmt::format("data.dataset: unknown dataset \"{}\"; use fashion_mnist, cifar10, text or "
                                     "synthetic",
                                     spec.kind));
}

Batch ImageDataset::get(const std::vector<std::int64_t>& indices) const {
  const torch::Tensor idx = torch::tensor(indices, torch::kLong);
  torch::Tensor x = images_.index_select(0, idx).to(torch::kFloat).div_(255.0f);
  const auto channels = x.size(1);
  const torch::Tensor mean = torch::tensor(mean_).view({1, channels, 1, 1});
  const torch::Tensor std = torch::tensor(std_).view({1, channels, 1, 1});
  return {x.sub_(mean).div_(std), labels_.index_select(0, idx)};
}

model::InputSpec ImageDataset::input() const {
  return {model::InputKind::kImage, {images_.size(1), images_.size(2), images_.size(3)}, 0};
}

}  // namespace hydrozoa::data
