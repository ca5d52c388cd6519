#include "runtime/worker/worker_impl.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include "core/limits.h"
#include "data/dataset.h"
#include "model/model.h"
#include "plan/cost/allreduce.h"
#include "runtime/comm/control_store.h"
#include "runtime/comm/redis/redis_transport.h"
#include "runtime/exec/tags.h"
#include "runtime/job_data.h"

namespace hydrozoa::runtime {
namespace {

constexpr int kShapeSlots = 16;  // dtype, rank, dimensions

// A stage boundary's element types as the shape header codes them: fp32,
// token ids, and the 16-bit activations of mixed precision.
constexpr torch::ScalarType kBoundaryTypes[] = {torch::kFloat, torch::kLong, torch::kBFloat16, torch::kHalf};

std::int64_t boundaryTypeCode(torch::ScalarType type) {
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(std::size(kBoundaryTypes)); ++i) {
    if (kBoundaryTypes[i] == type) return i;
  }
  return -1;
}

}  // namespace

Status Worker::build() {
  const cluster::JobSpec& job = role_.job;
  torch::set_num_threads(job.threads);
  HZ_ASSIGN_OR_RETURN(auto schedule, makeSchedule(role_.schedule));
  schedule_ = std::move(schedule);
  const PipelineShape shape = pipelineShape();
  HZ_RETURN_IF_ERROR(schedule_->check(shape));
  // NOTE [Devices]: "auto" takes a GPU when the host has one; workers on one
  // host share its GPUs round-robin by their rank there (NOTE [A worker's
  // GPU], role.h).
  if (job.device == "cuda" || (job.device == "auto" && torch::cuda::is_available())) {
    if (!torch::cuda::is_available()) {
      return invalidArgument("training.device is cuda but no CUDA device is usable here (no GPU, or no driver for "
                             "it); use training.device: auto or cpu");
    }
    HZ_ASSIGN_OR_RETURN(const int local, localRank(role_));
    device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local % torch::cuda::device_count()));
  }
  HZ_ASSIGN_OR_RETURN(precision_, precisionType(job.precision));
  if (precision_ == at::kHalf) lossScale_.emplace(job.loss_scale_initial, job.loss_scale_growth_interval);
  // Its process group joins it once the transport connects, below.
  if (role_.tensor_parallel > 1) tensor_ = std::make_shared<model::TensorGroup>(role_.tensor_rank, role_.tensor_parallel);
  for (int c = 0; c < numChunks(); ++c) {
    const auto [first, last] = role_.layer_ranges[static_cast<size_t>(c)];
    HZ_ASSIGN_OR_RETURN(model::Model m,
                        model::buildModel({job.model, job.model_options}, {job.seed, first, last, tensor_}));
    if (device_.is_cuda()) m.to(device_);
    chunks_.push_back(std::make_unique<StageExecutor>(std::move(m), shape.lastVirtual(c), job.seed, trace_));
    chunks_.back()->setRecompute(role_.recompute);
    chunks_.back()->setPrecision(precision_, device_.type());
    inShapes_.emplace_back().device = device_;
    outShapes_.emplace_back().device = device_;
  }
  optimizer_ = makeOptimizer(job.optimizer, stageParameters());
  if (schedule_->weightVersions(shape) > 1) HZ_RETURN_IF_ERROR(buildWeightVersions(schedule_->weightVersions(shape)));
  if (!role_.checkpoint.empty()) {
    std::string dir = role_.checkpoint;
    if (shipsCheckpoints()) {
      HZ_ASSIGN_OR_RETURN(dir, fetchCheckpoint());
    }
    const Status loaded = loadState(dir);
    std::error_code ec;
    if (shipsCheckpoints()) std::filesystem::remove_all(dir, ec);
    HZ_RETURN_IF_ERROR(loaded);
  }
  // The working copies but the one the first step runs on take the latest
  // weights (that one has the checkpoint's previous weights, or the latest).
  for (size_t v = 0; v < copies_.size(); ++v) {
    if (!role_.checkpoint.empty() && versionFor(role_.start_step) == &copies_[v]) continue;
    torch::NoGradGuard guard;
    const std::vector<torch::Tensor> latest = stageParameters();
    const std::vector<torch::Tensor> copy = versionParameters(v);
    for (size_t i = 0; i < copy.size(); ++i) copy[i].copy_(latest[i]);
  }
  HZ_RETURN_IF_ERROR(connect());
  if (role_.state_from >= 0) {
    if (!copies_.empty()) return invalidArgument("a schedule with weight versions cannot join a running group");
    HZ_RETURN_IF_ERROR(shareState(role_.state_from, role_.start_step));
    role_.state_from = -1;  // joined: at a later regroup it is one of the running replicas
  }
  scaleLosses();
  // NOTE [Cores for compute threads]: with a core of its own, the compute
  // thread is never queued behind its neighbour's; the helper threads
  // (transfers, data, heartbeats) stay free to run on any of the process's
  // cores. Those started above inherit that (every channel a step uses is
  // opened above, its thread with it); those started later (the
  // loaders' producers, built above, and the control thread) would inherit
  // the compute thread's core, and so are put back on helperCpus_: with the
  // loader sharing the compute core, a ResNet-18 1x1 step took 400 ms where
  // its profile said 273 ms, while the other core sat idle.
  pinComputeThread();
  setThreadSlice(std::chrono::microseconds(0));  // NOTE [Helper threads wake at once]
  return Status();
}

