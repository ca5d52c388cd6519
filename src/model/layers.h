// The libtorch module for each layer kind of model/arch.h.
#pragma once

#include <memory>

#include "model/arch.h"
#include "model/model.h"

namespace hydrozoa::model {

// A fresh module for `spec`, initialised from the current torch seed. With
// `group`, a transformer block, embedding or LM head is built as that
// group's rank's slice (its sizes divided by the group's; model/tensor_parallel.h),
// its weights still to be set from the whole layer's (splitLayer); other
// kinds ignore it.
std::shared_ptr<LayerModule> makeLayer(const LayerSpec& spec, const std::shared_ptr<TensorGroup>& group = nullptr);

}  // namespace hydrozoa::model
