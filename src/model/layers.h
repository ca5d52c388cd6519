// The libtorch module for each layer kind of model/arch.h.
#pragma once

#include <memory>

#include "model/arch.h"
#include "model/model.h"

namespace hydrozoa::model {

// A fresh module for `spec`, initialised from the current torch seed.
std::shared_ptr<LayerModule> makeLayer(const LayerSpec& spec);

}  // namespace hydrozoa::model