void Worker::pinComputeThread() {
  if (role_.cpus.empty()) return;
  if (!runThreadOn(role_.cpus)) {
    spdlog::warn("could not pin the compute thread to cores {}: {}", fmt::join(role_.cpus, ","), std::strerror(errno));
  } else {
    spdlog::info("compute thread pinned to core{} {}", role_.cpus.size() == 1 ? "" : "s", fmt::join(role_.cpus, ","));
  }
}

// What the step needs around the stage's layers, for this worker's place in
// its generation: the sampler and loaders of its replica, the transport to
// its peers, the gradient syncs, channels and the step executor. Built
// again by regroup().
Status Worker::connect() {
  const cluster::JobSpec& job = role_.job;
  const PipelineShape shape = pipelineShape();
  // Every worker follows the same sampler (microbatch sizes); only stage 0
  // (inputs) and the last stage (labels) read the data.
  data::SamplerOptions so;
  so.dataset_size = role_.train_size;
  so.global_batch = role_.global_batch;
  so.replicas = role_.replicas;
  so.microbatch_size = role_.microbatch_size;
  so.seed = job.seed;
  so.shuffle = job.shuffle;
  so.drop_last = job.drop_last;
  so.round_robin = !role_.stage_replicas.empty();
  so.idle_replicas = role_.idle_replicas;
  trainSampler_.emplace(so);
  if (const char* record = std::getenv("HYDROZOA_RECORD_SAMPLES"); record && *record && firstStage() && !sampleLog_) {
    sampleLog_ = std::make_unique<std::ofstream>(role_.trace_path + ".samples", std::ios::app);
  }
  if (job.eval && role_.test_size > 0) {
    so.dataset_size = role_.test_size;
    so.shuffle = false;
    so.drop_last = false;
    testSampler_.emplace(so);
  }
  if (firstStage() || lastStage()) {
    const model::Model& m = chunks_.front()->model();
    const data::DataSpec ds = jobDataSpec(job, m.input, m.task);
    const int depth = static_cast<int>(2 * role_.microbatches);
    if (!trainData_) {
      HZ_ASSIGN_OR_RETURN(trainData_, data::openDataset(ds, data::Split::kTrain));
    }
    trainLoader_ = std::make_unique<data::PrefetchLoader>(trainData_, *trainSampler_, role_.replica, depth);
    if (testSampler_) {
      if (!testData_) {
        HZ_ASSIGN_OR_RETURN(testData_, data::openDataset(ds, data::Split::kTest));
      }
      testLoader_ = std::make_unique<data::PrefetchLoader>(testData_, *testSampler_, role_.replica, depth);
    }
  }

  TransportOptions to;
  // The rendezvous: the coordinator's store, at the endpoint of this
  // worker's control connection (NOTE [The rendezvous], coordinator.cc).
  to.store_endpoint = args_.join;
  to.store_name = fmt::format("w{}.store", args_.id);
  to.store_token = args_.token;
  to.prefix = fmt::format("gen{}", role_.generation);
  to.listen_host = role_.listen_host;
  to.rank = role_.rank;
  to.world_size = role_.world;
  to.stage = role_.stage;
  to.stages = role_.stages;
  to.replica = role_.replica;
  to.replicas = role_.replicas;
  to.tensor_rank = role_.tensor_rank;
  to.tensor_parallel = role_.tensor_parallel;
  to.cuda = device_.is_cuda();
  if (to.cuda) {
    // NCCL where every worker on this machine has a GPU of its own; Gloo
    // through host memory where they share (NOTE [Workers sharing a GPU]).
    HZ_ASSIGN_OR_RETURN(const int local, localWorkers(role_));
    to.nccl = local <= static_cast<int>(torch::cuda::device_count());
    spdlog::info("on {} of {} GPU(s), {} workers on this machine: the data plane through {}", device_.str(),
                 torch::cuda::device_count(), local, to.nccl ? "NCCL" : "Gloo, staged through host memory");
  }
  if (role_.shared_memory) {
    // A slot holds every bucket of a step, each padded to 64 bytes (NOTE
    // [Shared-memory allreduce]); a worker pinned to a core of its own waits
    // there by spinning (on a shared core it would take the core from the
    // peer it waits for, so it sleeps).
    for (const torch::Tensor& p : stageParameters()) to.shared_memory_bytes += p.nbytes() + 64;
    to.shared_memory_bytes = std::max<Bytes>(to.shared_memory_bytes, 1);
    to.spin = !role_.cpus.empty() && !role_.cpus_shared;
  }
  if (!role_.channel.url.empty()) {
    if (tensor_) return invalidArgument("tensor parallelism needs workers that connect to each other, not a channel");
    // Through the store: no connection to another worker, no rendezvous.
    redis::ChannelOptions co;
    HZ_ASSIGN_OR_RETURN(co.address, redis::parseUrl(role_.channel.url, "the channel"));
    HZ_ASSIGN_OR_RETURN(co.sync, redis::parseSyncMethod(role_.channel.sync, "the channel's sync"));
    co.password = role_.channel.password;
    co.ns = role_.channel.ns;
    co.rank = role_.rank;
    co.world_size = role_.world;
    co.stage = role_.stage;
    co.replica = role_.replica;
    co.replicas = role_.replicas;
    co.timeout = role_.channel.timeout;
    HZ_ASSIGN_OR_RETURN(transport_, redis::connectChannel(co));
  } else {
    HZ_ASSIGN_OR_RETURN(transport_, connectTransport(to));
    if (tensor_) tensor_->attach(transport_->tensorGroup());
  }
  // Buckets as PyTorch DDP sizes them: 1 MB first, 25 MB after (plan/cost/allreduce.h).
  // One sync over every chunk's layers, in order: chunk c's layer i is
  // layer offset_c + i of it.
  // Per weight version (NOTE [Weight versions]; one unless the schedule
  // keeps more), its chunks and its gradient sync.
  std::vector<std::vector<ChunkParts>> versions;
  const size_t numVersions = std::max<size_t>(1, copies_.size());
  for (size_t v = 0; v < numVersions; ++v) {
    const auto& chunks = copies_.empty() ? chunks_ : copies_[v];
    std::vector<std::vector<torch::Tensor>> layerParams;
    std::vector<ChunkParts>& parts = versions.emplace_back();
    for (const auto& chunk : chunks) {
      ChunkParts part;
      part.layers = chunk.get();
      part.syncOffset = static_cast<int>(layerParams.size());
      parts.push_back(std::move(part));
      for (auto& p : chunk->layerParameters()) layerParams.push_back(std::move(p));
    }
    syncs_.push_back(std::make_unique<GradientSync>(transport_.get(), std::move(layerParams), plan::kFirstBucketBytes,
                                                    plan::kBucketBytes, trace_));
  }
  // Schedules that post their receives a window ahead, between passes, post
  // through the channels' threads; GPipe, all at once, on the compute thread
  // (NOTE [Posting transfers on the channel's thread], runtime/comm/pipe.h).
  channels_ = std::make_unique<Channels>(
      *transport_, trace_, [this](int stage, int replica) { return rankOf(stage, replica); },
      schedule_->receiveWindow() > 0 ? Posting::kChannel : Posting::kCaller);
  HZ_RETURN_IF_ERROR(exchangeShapes());
  for (size_t v = 0; v < versions.size(); ++v) {
    for (int c = 0; c < numChunks(); ++c) {
      ChunkParts& part = versions[v][static_cast<size_t>(c)];
      part.sync = syncs_[v].get();
      part.in = inShapes_[static_cast<size_t>(c)];
      part.out = outShapes_[static_cast<size_t>(c)];
    }
  }
  // An asynchronous schedule's drain decision: stage 0's replicas agree.
  std::function<bool(bool)> agree;
  if (firstStage() && role_.replicas > 1) {
    agree = [this](bool drain) {
      torch::Tensor vote = torch::full({1}, drain ? 1.0F : 0.0F, torch::TensorOptions().device(device_));
      transport_->allreduceStage(vote)->wait();
      return vote.cpu().item<float>() > 0;
    };
  }
  executor_ = std::make_unique<StepExecutor>(*schedule_, shape, std::move(versions), *channels_, trainLoader_.get(),
                                             device_, trace_,
                                             [this](std::int64_t step, int from, int to, bool last, double scale) {
                                               applyUpdate(step, from, to, last, scale);
                                             },
                                             std::move(agree));
  if (tensor_ && role_.scatter_gather) executor_->scatterBoundaries(tensor_.get());
  executor_->openChannels();
  for (const cluster::StragglerSpec& x : job.stragglers) {
    if (x.worker == role_.rank && x.mode == "sleep") sleeper_ = &x;
  }
  if (sleeper_) executor_->afterPass([this](double seconds) { straggle(seconds); });
  return buildReassignment();  // its reading thread before the compute thread is pinned
}

