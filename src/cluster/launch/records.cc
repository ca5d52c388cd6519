#include "cluster/launch/records.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace hydrozoa::cluster {

std::string launcherStateDir() {
  const char* env = std::getenv("HYDROZOA_STATE_DIR");
  return env && *env ? env : "/run/hydrozoa";
}

std::int64_t processStart(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string stat = ss.str();
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return std::atoll(field.c_str());
  }
  return 0;
}

Json recordOwner(const std::string& job) {
  return {{"job", job}, {"pid", ::getpid()}, {"start_time", processStart(::getpid())}};
}

bool ownerAlive(const Json& record) {
  const pid_t pid = record.value("pid", 0);
  const std::int64_t start = record.value("start_time", std::int64_t{0});
  return pid > 0 && start != 0 && processStart(pid) == start;
}

StateLock::StateLock(const std::string& dir) {
  fd_ = ::open((dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ >= 0) ::flock(fd_, LOCK_EX);
}

StateLock::~StateLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

std::vector<std::string> recordFiles(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 5 && name.substr(name.size() - 5) == ".json") out.push_back(dir + "/" + name);
    }
    ::closedir(d);
  }
  return out;
}

CleanupReport cleanupRecords(const std::string& dir, const std::string& kind,
                             const std::function<Result<std::vector<std::string>>(const Json&)>& remove) {
  CleanupReport report;
  for (const std::string& file : recordFiles(dir)) {
    auto record = readJsonFile(file);
    if (!record.ok()) {
      report.errors.push_back(fmt::format("{}: unreadable ({}); remove it by hand", file, record.status().message()));
      continue;
    }
    const std::string job = record->value("job", "?");
    const pid_t pid = record->value("pid", 0);
    if (ownerAlive(*record)) {
      report.live.push_back(fmt::format("{} {} (coordinator pid {} still running)", kind, job, pid));
      continue;
    }
    auto removed = remove(*record);
    if (!removed.ok()) {
      report.errors.push_back(fmt::format("{} {}: {}", kind, job, removed.status().message()));
      continue;
    }
    std::string what;
    for (const auto& r : *removed) what += (what.empty() ? "" : ", ") + r;
    report.removed.push_back(fmt::format("{} {} (coordinator pid {}, gone): {}", kind, job, pid,
                                         what.empty() ? "nothing was left" : what));
    ::unlink(file.c_str());
  }
  return report;
}

Status ensureDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return ioError(fmt::format("cannot create {}: {}", dir, std::strerror(errno)));
  }
  return Status();
}

}  // namespace hydrozoa::cluster
