// Helpers shared by the subcommands: turning flags into values with errors
// that name the flag.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/zoo.h"

namespace hydrozoa::cli {

// "1,2,4,8" -> {1, 2, 4, 8}; every entry a positive whole number.
Result<std::vector<std::int64_t>> parseSizeList(const std::string& text, const std::string& flag);

// -O key=value flags -> model options.
Result<model::Options> parseModelOptions(const std::vector<std::string>& flags);

}  // namespace hydrozoa::cli
