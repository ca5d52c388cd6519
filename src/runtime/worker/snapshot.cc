#include "runtime/worker/worker_impl.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include "runtime/comm/redis/redis_files.h"
#include "wire/file_transfer.h"

namespace hydrozoa::runtime {

std::vector<torch::Tensor> Worker::stageBuffers() const {
  std::vector<torch::Tensor> out;
  for (const auto& chunk : chunks_) {
    for (const auto& layer : chunk->model().layers) {
      for (const auto& b : layer.module->buffers()) out.push_back(b);
    }
  }
  return out;
}

std::vector<torch::Tensor> Worker::stageParameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& chunk : chunks_) {
    for (torch::Tensor& p : chunk->model().parameters()) out.push_back(std::move(p));
  }
  return out;
}

std::vector<torch::Tensor> Worker::versionParameters(size_t version) const {
  std::vector<torch::Tensor> out;
  for (const auto& chunk : copies_.at(version)) {
    for (torch::Tensor& p : chunk->model().parameters()) out.push_back(std::move(p));
  }
  return out;
}

// With weight versions, the one the next step runs on goes with the
// latest (NOTE [Weight versions]): the state after completedStep_ steps.
Status Worker::saveState(const std::string& dir) {
  const auto* previous = versionFor(completedStep_);
  for (size_t c = 0; c < chunks_.size(); ++c) {
    HZ_RETURN_IF_ERROR(saveStage(dir, chunks_[c]->model(), *optimizer_,
                                 previous ? &(*previous)[c]->model() : nullptr, lossScale_ ? &*lossScale_ : nullptr));
  }
  return Status();
}

Status Worker::loadState(const std::string& dir) {
  const auto* previous = versionFor(role_.start_step);
  for (size_t c = 0; c < chunks_.size(); ++c) {
    HZ_RETURN_IF_ERROR(loadStage(dir, chunks_[c]->model(), *optimizer_, previous ? &(*previous)[c]->model() : nullptr,
                                 lossScale_ ? &*lossScale_ : nullptr));
  }
  return Status();
}

void Worker::snapshot() {
  torch::NoGradGuard guard;
  const std::vector<torch::Tensor> params = stageParameters();
  const std::vector<torch::Tensor> buffers = stageBuffers();
  auto copyInto = [](torch::Tensor& to, const torch::Tensor& from) {
    if (!to.defined() || !to.sizes().equals(from.sizes()) || to.dtype() != from.dtype()) {
      to = from.detach().clone();
    } else {
      to.copy_(from);
    }
  };
  before_.params.resize(params.size());
  before_.optim.resize(params.size());
  before_.buffers.resize(buffers.size());
  for (size_t i = 0; i < params.size(); ++i) {
    copyInto(before_.params[i], params[i]);
    ParamState now = optimizerStateOf(*optimizer_, params[i]);
    ParamState& kept = before_.optim[i];
    if (kept.size() != now.size()) kept.assign(now.size(), {});
    for (size_t k = 0; k < now.size(); ++k) {
      kept[k].first = now[k].first;
      copyInto(kept[k].second, now[k].second);
    }
  }
  for (size_t i = 0; i < buffers.size(); ++i) copyInto(before_.buffers[i], buffers[i]);
  before_.step = completedStep_;
  before_.lossScale = lossScale_;
}

// The worker is halted and ends after this: its live state is overwritten
// with the step before, then saved the usual way.
Status Worker::saveSnapshot(const std::string& dir) {
  torch::NoGradGuard guard;
  std::vector<torch::Tensor> params = stageParameters();
  std::vector<torch::Tensor> buffers = stageBuffers();
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].copy_(before_.params[i]);
    clearOptimizerStateOf(*optimizer_, params[i]);
    setOptimizerStateOf(*optimizer_, params[i], before_.optim[i]);
  }
  for (size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(before_.buffers[i]);
  completedStep_ = before_.step;
  lossScale_ = before_.lossScale;
  return saveState(dir);
}

// A fresh directory only this process writes, on this worker's host:
// under $TMPDIR or /tmp, named hydrozoa-w<id>-<what>-XXXXXX (mkdtemp, 0700).
Result<std::string> privateDir(int worker, const char* what) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = fmt::format("{}/hydrozoa-w{}-{}-XXXXXX", tmp && *tmp ? tmp : "/tmp", worker, what);
  if (::mkdtemp(pattern.data()) == nullptr) {
    return ioError(fmt::format("{}: cannot create a directory for a checkpoint: {}", pattern, std::strerror(errno)));
  }
  return pattern;
}

Result<std::string> Worker::checkpointDir(std::int64_t globalStep) const {
  if (shipsCheckpoints()) return privateDir(args_.id, fmt::format("step{}", globalStep).c_str());
  const std::string dir = fmt::format("{}/step-{:08d}.partial", role_.checkpoint_root, globalStep);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ioError(fmt::format("{}: cannot create it: {}", dir, ec.message()));
  return dir;
}

