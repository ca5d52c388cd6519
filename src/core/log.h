// Logging: spdlog to stderr, one format for the whole program.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace hydrozoa {

// Sets up the default logger ("warn", "info", "debug"; unknown -> "info").
// Messages go to stderr so that stdout stays for tables and JSON.
void initLogging(const std::string& level);

}  // namespace hydrozoa
