// Job: checkpoint files arriving from workers and served back to them
// (NOTE [Shipped checkpoints], NOTE [State through the store]) — the
// control plane's "file_chunk", "fetch" and "stored_file" (coordinator_job.h).
#include "cluster/coordinator_job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "wire/file_transfer.h"

namespace hydrozoa::cluster {
namespace coordinator {

// NOTE [Shipped checkpoints]
// Without output.checkpoint_dir, workers share nothing with the coordinator
// but the network (issue 10 §1): each ships its stage's files of a step
// (wire/file_transfer.h) before its "checkpoint" message, into the step's
// .partial directory here, and a new generation's workers fetch their
// layers of the restore point from here. A worker may only write and read
// the layers of its own stage; a refused chunk spoils the step, which is
// then not finalized (the previous checkpoint stays the restore point).
void Job::onFile(const WorkerState& w, const Json& m) {
  const plan::PlanStage& st = gen_.stages.at(static_cast<std::size_t>(w.stage));
  const std::vector<plan::LayerRange> ranges = st.layerRanges();
  auto ownLayer = [&](int layer) {
    return std::any_of(ranges.begin(), ranges.end(),
                       [&](const plan::LayerRange& r) { return layer >= r.first && layer <= r.last; });
  };
  if (m.value("type", "") == "fetch") {
    auto reply = checkpoint_.empty() ? Result<Json>(notFound("this generation starts from no checkpoint"))
                                     : wire::serveFetch(m, checkpoint_, ownLayer);
    if (!reply.ok()) {
      spdlog::warn("{} asked for checkpoint file {}: {}", w.name(), m.value("file", "?"), reply.status().message());
      control_->send(from(w.id), {{"type", "fetch_failed"}, {"file", m.value("file", "")},
                                  {"message", reply.status().message()}});
      return;
    }
    control_->send(from(w.id), *reply);
    return;
  }
  const std::int64_t step = m.value("step", std::int64_t{0});
  if (step < 0 || step > totalSteps_) {  // no directory for a step the job does not have
    spdlog::error("refused a checkpoint file from {}: step {} is not one of the job's 0..{}", w.name(), step,
                  totalSteps_);
    spoiled_.emplace(step, fmt::format("{} sent a file for a step the job does not have", w.name()));
    return;
  }
  if (m.value("type", "") == "stored_file") {
    if (Status s = fetchStoredFile(m, step, ownLayer); !s.ok()) {
      spdlog::error("refused a checkpoint file from {} through the store: {}", w.name(), s.message());
      spoiled_.emplace(step, fmt::format("{} stored a bad file: {}", w.name(), s.message()));
    }
    return;
  }
  if (Status s = wire::acceptChunk(m, run_.partialCheckpoint(step), ownLayer); !s.ok()) {
    spdlog::error("refused a checkpoint file from {}: {}", w.name(), s.message());
    spoiled_.emplace(step, fmt::format("{} sent a bad file: {}", w.name(), s.message()));
  }
}

// NOTE [State through the store]
// A worker with a Redis channel that ships its checkpoints (functions, which
// share no filesystem with the coordinator and may be far from it) writes
// each file of its stage to the store it already reaches, under
// <job>:state:<step>:<file> (runtime/comm/redis/redis_files.h), and says so
// with a "stored_file" message before its "checkpoint". The coordinator
// copies the file into the step's .partial directory as if it had come over
// the control plane (same checks: a layer of the sender's stage, at most
// the size announced) and leaves the key: when the step becomes the restore
// point, the next generation's workers read their layers from the store
// ("restore" in their assign), as a fresh invocation continues where the
// last left off (FuncPipe §3.1), and fall back to fetching from the
// coordinator for a file the store no longer holds. When a later step
// completes, or this one fails, its keys are deleted; the rest at the end.
Status Job::fetchStoredFile(const Json& m, std::int64_t step, const std::function<bool(int)>& ownLayer) {
  if (!channel_) return invalidArgument("this job has no Redis channel to store files in");
  const std::string file = m.value("file", "");
  const int layer = wire::layerOfFileName(file);
  if (layer < 0 || !ownLayer(layer)) return invalidArgument(fmt::format("\"{}\" is no layer file of its stage", file));
  const Bytes bytes = m.value("bytes", Bytes{-1});
  if (bytes < 0 || bytes > wire::kMaxFileBytes) {
    return invalidArgument(fmt::format("{} announced as {} bytes, outside 0..{}", file, bytes, wire::kMaxFileBytes));
  }
  const std::string dir = run_.partialCheckpoint(step);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ioError(fmt::format("{}: cannot create it: {}", dir, ec.message()));
  return channel_->fetchState(step, file, bytes, dir + "/" + file);
}

}  // namespace coordinator
}  // namespace hydrozoa::cluster
