// Running a system tool (ip, tc) and collecting what it printed.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace hydrozoa::cluster {

// Runs argv[0] (looked up in PATH) with the arguments, waits for it, and
// returns its standard output and error together. A non-zero exit is an
// error quoting the command and its output.
Result<std::string> runCommand(const std::vector<std::string>& argv);

}  // namespace hydrozoa::cluster
