#include "cluster/run_dir.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/paths.h"
#include "runtime/checkpoint_manifest.h"

namespace hydrozoa::cluster {
namespace fs = std::filesystem;

namespace {

std::string checkpointName(std::int64_t step) { return fmt::format("step-{:08d}", step); }

}  // namespace

Result<RunDir> RunDir::create(const std::string& path) {
  std::error_code ec;
  if (fs::exists(path + "/job.yaml", ec)) {
    return invalidArgument(fmt::format("{} already holds a run; continue it with `hydrozoa train --resume {}`, or "
                                       "choose another output directory (--out)",
                                       path, path));
  }
  RunDir run(fs::absolute(path).lexically_normal().string());
  run.made_ = !fs::exists(path, ec);
  if (!run.made_) {
    for (const auto& e : fs::directory_iterator(path, ec)) run.existing_.insert(e.path().filename().string());
  }
  Status made = privateDirectory(path, "--out");
  if (made.ok()) made = privateDirectory(path + "/workers", "--out");
  if (made.ok()) made = privateDirectory(path + "/checkpoints", "--out");
  if (!made.ok()) {
    run.discard();
    return made;
  }
  return run;
}

void RunDir::discard() const {
  std::error_code ec;
  if (made_) {
    fs::remove_all(root_, ec);
    return;
  }
  for (const auto& e : fs::directory_iterator(root_, ec)) {
    if (!existing_.count(e.path().filename().string())) fs::remove_all(e.path(), ec);
  }
}

Result<RunDir> RunDir::open(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return notFound(fmt::format("{}: no such run directory", path));
  if (!fs::exists(path + "/job.yaml", ec)) {
    return invalidArgument(fmt::format("{}: not a run directory (it has no job.yaml)", path));
  }
  HZ_RETURN_IF_ERROR(privateDirectory(path + "/workers", "--resume"));
  HZ_RETURN_IF_ERROR(privateDirectory(path + "/checkpoints", "--resume"));
  return RunDir(fs::absolute(path).lexically_normal().string());
}

Status RunDir::useCheckpointsDir(const std::string& dir) {
  std::error_code ec;
  const std::string path = fs::absolute(dir).lexically_normal().string();
  HZ_RETURN_IF_ERROR(privateDirectory(path, "output.checkpoint_dir"));
  checkpoints_ = path;
  return Status();
}

std::string RunDir::workerLog(int worker) const { return fmt::format("{}/workers/worker-{}.log", root_, worker); }
std::string RunDir::workerTrace(int worker) const {
  return fmt::format("{}/workers/worker-{}.trace.jsonl", root_, worker);
}
std::string RunDir::partialCheckpoint(std::int64_t step) const {
  return fmt::format("{}/{}.partial", checkpointsDir(), checkpointName(step));
}

Status RunDir::writeJson(const std::string& name, const Json& value) const {
  return writeText(name, value.dump(1) + "\n");
}

Status RunDir::writeText(const std::string& name, const std::string& text) const {
  HZ_RETURN_IF_ERROR(writeFileAtomically(file(name), text));
  ::chmod(file(name).c_str(), 0600);
  return Status();
}

Status RunDir::appendMetrics(const Json& line) const {
  const std::string path = file("metrics.jsonl");
  FILE* f = std::fopen(path.c_str(), "a");
  if (!f) return ioError(fmt::format("{}: cannot append: {}", path, std::strerror(errno)));
  const std::string text = line.dump() + "\n";
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return ioError(fmt::format("{}: cannot append: {}", path, std::strerror(errno)));
  ::chmod(path.c_str(), 0600);
  return Status();
}

Result<std::vector<Json>> RunDir::readMetrics() const {
  std::vector<Json> lines;
  std::ifstream in(file("metrics.jsonl"));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    HZ_ASSIGN_OR_RETURN(Json j, parseJson(line, fmt::format("{}:{}", file("metrics.jsonl"), n)));
    lines.push_back(std::move(j));
  }
  return lines;
}

Status RunDir::keepMetricsThrough(std::int64_t step, std::int64_t epochs) const {
  HZ_ASSIGN_OR_RETURN(std::vector<Json> lines, readMetrics());
  std::string text;
  for (const Json& l : lines) {
    const bool keep = l.contains("step")             ? l["step"].get<std::int64_t>() <= step
                      : l.contains("test_accuracy") ? l.value("epoch", std::int64_t{0}) <= epochs
                                                    : true;
    if (keep) text += l.dump() + "\n";
  }
  return writeText("metrics.jsonl", text);
}

