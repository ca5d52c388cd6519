// The built-in datasets, opened by openDataset() (dataset.h). Internal.
#pragma once

#include "data/dataset.h"

namespace hydrozoa::data {

Result<std::shared_ptr<const Dataset>> openFashionMnist(const std::string& dir, Split split);
Result<std::shared_ptr<const Dataset>> openCifar10(const std::string& dir, Split split);
Result<std::shared_ptr<const Dataset>> openText(const std::string& path, std::int64_t seqLen, Split split);
Result<std::shared_ptr<const Dataset>> openSynthetic(const DataSpec& spec, Split split);

// A labelled image set held as bytes, normalised per channel when gathered.
class ImageDataset final : public Dataset {
 public:
  ImageDataset(torch::Tensor images, torch::Tensor labels, std::vector<float> mean, std::vector<float> stddev,
               std::int64_t classes, std::string description)
      : images_(std::move(images)), labels_(std::move(labels)), mean_(std::move(mean)), std_(std::move(stddev)),
        classes_(classes), description_(std::move(description)) {}

  std::int64_t size() const override { return images_.size(0); }
  Batch get(const std::vector<std::int64_t>& indices) const override;
  model::InputSpec input() const override;
  model::TaskSpec task() const override { return {model::TaskKind::kClassification, classes_}; }
  std::string describe() const override { return description_; }
  std::int64_t memoryBytes() const override { return images_.nbytes() + labels_.nbytes(); }

 private:
  torch::Tensor images_;  // uint8 [N, C, H, W]
  torch::Tensor labels_;  // int64 [N]
  std::vector<float> mean_, std_;
  std::int64_t classes_;
  std::string description_;
};

}  // namespace hydrozoa::data
