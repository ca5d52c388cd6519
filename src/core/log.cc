#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace hydrozoa {

void initLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("hydrozoa");
  logger->set_pattern("%^[%H:%M:%S.%e %l]%$ %v");
  spdlog::level::level_enum lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") lvl = spdlog::level::info;
  logger->set_level(lvl);
  spdlog::set_default_logger(logger);
}

}  // namespace hydrozoa
