#include "core/paths.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace hydrozoa {

std::string executablePath() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
}

std::string executableDir() {
  const std::string exe = executablePath();
  return exe.empty() ? "." : std::filesystem::path(exe).parent_path().string();
}

std::string dataDir() {
  if (const char* env = std::getenv("HYDROZOA_DATA_DIR"); env && *env) return env;
  namespace fs = std::filesystem;
  const fs::path exe = executableDir();
  for (const fs::path& candidate : {exe / "../share/hydrozoa", exe / "../data", exe / "data"}) {
    std::error_code ec;
    if (fs::is_directory(candidate / "pricing", ec)) return fs::weakly_canonical(candidate, ec).string();
  }
  return HYDROZOA_SOURCE_DATA_DIR;
}

std::string dataFile(const std::string& sub, const std::string& name, const std::string& extension) {
  const bool bare = name.find('/') == std::string::npos && name.find('.') == std::string::npos;
  if (!bare) return name;
  return dataDir() + "/" + sub + "/" + name + extension;
}

}  // namespace hydrozoa
