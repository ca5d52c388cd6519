#include "runtime/trace.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace hydrozoa::runtime {

std::int64_t traceNowUs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

const char* traceThreadName(TraceThread thread) {
  switch (thread) {
    case TraceThread::kCompute: return "compute";
    case TraceThread::kReceive: return "receive";
    case TraceThread::kSend: return "send";
    case TraceThread::kAllreduce: return "allreduce";
    case TraceThread::kData: return "data";
  }
  return "?";
}

void TraceRecorder::record(const std::string& name, const char* category, TraceThread thread, std::int64_t beginUs,
                           std::int64_t endUs, Json args) {
  if (!enabled_) return;
  Json e = {{"name", name},
            {"cat", category},
            {"ph", "X"},
            {"ts", beginUs},
            {"dur", std::max<std::int64_t>(0, endUs - beginUs)},
            {"tid", static_cast<int>(thread)}};
  if (!args.is_null()) e["args"] = std::move(args);
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
}

size_t TraceRecorder::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

Status TraceRecorder::flush(const std::string& path) {
  std::vector<Json> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    events.swap(events_);
  }
  if (events.empty()) return Status();
  FILE* f = std::fopen(path.c_str(), "a");
  if (!f) return ioError(fmt::format("{}: cannot append the trace: {}", path, std::strerror(errno)));
  for (const Json& e : events) {
    const std::string line = e.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), f);
  }
  if (std::fclose(f) != 0) return ioError(fmt::format("{}: cannot write the trace: {}", path, std::strerror(errno)));
  return Status();
}

}  // namespace hydrozoa::runtime