void Worker::regroup(std::int64_t global) {
  Regroup g;
  {
    std::lock_guard<std::mutex> lock(stateMu_);
    g = regroup_;
  }
  if (g.generation <= role_.generation) {
    throw std::runtime_error(fmt::format("told to regroup into generation {}, not after this one ({})", g.generation,
                                         role_.generation));
  }
  const auto t0 = Clock::now();
  TraceSpan span(trace_, "regroup", "comm", TraceThread::kCompute, {{"step", global}});
  // What refers to the old group goes, users first.
  executor_.reset();
  reassigning_.reset();
  reassigner_.reset();
  channels_.reset();
  syncs_.clear();
  transport_.reset();
  trainLoader_.reset();
  testLoader_.reset();
  const int before = role_.replicas;
  role_.generation = g.generation;
  role_.replicas = role_.world = g.replicas;
  role_.rank = role_.replica;
  role_.microbatches = g.microbatches;
  const bool wasIdle = idle();
  role_.idle_replicas = g.idle_replicas;
  // The threads connect() starts are helpers: not on the compute thread's
  // core, with short slices (as in build()).
  if (!role_.cpus.empty()) (void)runThreadOn(helperCpus_);
  if (helperSlice_.count() > 0) (void)setThreadSlice(helperSlice_);
  Status s = connect();
  if (s.ok() && g.joiners > 0) s = shareState(0, global);
  pinComputeThread();
  setThreadSlice(std::chrono::microseconds(0));
  if (!s.ok()) throw std::runtime_error(fmt::format("regrouping at step {}: {}", global, s.message()));
  regroupAt_ = -1;
  spdlog::info("regrouped before step {}: replica {} of {} (was {}), {} microbatches a step, generation {}, "
               "in {:.3f} s",
               global, role_.replica, role_.replicas, before, idle() ? 0 : role_.microbatches, role_.generation,
               since(t0));
  if (idle() != wasIdle) logIdle();
}

