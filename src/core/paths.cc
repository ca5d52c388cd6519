#include "core/paths.h"

#include <fmt/format.h>
#include <sys/stat.h>
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

Status privateDirectory(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return invalidArgument(fmt::format("{}: not a directory{} ({}); choose a directory", path,
                                         S_ISLNK(st.st_mode) ? " but a symbolic link" : "", what));
    }
    if (st.st_uid != ::getuid() || (st.st_mode & 022) != 0) {
      return invalidArgument(fmt::format("{}: {} (mode {:04o}, owner {}): a run there could be changed by others; "
                                         "choose a directory of your own ({} {}/run makes a private one inside it)",
                                         path, st.st_uid != ::getuid() ? "another user's directory" : "others can write it",
                                         st.st_mode & 07777, st.st_uid, what, path));
    }
    return Status();
  }
  fs::create_directories(path, ec);
  if (ec) return ioError(fmt::format("{}: cannot create the directory: {}", path, ec.message()));
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::replace, ec);
  if (ec || ::lstat(path.c_str(), &st) != 0 || (st.st_mode & 077) != 0 || st.st_uid != ::getuid()) {
    return ioError(fmt::format("{}: cannot make the directory private to this user (mode {:04o}, owner {}){}{}; "
                               "choose a directory on a filesystem with permissions ({})",
                               path, st.st_mode & 07777, st.st_uid, ec ? ": " : "", ec ? ec.message() : "", what));
  }
  return Status();
}

}  // namespace hydrozoa
