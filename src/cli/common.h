// Helpers shared by the subcommands: turning flags into values with errors
// that name the flag.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <optional>

#include "core/limits.h"
#include "core/status.h"
#include "model/zoo.h"
#include "profile/device.h"

namespace hydrozoa::cli {

// A flag's whole number within `range`, or nullopt when the flag was not
// given (empty text); the error names the flag, the value and the range.
Result<std::optional<std::int64_t>> optionalCount(const std::string& text, const std::string& flag, Range range);

// "1,2,4,8" -> {1, 2, 4, 8}; every entry a positive whole number.
Result<std::vector<std::int64_t>> parseSizeList(const std::string& text, const std::string& flag);

// -O key=value flags -> model options.
Result<model::Options> parseModelOptions(const std::vector<std::string>& flags);

// --device: "cpu" calibrates this machine with `threads` compute threads per
// worker and logs what it found; anything else is a built-in device or a
// device file.
Result<profile::DeviceSpec> deviceFor(const std::string& device, int threads);

// main()'s argv, kept for handing the command line to the full program
// (cli/front_end.cc); null-terminated.
void rememberCommandLine(int argc, char** argv);
char* const* commandLine();

}  // namespace hydrozoa::cli
