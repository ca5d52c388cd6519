#include "runtime/precision.h"

#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

namespace hydrozoa::runtime {

Result<std::optional<at::ScalarType>> precisionType(const std::string& precision) {
  if (precision == "fp32") return std::optional<at::ScalarType>();
  if (precision == "bf16") return std::optional<at::ScalarType>(at::kBFloat16);
  if (precision == "fp16") return std::optional<at::ScalarType>(at::kHalf);
  return invalidArgument("training.precision \"" + precision + "\" must be fp32, bf16 or fp16");
}

bool unscaleGradients(const std::vector<at::Tensor>& params, double factor) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return false;
  // GradScaler's own kernel: the multiply and the check in one pass.
  const auto options = grads.front().options().dtype(at::kFloat);
  at::Tensor found = at::zeros({1}, options);
  at::_amp_foreach_non_finite_check_and_unscale_(grads, found, at::full({1}, factor, options));
  return found.item<float>() != 0;
}

Autocast::Autocast(std::optional<at::ScalarType> type, c10::DeviceType device) : device_(device) {
  if (!type) return;
  on_ = true;
  wasEnabled_ = at::autocast::is_autocast_enabled(device_);
  wasType_ = at::autocast::get_autocast_dtype(device_);
  at::autocast::set_autocast_enabled(device_, true);
  at::autocast::set_autocast_dtype(device_, *type);
  at::autocast::increment_nesting();
}

Autocast::~Autocast() {
  if (!on_) return;
  // The weights' casts are cached for the region; the outermost one drops them.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_, wasEnabled_);
  at::autocast::set_autocast_dtype(device_, wasType_);
}

}  // namespace hydrozoa::runtime
