#include "runtime/precision.h"

namespace hydrozoa::runtime {

Result<std::optional<at::ScalarType>> precisionType(const std::string& precision) {
  if (precision == "fp32") return std::optional<at::ScalarType>();
  if (precision == "bf16") return std::optional<at::ScalarType>(at::kBFloat16);
  if (precision == "fp16") return std::optional<at::ScalarType>(at::kHalf);
  return invalidArgument("training.precision \"" + precision + "\" must be fp32, bf16 or fp16");
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
