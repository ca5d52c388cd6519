#include "select/exec/pilot.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "data/sampler.h"
#include "profile/memory_tracker.h"

namespace hydrozoa::select {

namespace fs = std::filesystem;

namespace {

struct Trial {
  Bytes need = 0;
  Seconds load = 0, forward = 0, backward = 0;
};

class Pilot {
 public:
  Pilot(std::string jobPath, Bytes budget, std::string scratch, DataCache& cache)
      : jobPath_(std::move(jobPath)), budget_(budget), scratch_(std::move(scratch)), cache_(cache) {}

  // Each layer's input on the first step's minibatch (host memory).
  Status prepare() {
    HZ_ASSIGN_OR_RETURN(task_, cache_.task(jobPath_));
    const cluster::JobSpec& job = task_->job;
    const profile::HostAllocations host;
    HZ_ASSIGN_OR_RETURN(model::Model m, model::buildModel({job.model, job.model_options}, {job.seed, 0, -1}));
    const data::EpochSampler sampler(minibatchSampler(job, task_->train->size()));
    const data::Batch batch = task_->train->get(sampler.indices(0, 0, 0, 0));
    batch_bytes_ = static_cast<Bytes>(batch.inputs.nbytes() + batch.labels.nbytes());
    torch::Tensor x = batch.inputs;
    torch::NoGradGuard guard;
    for (const auto& layer : m.layers) {
      inputs_.push_back(x);
      names_.push_back(layer.name);
      x = layer.module->forward(x);
    }
    return Status();
  }

  int layers() const { return static_cast<int>(names_.size()); }
  const std::vector<std::string>& names() const { return names_; }
  Bytes batchBytes() const { return batch_bytes_; }

  // Layers [a, b] as a shard: its heaviest unit, twice.
  Result<Trial> trial(int a, int b) {
    std::error_code ec;
    fs::remove_all(scratch_, ec);
    fs::create_directories(scratch_, ec);
    if (ec) return ioError(fmt::format("{}: cannot make it: {}", scratch_, ec.message()));
    const bool last = b + 1 == layers();
    UnitSpec u;
    u.job = jobPath_;
    u.shard = a == 0 ? 0 : 1;  // shard 0 reads the data; any other its input file
    u.shards = last ? u.shard + 1 : u.shard + 2;
    u.first = a;
    u.last = b;
    u.state = scratch_ + "/v0";
    HZ_RETURN_IF_ERROR(writeInitialState(task_->job, {{a, b}}, {u.state}));
    {
      const profile::HostAllocations host;
      if (a > 0) {
        u.input = scratch_ + "/input.pt";
        torch::save(inputs_[static_cast<size_t>(a)], u.input);
      }
      if (!last) {
        u.grad = scratch_ + "/grad.pt";
        torch::save(torch::ones_like(inputs_[static_cast<size_t>(b + 1)]), u.grad);
      }
    }
    Trial t;
    for (int round = 0; round < 2; ++round) {
      const std::string next = fmt::format("{}/v{}", scratch_, round + 1);
      Seconds forward = 0, backward = 0, load = 0;
      if (!last) {
        u.kind = UnitKind::kForward;
        u.out_state = next + "f";
        u.output = scratch_ + "/output.pt";
        HZ_ASSIGN_OR_RETURN(const Bytes peak, run(u, &load, &forward));
        t.need = std::max(t.need, peak);
        if (fs::exists(u.out_state)) u.state = u.out_state;
      }
      u.kind = last ? UnitKind::kLast : UnitKind::kBackward;
      u.out_state = next;
      u.output = a > 0 ? scratch_ + "/grad-in.pt" : "";
      Seconds compute = 0;
      HZ_ASSIGN_OR_RETURN(const Bytes peak, run(u, &load, &compute));
      (last ? forward : backward) = compute;
      t.need = std::max(t.need, peak);
      u.state = next;
      t.load = load;
      t.forward = forward;
      t.backward = backward;
    }
    fs::remove_all(scratch_, ec);
    return t;
  }

 private:
  Result<Bytes> run(const UnitSpec& u, Seconds* load, Seconds* compute) {
    profile::MemoryTracker& tracker = profile::MemoryTracker::instance();
    const std::int64_t base = tracker.current();
    tracker.resetPeak();
    const UnitResult r = runUnit(u, cache_);
    if (!r.ok) return internalError(fmt::format("the Pilot's trial of layers {}-{}: {}", u.first, u.last, r.error));
    *load = r.compute_begin - r.load_begin;
    *compute = r.end - r.compute_begin;
    return std::max<Bytes>(0, r.peak_bytes - base);
  }

  std::string jobPath_;
  Bytes budget_;
  std::string scratch_;
  DataCache& cache_;
  const DataCache::Task* task_ = nullptr;
  std::vector<torch::Tensor> inputs_;
  std::vector<std::string> names_;
  Bytes batch_bytes_ = 0;
};

}  // namespace

Result<Partition> partitionModel(const std::string& jobPath, Bytes budget, const std::string& scratch,
                                 DataCache& cache) {
  Pilot pilot(jobPath, budget, scratch, cache);
  HZ_RETURN_IF_ERROR(pilot.prepare());
  const auto room = static_cast<Bytes>(std::floor(static_cast<double>(budget) * (1 - kPrefetchReserve)));
  Partition p;
  p.layer_names = pilot.names();
  p.batch_bytes = pilot.batchBytes();
  for (int a = 0; a < pilot.layers();) {
    HZ_ASSIGN_OR_RETURN(Trial fits, pilot.trial(a, a));
    if (fits.need > room) {
      const auto enough = static_cast<Bytes>(std::ceil(static_cast<double>(fits.need) / (1 - kPrefetchReserve)));
      return invalidArgument(fmt::format(
          "layer {} (\"{}\") needs {} by itself at batch size {}, more than the {} a worker's budget of {} leaves "
          "after the {:.0f}% double-buffering reserve: give --worker-memory {} or more (or a smaller batch)",
          a, p.layer_names[static_cast<size_t>(a)], formatBytes(fits.need), cache.task(jobPath).value()->job.global_batch,
          formatBytes(room), formatBytes(budget), 100 * kPrefetchReserve, formatBytes(enough)));
    }
    int b = a;
    while (b + 1 < pilot.layers()) {
      HZ_ASSIGN_OR_RETURN(const Trial more, pilot.trial(a, b + 1));
      if (more.need > room) break;
      fits = more;
      ++b;
    }
    p.shards.push_back({a, b, fits.need, fits.load, fits.forward, fits.backward});
    a = b + 1;
  }
  return p;
}

}  // namespace hydrozoa::select