Status RunDir::finalizeCheckpoint(std::int64_t step, const Json& manifest, int keep) const {
  const std::string partial = partialCheckpoint(step);
  const std::string final = checkpointsDir() + "/" + checkpointName(step);
  HZ_RETURN_IF_ERROR(writeFileAtomically(partial + "/manifest.json", manifest.dump(1) + "\n"));
  std::error_code ec;
  fs::remove_all(final, ec);
  fs::rename(partial, final, ec);
  if (ec) return ioError(fmt::format("{}: cannot complete the checkpoint: {}", final, ec.message()));
  HZ_RETURN_IF_ERROR(writeFileAtomically(checkpointsDir() + "/latest", checkpointName(step) + "\n"));
  // Keep the newest `keep` complete checkpoints.
  std::vector<std::string> complete;
  for (const auto& e : fs::directory_iterator(checkpointsDir(), ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && name.rfind("step-", 0) == 0 && name.find(".partial") == std::string::npos) {
      complete.push_back(name);
    }
  }
  std::sort(complete.begin(), complete.end());
  for (size_t i = 0; i + keep < complete.size(); ++i) fs::remove_all(checkpointsDir() + "/" + complete[i], ec);
  return Status();
}

Result<std::optional<CheckpointInfo>> RunDir::latestCheckpoint() const {
  const std::string latest = checkpointsDir() + "/latest";
  struct stat st {};
  if (::lstat(latest.c_str(), &st) != 0) return std::optional<CheckpointInfo>();
  // `latest` names a checkpoint of this run: a file (not a link) holding
  // "step-NNNNNNNN", a directory (not a link) beside it.
  if (!S_ISREG(st.st_mode) || st.st_size > 64) {
    return invalidArgument(fmt::format("{}: not a file of hydrozoa's (a link, or too large); remove it to resume from "
                                       "the newest complete checkpoint",
                                       latest));
  }
  HZ_ASSIGN_OR_RETURN(std::string name, readTextFile(latest));
  name.erase(name.find_last_not_of(" \n\r\t") + 1);
  const bool wellFormed = name.size() == 13 && name.rfind("step-", 0) == 0 &&
                          name.find_first_not_of("0123456789", 5) == std::string::npos;
  CheckpointInfo info;
  info.dir = checkpointsDir() + "/" + name;
  if (!wellFormed || ::lstat(info.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return invalidArgument(fmt::format("{}: names \"{}\", not a checkpoint directory of this run (step-NNNNNNNN "
                                       "beside it); remove it to resume from the newest complete checkpoint",
                                       latest, printable(name)));
  }
  // Every field checked (runtime/checkpoint_manifest.h); what the resumed
  // run reads from it is the checked form.
  const std::string path = info.dir + "/manifest.json";
  HZ_ASSIGN_OR_RETURN(Json raw, readJsonFile(path));
  HZ_ASSIGN_OR_RETURN(runtime::CheckpointManifest manifest, runtime::checkpointManifestFromJson(raw, path));
  info.step = manifest.step;
  info.manifest = runtime::checkpointManifestToJson(manifest);
  return std::optional<CheckpointInfo>(info);
}

void RunDir::removePartialCheckpoints() const {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(checkpointsDir(), ec)) {
    if (e.path().filename().string().find(".partial") != std::string::npos) fs::remove_all(e.path(), ec);
  }
}

Status RunDir::mergeTraces(const std::vector<std::string>& names, std::int64_t originUs) const {
  Json events = Json::array();
  for (size_t w = 0; w < names.size(); ++w) {
    const int pid = static_cast<int>(w);
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", names[w]}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
    for (int tid = 0; tid < 5; ++tid) {
      static const char* kThreads[] = {"compute", "receive", "send", "allreduce", "data"};
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid},
                        {"args", {{"name", kThreads[tid]}}}});
    }
    std::ifstream in(workerTrace(static_cast<int>(w)));
    std::string line;
    while (std::getline(in, line)) {
      Json e = parseJsonOrDiscarded(line);
      if (!e.is_object() || !e.contains("ts")) continue;  // a line cut short by a crash
      e["pid"] = pid;
      e["ts"] = e["ts"].get<std::int64_t>() - originUs;
      events.push_back(std::move(e));
    }
  }
  return writeJson("trace.json", {{"traceEvents", events}, {"displayTimeUnit", "ms"}});
}

}  // namespace hydrozoa::cluster
