// Predicted profiles of small zoo transformers for the tensor-parallel
// planner's tests: real architectures (so tensorModelOf knows their layers),
// optionally with every layer's time made equal and the updates free, so
// that a plan's time can be worked out by hand.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "model/zoo.h"
#include "profile/device.h"
#include "profile/predict.h"

namespace hydrozoa::plan::testing {

// `model` (gpt or bert) with `layers` blocks, hidden 256, 4 heads, vocabulary
// 1024, 128 tokens, predicted on a V100 at microbatch sizes 1, 2, 4, 8.
inline profile::Profile transformerProfile(const std::string& model = "gpt", int layers = 2) {
  auto arch = model::buildArch({model,
                                {{"layers", std::to_string(layers)},
                                 {"hidden", "256"},
                                 {"heads", "4"},
                                 {"vocab", "1024"},
                                 {"seq_len", "128"}}});
  EXPECT_TRUE(arch.ok()) << arch.status().message();
  auto prof = profile::predictProfile(*arch, *profile::loadDevice("v100"), {1, 2, 4, 8}, "sgd_momentum");
  EXPECT_TRUE(prof.ok()) << prof.status().message();
  return *prof;
}

// The same with every layer's forward pass `forwardMs` and backward pass
// twice that per sample, and no optimizer update.
inline profile::Profile evenTransformerProfile(int layers, double forwardMs = 1) {
  profile::Profile p = transformerProfile("gpt", layers);
  for (profile::LayerInfo& l : p.layers) l.optimizer_ms = 0;
  for (profile::Measurement& m : p.measurements) {
    for (profile::LayerCost& c : m.layers) {
      c.forward_ms = forwardMs * static_cast<double>(m.microbatch_size);
      c.backward_ms = 2 * c.forward_ms;
    }
  }
  return p;
}

}  // namespace hydrozoa::plan::testing
