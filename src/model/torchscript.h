// TorchScript import: a module scripted in Python
//   torch.jit.script(nn.Sequential(...)).save(path)
// loads with torch::jit::load, and its top-level children become the layers
// (a module without children is one layer). TorchScript files carry no input
// description, so the model options must give it:
//   input_shape=1x28x28   per-sample shape (required)
//   input_dtype=float     or long, for token ids (then vocab=N)
//   task=classification  or language_model;  classes=N
#pragma once

#include "core/status.h"
#include "model/model.h"

namespace hydrozoa::model {

Result<Model> loadTorchScriptModel(const ModelSpec& spec, const BuildOptions& options);

}  // namespace hydrozoa::model