namespace {

Result<redis::Connection> openStore(const Role::Channel& channel) {
  HZ_ASSIGN_OR_RETURN(const redis::Address address, redis::parseUrl(channel.url, "assign.channel.url"));
  return redis::Connection::open(address, channel.password, channel.timeout);
}

}  // namespace

// NOTE [State through the store] (cluster/coordinator.cc): with a channel,
// each file goes to the store and the coordinator is told its size.
Status Worker::shipCheckpoint(std::int64_t globalStep, const std::string& dir, Status saved) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  Status s = std::move(saved);
  const Json header = {{"step", globalStep}, {"stage", role_.stage}};
  if (s.ok() && !role_.channel.state.empty()) {
    const auto t0 = Clock::now();
    auto store = openStore(role_.channel);
    s = store.status();
    for (size_t i = 0; i < files.size() && s.ok(); ++i) {
      const std::string name = std::filesystem::path(files[i]).filename().string();
      auto bytes = redis::putFile(*store, fmt::format("{}:{}:{}", role_.channel.state, globalStep, name), files[i]);
      s = bytes.status();
      if (s.ok()) {
        Json m = header;
        m.update({{"type", "stored_file"}, {"file", name}, {"bytes", *bytes}});
        control_->send(m);
      }
    }
    if (s.ok()) spdlog::info("stored step {}'s state in the Redis channel in {:.2f} s", globalStep, since(t0));
  } else {
    for (size_t i = 0; i < files.size() && s.ok(); ++i) s = wire::sendFile(*control_, header, files[i]);
  }
  std::filesystem::remove_all(dir, ec);
  return s;
}

Result<std::string> Worker::fetchCheckpoint() {
  HZ_ASSIGN_OR_RETURN(const std::string dir, privateDir(args_.id, "restore"));
  const auto t0 = Clock::now();
  std::optional<redis::Connection> store;
  if (!role_.channel.restore.empty()) {
    auto opened = openStore(role_.channel);
    if (opened.ok()) {
      store.emplace(std::move(*opened));
    } else {
      spdlog::warn("the checkpoint comes from the coordinator instead: {}", opened.status().message());
    }
  }
  int fromStore = 0;
  std::string layers;
  for (const auto& [first, last] : role_.layer_ranges) {
    for (int layer = first; layer <= last; ++layer) {
      const std::string file = layerFileName(layer);
      if (store) {
        const Status got = redis::getFile(*store, role_.channel.restore + ":" + file, dir + "/" + file, -1,
                                          wire::kMaxFileBytes);
        if (got.ok()) {
          ++fromStore;
          continue;
        }
        spdlog::warn("{} comes from the coordinator instead: {}", file, got.message());
      }
      if (Status s = wire::fetchFile(*control_, {{"stage", role_.stage}}, file, dir + "/" + file,
                                     [](const Json& m) { return m.value("type", "") != "stop"; });
          !s.ok()) {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
        return s;
      }
    }
    layers += fmt::format("{}{}-{}", layers.empty() ? "" : ", ", first, last);
  }
  spdlog::info("fetched layers {} of {} from {} in {:.2f} s", layers, role_.checkpoint,
               fromStore == 0 ? "the coordinator" : fmt::format("the Redis channel ({} files)", fromStore),
               since(t0));
  return dir;
}

void Worker::checkpoint(std::int64_t globalStep) {
  // A stop at an epoch's start that the epoch's own checkpoint already saved
  // (every replica skips alike: synchronizeBuffers() is collective).
  if (globalStep == savedStep_) return;
  savedStep_ = globalStep;
  synchronizeBuffers();
  if (role_.replica != 0) return;  // replicas hold identical parameters and optimizer state
  if (!speaksForSlices()) {
    // NOTE [Checkpoints of split layers] (runtime/checkpoint.cc): this
    // worker's slices go into the gather; its group's rank 0 writes.
    TraceSpan span(trace_, "checkpoint", "checkpoint", TraceThread::kCompute);
    if (Status s = saveState(""); !s.ok()) throw std::runtime_error(s.message());
    return;
  }
  auto dir = checkpointDir(globalStep);
  if (!dir.ok()) throw std::runtime_error(dir.status().message());
  TraceSpan span(trace_, "checkpoint", "checkpoint", TraceThread::kCompute);
  Status s = saveState(*dir);
  // Sent from here, before the "checkpoint" posted after them (one socket, in order).
  if (shipsCheckpoints()) s = shipCheckpoint(globalStep, *dir, s);
  if (!s.ok()) throw std::runtime_error(s.message());
  post({{"type", "checkpoint"}, {"step", globalStep}, {"stage", role_.stage}});
}

}  // namespace hydrozoa::runtime
