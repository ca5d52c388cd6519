// Mixed precision: the passes under autocast, the weights in fp32.
//
// NOTE [Mixed precision]
// training.precision bf16 or fp16 runs every forward pass of a worker (and
// a recomputed one, and evaluation) under libtorch's autocast to that type
// on the worker's device: matrix products and convolutions in 16 bits, the
// operations autocast keeps in fp32 (softmax, the losses, norms) in fp32.
// The weights, their gradients and the optimizer's state stay fp32, the
// master copy (autocast casts a weight for each use; its gradient comes back
// as fp32). What crosses stages is the layers' output as it is: 16-bit
// activations and gradients, half the bytes. One process does the same
// (runtime/reference.h): the same casts at the same operations, since a
// stage boundary only detaches a tensor.
// fp16's range is narrow: gradients of small losses underflow to zero, so
// it runs with dynamic loss scaling (NOTE [Loss scaling], loss_scale.h).
#pragma once

#include <ATen/autocast_mode.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace hydrozoa::runtime {

// The 16-bit type of "bf16" / "fp16"; nullopt for "fp32"; an error otherwise.
Result<std::optional<at::ScalarType>> precisionType(const std::string& precision);

// Multiplies every defined gradient of `params` by `factor` in place (1/S
// unscales them, NOTE [Loss scaling]); true when one of them holds an inf
// or NaN. One pass over them, on their device.
bool unscaleGradients(const std::vector<at::Tensor>& params, double factor);

// Autocast to `type` on `device` while it lives (nothing when type is
// nullopt); restores what was set before. Not thread-safe across threads:
// autocast's state is per thread, as the passes are.
class Autocast {
 public:
  Autocast(std::optional<at::ScalarType> type, c10::DeviceType device);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  bool on_ = false;
  c10::DeviceType device_;
  bool wasEnabled_ = false;
  at::ScalarType wasType_ = at::kFloat;
};

}  // namespace hydrozoa::runtime