// FlexRR among the replicas of a one-stage job (the coordinator refuses
// it for anything else: NOTE [Where FlexRR reassigns]). Its messages go through two
// connections of their own to the coordinator's store: one for sends and
// claims, one for the inbox's long waits.
Status Worker::buildReassignment() {
  const cluster::FlexrrSpec& f = role_.job.flexrr;
  if (!f.enabled || role_.replicas < 2) return Status();
  if (role_.stages != 1 || numChunks() != 1 || role_.tensor_parallel != 1 || schedule_->asynchronous() ||
      !role_.channel.url.empty() || !role_.stage_replicas.empty() || !trainLoader_) {
    return invalidArgument("flexrr reassigns the microbatches of data-parallel replicas of one stage, one chunk, "
                           "a flushing schedule, over workers connected to each other");
  }
  const auto timeout = std::chrono::milliseconds(120000);
  HZ_ASSIGN_OR_RETURN(auto store, ControlStore::connect(args_.join, fmt::format("w{}.flexrr", args_.id), args_.token,
                                                        timeout));
  HZ_ASSIGN_OR_RETURN(auto inbox, ControlStore::connect(args_.join, fmt::format("w{}.inbox", args_.id), args_.token,
                                                        std::chrono::milliseconds(1000)));
  ReassignOptions o;
  o.helper_group = f.helper_group;
  o.report_at = f.report_at;
  o.threshold = f.threshold;
  o.initial = f.initial;
  o.follow_up = f.follow_up;
  reassigner_ = std::make_unique<Reassigner>(store, inbox, fmt::format("gen{}/flexrr/", role_.generation),
                                             role_.replica, role_.replicas, o);
  reassigning_ = std::make_unique<ReassigningStep>(
      *chunks_.front(), *syncs_.front(), *trainLoader_, *reassigner_, device_, trace_,
      [this](std::int64_t step, int from, int to, bool last, double scale) { applyUpdate(step, from, to, last, scale); });
  if (sleeper_) reassigning_->afterPass([this](double seconds) { straggle(seconds); });
  spdlog::info("flexrr: helpers {}, helpees {} (report at {:.0f}%, threshold {:.0f}%)",
               fmt::join(helpersOf(role_.replica, role_.replicas, o.helper_group), ","),
               fmt::join(helpeesOf(role_.replica, role_.replicas, o.helper_group), ","), 100 * o.report_at,
               100 * o.threshold);
  return Status();
}

