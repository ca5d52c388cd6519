// A worker's timeline: spans (forward of microbatch 3, send, receive,
// allreduce, optimizer step, data wait) in Chrome's trace-event format, so
// the run's trace.json opens in Perfetto or chrome://tracing.
//
// Timestamps are microseconds of the machine's monotonic clock, which every
// process on a host shares; the coordinator shifts them to the job's start
// when it merges the workers' files.
//
// Thread-safety: record() may be called from any thread (a mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"

namespace hydrozoa::runtime {

// Microseconds on the shared monotonic clock.
std::int64_t traceNowUs();

enum class TraceThread { kCompute = 0, kReceive = 1, kSend = 2, kAllreduce = 3, kData = 4 };

class TraceRecorder {
 public:
  // `enabled` false records nothing (cheap no-op).
  explicit TraceRecorder(bool enabled = true) : enabled_(enabled) {}

  void setEnabled(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }

  // A complete span [begin, end) on `thread`; args are shown when selected.
  void record(const std::string& name, const char* category, TraceThread thread, std::int64_t beginUs,
              std::int64_t endUs, Json args = Json());

  // Appends the events recorded since the last flush to `path` (one JSON
  // event per line) and forgets them.
  Status flush(const std::string& path);

  size_t pending() const;

 private:
  bool enabled_;
  mutable std::mutex mu_;
  std::vector<Json> events_;
};

// Records the span from construction to destruction.
class TraceSpan {
 public:
  TraceSpan(TraceRecorder& recorder, std::string name, const char* category, TraceThread thread, Json args = Json())
      : recorder_(recorder), name_(std::move(name)), category_(category), thread_(thread), args_(std::move(args)),
        begin_(recorder.enabled() ? traceNowUs() : 0) {}
  ~TraceSpan() {
    if (recorder_.enabled()) recorder_.record(name_, category_, thread_, begin_, traceNowUs(), std::move(args_));
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  TraceRecorder& recorder_;
  std::string name_;
  const char* category_;
  TraceThread thread_;
  Json args_;
  std::int64_t begin_;
};

const char* traceThreadName(TraceThread thread);

}  // namespace hydrozoa::runtime
