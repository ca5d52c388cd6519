#include "select/exec/spill.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/files.h"

namespace hydrozoa::select {

namespace fs = std::filesystem;

void cleanupSpills(std::vector<std::string>* removed, std::vector<std::string>* kept, const std::string& root) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string dir = e.path().string();
    if (e.path().filename().string().rfind("hydrozoa-", 0) != 0 || !fs::is_directory(e.path())) continue;
    auto text = readTextFile(dir + "/run");
    if (!text.ok()) continue;  // not a spill directory of ours
    std::string run = *text;
    while (!run.empty() && (run.back() == '\n' || run.back() == '\r')) run.pop_back();
    bool gone = !fs::is_directory(run);
    if (!gone && fs::exists(run + "/sharp.json")) {  // without it, the Pilot may be filling this now
      auto j = readJsonFile(run + "/sharp.json");
      gone = j.ok() && j->value("spill", std::string()) != dir;
    }
    if (!gone) {
      kept->push_back(fmt::format("{} (the spilled models of {}: hydrozoa select --resume {} goes on)", dir, run, run));
      continue;
    }
    std::error_code rm;
    fs::remove_all(dir, rm);
    if (!rm) removed->push_back(fmt::format("{} (the spilled models of {}, which is gone)", dir, run));
  }
}

}  // namespace hydrozoa::select
