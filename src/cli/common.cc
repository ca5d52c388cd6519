#include "cli/common.h"

#include <fmt/format.h>

#include "cli/torch_side.h"
#include "core/units.h"

namespace hydrozoa::cli {

Result<std::optional<std::int64_t>> optionalCount(const std::string& text, const std::string& flag, Range range) {
  if (text.empty()) return std::optional<std::int64_t>();
  HZ_ASSIGN_OR_RETURN(std::int64_t v, parseCount(text, flag, range));
  return std::optional<std::int64_t>(v);
}

Result<std::vector<std::int64_t>> parseSizeList(const std::string& text, const std::string& flag) {
  std::vector<std::int64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    HZ_ASSIGN_OR_RETURN(std::int64_t v, parseCount(item, flag, kSamplesRange));
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

Result<model::Options> parseModelOptions(const std::vector<std::string>& flags) {
  model::Options options;
  for (const auto& f : flags) {
    HZ_ASSIGN_OR_RETURN(auto kv, model::parseOption(f));
    options.push_back(std::move(kv));
  }
  return options;
}

Result<profile::DeviceSpec> deviceFor(const std::string& device, int threads) {
  if (device != "cpu") return profile::loadDevice(device);
  return calibrateThisCpu(threads);
}

namespace {
std::vector<char*> gCommandLine;
}  // namespace

void rememberCommandLine(int argc, char** argv) { gCommandLine.assign(argv, argv + argc + 1); }

char* const* commandLine() { return gCommandLine.data(); }

}  // namespace hydrozoa::cli
