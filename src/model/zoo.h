// The model zoo: named architectures with size options.
//
//   auto arch = buildArch({"resnet18", {{"image_size", "32"}, {"classes", "10"}}});
//
// Defaults are the published full-size networks (torchvision's AlexNet, VGG
// and ResNets at 224x224 with 1000 classes; BERT-base at sequence length 384
// as in Hydrozoa's SQuAD runs; GPT-2 small), so parameter counts match the
// papers; options shrink them to variants that train in seconds on a CPU.
// Unknown option names and out-of-range values are errors naming the option.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "model/arch.h"

namespace hydrozoa::model {

using Options = std::vector<std::pair<std::string, std::string>>;

struct ModelSpec {
  std::string name;  // a zoo name ("resnet34") or, for TorchScript, a file path
  Options options;   // "key" -> "value", validated by the builder
};

// Parses "key=value" (as given to -O/--model-option).
Result<std::pair<std::string, std::string>> parseOption(const std::string& text);

struct ZooEntry {
  std::string name;
  std::vector<std::string> aliases;
  std::string description;
  std::vector<std::string> option_names;
};

const std::vector<ZooEntry>& zoo();
bool isZooModel(const std::string& name);

// True when `name` names a TorchScript file rather than a zoo model: it is
// not a zoo name and contains a '/', ends in .pt/.pth/.ts, or is a file.
bool isTorchScriptPath(const std::string& name);

// The architecture for a zoo model, or an error naming the unknown model or
// the bad option and the accepted ones.
Result<Arch> buildArch(const ModelSpec& spec);

}  // namespace hydrozoa::model