Status Worker::buildWeightVersions(int versions) {
  const cluster::JobSpec& job = role_.job;
  const PipelineShape shape = pipelineShape();
  for (int v = 0; v < versions; ++v) {
    auto& copy = copies_.emplace_back();
    for (int c = 0; c < numChunks(); ++c) {
      const auto [first, last] = role_.layer_ranges[static_cast<size_t>(c)];
      HZ_ASSIGN_OR_RETURN(model::Model m,
                          model::buildModel({job.model, job.model_options}, {job.seed, first, last, tensor_}));
      if (device_.is_cuda()) m.to(device_);
      // One set of buffers (BatchNorm's statistics): the latest weights'.
      const model::Model& latest = chunks_[static_cast<size_t>(c)]->model();
      for (size_t l = 0; l < m.layers.size(); ++l) {
        const std::vector<torch::Tensor> shared = latest.layers[l].module->buffers();
        std::vector<torch::Tensor> own = m.layers[l].module->buffers();
        for (size_t b = 0; b < own.size(); ++b) own[b].set_data(shared.at(b));
      }
      copy.push_back(std::make_unique<StageExecutor>(std::move(m), shape.lastVirtual(c), job.seed, trace_));
      copy.back()->setRecompute(role_.recompute);
      copy.back()->setPrecision(precision_, device_.type());
    }
  }
  return Status();
}

