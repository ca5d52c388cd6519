// Datasets: samples held in memory as tensors, gathered into batches.
//
// Built in: Fashion-MNIST (the IDX .gz files of Debian's dataset-fashion-
// mnist package), CIFAR-10 (the binary version's directory), byte-level text
// (any file: windows of seq_len + 1 bytes, the label is the input shifted by
// one), and synthetic (seeded random samples of any model's input shape).
//
// Thread-safety: a Dataset is immutable after opening; get() may be called
// from several threads at once.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/arch.h"

namespace hydrozoa::data {

struct Batch {
  torch::Tensor inputs;  // [n, ...] float32, or int64 token ids
  torch::Tensor labels;  // [n] int64 classes, or [n, seq] int64 next tokens
};

class Dataset {
 public:
  virtual ~Dataset() = default;

  virtual std::int64_t size() const = 0;
  // The samples at `indices`, in that order. REQUIRES: every index < size().
  virtual Batch get(const std::vector<std::int64_t>& indices) const = 0;
  // Per-sample input (shape, kind, vocabulary) and the task it labels for.
  virtual model::InputSpec input() const = 0;
  virtual model::TaskSpec task() const = 0;
  // "Fashion-MNIST train (60,000 samples) from /usr/share/datasets/fashion-mnist"
  virtual std::string describe() const = 0;
  // Bytes it holds in memory (a worker that reads data holds them too).
  virtual std::int64_t memoryBytes() const = 0;
};

enum class Split { kTrain, kTest };

struct DataSpec {
  std::string kind;  // "fashion_mnist", "cifar10", "text", "synthetic"
  std::string path;  // directory or file; "" for the kind's default
  // text: window length (the model's sequence length); synthetic: ignored.
  std::int64_t seq_len = 0;
  // synthetic: samples per split, and the input/task to imitate.
  std::int64_t synthetic_train = 1024, synthetic_test = 256;
  model::InputSpec synthetic_input;
  model::TaskSpec synthetic_task;
  std::uint64_t seed = 0;
};

// Opens one split. Errors name the path and the fix: a missing directory or
// file ("install dataset-fashion-mnist or set data.path"), a truncated or
// corrupt file, an unknown kind.
Result<std::shared_ptr<const Dataset>> openDataset(const DataSpec& spec, Split split);

// The default path of a kind ("" when it has none).
std::string defaultDataPath(const std::string& kind);

}  // namespace hydrozoa::data
