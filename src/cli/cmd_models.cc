// `hydrozoa models`: the model zoo.
#include <fmt/format.h>

#include <iostream>

#include "cli/commands.h"
#include "core/files.h"
#include "core/table.h"
#include "core/units.h"
#include "model/zoo.h"

namespace hydrozoa::cli {

void addModelsCommand(CLI::App& app, Status* status) {
  auto verbose = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("models", "List the model zoo with full-size parameter counts and options");
  cmd->add_flag("-v,--verbose", *verbose, "Also list every model's options");
  cmd->add_flag("--json", *json, "Print the zoo as a JSON array (name, aliases, layers, parameters, input, options)");
  cmd->callback([verbose, json, status] {
    TextTable t({"model", "aliases", "layers", "parameters", "input", "description"},
                {false, false, true, true, false, false});
    Json list = Json::array();
    for (const auto& e : model::zoo()) {
      auto arch = model::buildArch({e.name, {}});
      if (!arch.ok()) {
        *status = arch.status();
        return;
      }
      if (*json) {
        list.push_back({{"name", e.name},
                        {"aliases", e.aliases},
                        {"description", e.description},
                        {"layers", arch->layers.size()},
                        {"parameters", model::totalParameters(*arch)},
                        {"input_kind", arch->input.kind == model::InputKind::kTokens ? "tokens" : "image"},
                        {"input_shape", arch->input.shape},
                        {"options", e.option_names}});
        continue;
      }
      std::string aliases;
      for (const auto& a : e.aliases) aliases += (aliases.empty() ? "" : ", ") + a;
      const std::string input = arch->input.kind == model::InputKind::kTokens
                                    ? fmt::format("{} tokens", arch->input.shape[0])
                                    : model::shapeString(arch->input.shape);
      t.addRow({e.name, aliases, std::to_string(arch->layers.size()),
                fmt::format("{:.1f}M", static_cast<double>(model::totalParameters(*arch)) / 1e6), input, e.description});
    }
    if (*json) {
      std::cout << list.dump(2) << "\n";
      return;
    }
    std::cout << t.render("");
    if (*verbose) {
      std::cout << "\nOptions (give them as -O key=value):\n";
      for (const auto& e : model::zoo()) {
        std::string names;
        for (const auto& n : e.option_names) names += (names.empty() ? "" : ", ") + n;
        std::cout << "  " << e.name << ": " << names << "\n";
      }
    }
    std::cout << "\nA TorchScript file works too: --model path/model.pt -O input_shape=1x28x28\n";
  });
}

}  // namespace hydrozoa::cli