// Each stage learns the per-sample shape and type of what each of its chunks
// receives, and tells the next virtual stage what it sends, by running one
// sample through the chunk.
Status Worker::exchangeShapes() {
  const PipelineShape shape = pipelineShape();
  for (int c = 0; c < numChunks(); ++c) {
    const auto at = static_cast<size_t>(c);
    SampleShape& inShape = inShapes_[at];
    SampleShape& outShape = outShapes_[at];
    const int v = shape.virtualStage(c);
    if (shape.firstVirtual(c)) {
      const model::InputSpec& in = chunks_[at]->model().input;
      inShape.dims = in.shape;
      inShape.dtype = in.kind == model::InputKind::kTokens ? torch::kLong : torch::kFloat;
    } else {
      const int from = (v - 1) % role_.stages;
      const int tag = shapeTag(edgeChunk(v - 1, role_.stages));
      torch::Tensor header = torch::zeros({kShapeSlots}, torch::TensorOptions(torch::kLong).device(device_));
      Inbound& fromPrev = channels_->in(from, speaker(shape, from), Payload::kActivation);
      fromPrev.expect(tag, tag, header, "shape");
      header = fromPrev.take(tag).cpu();
      const auto* h = header.data_ptr<std::int64_t>();
      // The peer is checked like any input before anything is allocated from it:
      // a known type, a rank that fits the header, every dimension positive, and
      // one microbatch no larger than this machine's memory.
      if (h[0] < 0 || h[0] >= static_cast<std::int64_t>(std::size(kBoundaryTypes))) {
        return internalError(fmt::format("stage {} sent an unknown tensor type {} for its output", from, h[0]));
      }
      const torch::ScalarType type = kBoundaryTypes[h[0]];
      if (h[1] < 1 || h[1] > kShapeSlots - 2) {
        return internalError(
            fmt::format("stage {} sent a tensor rank of {}; expected 1 to {}", from, h[1], kShapeSlots - 2));
      }
      const std::int64_t elementBytes = static_cast<std::int64_t>(c10::elementSize(type));
      std::int64_t bytes = saturatingMul(elementBytes, role_.microbatch_size);
      for (std::int64_t i = 0; i < h[1]; ++i) {
        if (h[2 + i] < 1) {
          return internalError(fmt::format("stage {} sent dimension {} of its output as {}; expected at least 1",
                                           from, i, h[2 + i]));
        }
        bytes = saturatingMul(bytes, h[2 + i]);
      }
      const std::int64_t physical = static_cast<std::int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGE_SIZE);
      if (bytes > std::max<std::int64_t>(physical, kGiB)) {
        return internalError(fmt::format("stage {} sent an output shape whose microbatch of {} needs more than {}, "
                                         "more than this machine's memory",
                                         from, role_.microbatch_size, formatBytes(bytes)));
      }
      inShape.dtype = type;
      inShape.dims.assign(h + 2, h + 2 + h[1]);
    }
    const torch::Tensor probe =
        torch::zeros(inShape.buffer(1).sizes(), torch::TensorOptions(inShape.dtype).device(device_));
    const torch::Tensor out = chunks_[at]->evaluate(probe);
    outShape.dims.assign(out.sizes().begin() + 1, out.sizes().end());
    outShape.dtype = out.scalar_type();
    if (!shape.lastVirtual(c)) {
      if (outShape.dims.size() + 2 > kShapeSlots) return internalError("tensor rank too high to exchange");
      if (boundaryTypeCode(outShape.dtype) < 0) {
        return internalError(fmt::format("a stage's output of type {} cannot cross to the next stage",
                                         c10::toString(outShape.dtype)));
      }
      torch::Tensor header = torch::zeros({kShapeSlots}, torch::kLong);
      auto* h = header.data_ptr<std::int64_t>();
      h[0] = boundaryTypeCode(outShape.dtype);
      h[1] = static_cast<std::int64_t>(outShape.dims.size());
      for (size_t i = 0; i < outShape.dims.size(); ++i) h[2 + i] = outShape.dims[i];
      const int tag = shapeTag(edgeChunk(v, role_.stages));
      const int to = (v + 1) % role_.stages;
      for (int j : listeners(shape, to)) {
        Outbound& toNext = channels_->out(to, j, Payload::kActivation);
        toNext.send(tag, header.to(device_), "shape");
        toNext.flush();
      }
    }
  }
  return Status();
}

// NOTE [State for joiners]
// Workers that join a running group at a regroup (NOTE [Regrouping at a step
// boundary], cluster/regroup.cc) need the group's state at that step:
// parameters, optimizer state and buffers, as a save holds them. Rather
// than a save of the old group shipped to the coordinator and fetched back
// from it (most of a return's 1.5 s on the tiers test), replica `from` of
// the new group serializes its own (checkpoint.h saveStageBytes) and
// broadcasts it over the group right after the rendezvous: its size, then
// the bytes. The joiners load it; the replicas that ran on take part in
// the broadcast and keep their own, which equals it but for the buffers
// (BatchNorm's running statistics, each replica's own as in any step; the
// joiners start from replica `from`'s). The size is bounded before the
// buffer for the bytes is allocated: at most what this stage's tensors
// take four times over (parameters, two optimizer moments, one spare) and
// a megabyte per tensor of archive.
Status Worker::shareState(int from, std::int64_t step) {
  torch::NoGradGuard guard;
  TraceSpan span(trace_, "state", "comm", TraceThread::kCompute);
  const auto t0 = Clock::now();
  Bytes bound = 16 << 20;
  for (const torch::Tensor& p : stageParameters()) bound += 4 * static_cast<Bytes>(p.nbytes()) + (1 << 20);
  for (const torch::Tensor& b : stageBuffers()) bound += static_cast<Bytes>(b.nbytes()) + (1 << 20);
  Bytes total = 0;
  for (const auto& chunk : chunks_) {
    std::string bytes;
    torch::Tensor size = torch::zeros({1}, torch::kLong);
    if (role_.replica == from) {
      HZ_ASSIGN_OR_RETURN(bytes, saveStageBytes(chunk->model(), *optimizer_, lossScale_ ? &*lossScale_ : nullptr));
      size[0] = static_cast<std::int64_t>(bytes.size());
    }
    auto work = transport_->broadcast(size, from);
    if (!work) return invalidArgument("this transport cannot send the state to workers that join");
    work->wait();
    const std::int64_t n = size.item<std::int64_t>();
    if (n <= 0 || n > bound) {
      return parseError(fmt::format("replica {} announced {} of state where this stage's takes at most {}", from,
                                  formatBytes(n), formatBytes(bound)));
    }
    torch::Tensor data = role_.replica == from ? torch::from_blob(bytes.data(), {n}, torch::kUInt8)
                                                : torch::empty({n}, torch::kUInt8);
    transport_->broadcast(data, from)->wait();
    if (role_.state_from == from) {
      HZ_RETURN_IF_ERROR(loadStageBytes(static_cast<const char*>(data.data_ptr()), static_cast<size_t>(n),
                                        fmt::format("the state from replica {}", from), chunk->model(), *optimizer_,
                                        lossScale_ ? &*lossScale_ : nullptr));
    }
    total += n;
  }
  spdlog::info("{} the state (at step {}, {}) {} replica {} in {:.3f} s",
               role_.replica == from ? "sent" : role_.state_from == from ? "took" : "passed on",
               step, formatBytes(total), role_.replica == from ? "as" : "from", from, since(t0));
  return Status();
}

}  // namespace hydrozoa::runtime
