#include "runtime/worker.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "cluster/job_spec.h"
#include "core/allocator.h"
#include "core/cpus.h"
#include "core/memory.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "model/model.h"
#include "plan/cost/allreduce.h"
#include "runtime/checkpoint.h"
#include "runtime/comm/pipe.h"
#include "runtime/grad_sync.h"
#include "runtime/optimizer.h"
#include "runtime/schedule/schedule.h"
#include "runtime/stage.h"
#include "runtime/trace.h"
#include "wire/control.h"
#include "wire/file_transfer.h"

namespace hydrozoa::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Tags of the point-to-point messages: activations and gradients of each
// microbatch of a training step, evaluation activations, and the start-up
// shape exchange. Messages with equal (peer, tag) arrive in order.
int activationTag(int mb) { return 2 * mb; }
int gradientTag(int mb) { return 2 * mb + 1; }
int evalTag(int mb) { return 1 << 20 | mb; }
constexpr int kShapeTag = (1 << 21);
constexpr int kShapeSlots = 16;

// What the coordinator assigns (the "assign" message).
struct Role {
  int generation = 0, rank = 0, world = 1;
  int replica = 0, replicas = 1, stage = 0, stages = 1;
  int first_layer = 0, last_layer = 0;
  std::int64_t microbatch_size = 1, microbatches = 1;
  std::int64_t train_size = 0, test_size = 0;
  std::int64_t start_step = 0;  // global step to start from
  std::int64_t total_steps = 0;  // the job's (the LR schedule runs over these)
  std::int64_t stop_step = 0;    // where this run stops
  // This generation's epochs (cluster/scaling/epochs.h): epoch first_epoch
  // begins at global step epoch_start_step, each has the sampler's steps at
  // global_batch; the learning rate is the schedule's times lr_factor.
  std::int64_t epoch_start_step = 0, first_epoch = 0, global_batch = 0;
  double lr_factor = 1;
  bool hold_at_epoch_end = false;  // NOTE [Holding at an epoch's end]
  bool shared_memory = false;      // the stage's replicas share this host (NOTE [Shared-memory allreduce])
  std::string listen_host, trace_path, checkpoint, schedule = "gpipe";
  // Where checkpoints go: a directory this worker reaches (output.checkpoint_dir,
  // a shared filesystem), or "" : shipped to the coordinator (wire/file_transfer.h).
  std::string checkpoint_root;
  std::vector<int> cpus;  // cores for the compute thread; empty: any
  bool cpus_shared = false;  // other workers' compute threads run on them too (NOTE [Cores for compute threads])
  cluster::JobSpec job;
};

Result<Role> parseRole(const Json& a) {
  Role r;
  ObjectReader o(a, "assign");
  r.generation = static_cast<int>(o.integer("generation", 0, 1 << 30));
  r.rank = static_cast<int>(o.integer("rank", 0, kWorkersRange.max - 1));
  r.world = static_cast<int>(o.integer("world_size", 1, kWorkersRange.max));
  r.replica = static_cast<int>(o.integer("replica", 0, kWorkersRange.max - 1));
  r.replicas = static_cast<int>(o.integer("replicas", 1, kWorkersRange.max));
  r.stage = static_cast<int>(o.integer("stage", 0, kWorkersRange.max - 1));
  r.stages = static_cast<int>(o.integer("stages", 1, kWorkersRange.max));
  r.first_layer = static_cast<int>(o.integer("first_layer", 0, kLayersRange.max));
  r.last_layer = static_cast<int>(o.integer("last_layer", 0, kLayersRange.max));
  r.microbatch_size = o.integer("microbatch_size", 1, kSamplesRange.max);
  r.microbatches = o.integer("microbatches", 1, kMicrobatchesRange.max);
  r.train_size = o.integer("train_size", 1, kSamplesRange.max);
  r.test_size = o.integer("test_size", 0, kSamplesRange.max);
  r.start_step = o.integer("start_step", 0, kStepsRange.max);
  r.total_steps = o.integer("total_steps", 0, kStepsRange.max);
  r.stop_step = o.integer("stop_step", 0, kStepsRange.max);
  r.epoch_start_step = o.integer("epoch_start_step", 0, kStepsRange.max);
  r.first_epoch = o.integer("first_epoch", 0, kStepsRange.max);
  r.global_batch = o.integer("global_batch", 1, kSamplesRange.max);
  r.lr_factor = o.positive("lr_factor");
  r.hold_at_epoch_end = o.boolean("hold_at_epoch_end");
  r.shared_memory = o.boolean("shared_memory");
  r.listen_host = o.string("listen_host");
  r.checkpoint_root = o.string("checkpoint_root");
  r.trace_path = o.string("trace_path");
  r.checkpoint = o.optString("checkpoint").value_or("");
  r.schedule = o.optString("schedule").value_or("gpipe");
  if (const Json* cpus = o.raw("cpus"); cpus && cpus->is_array()) {
    for (const auto& c : *cpus) r.cpus.push_back(c.get<int>());
  }
  r.cpus_shared = o.boolean("cpus_shared");
  const Json& job = o.object("job");
  HZ_RETURN_IF_ERROR(o.status());
  HZ_ASSIGN_OR_RETURN(r.job, cluster::parseJobSpec(job, "assign.job"));
  return r;
}

// A per-sample shape and element type, as exchanged between stages.
struct SampleShape {
  std::vector<std::int64_t> dims;
  torch::ScalarType dtype = torch::kFloat;
  torch::Device device = torch::kCPU;
  torch::Tensor buffer(std::int64_t n) const {
    std::vector<std::int64_t> s = {n};
    s.insert(s.end(), dims.begin(), dims.end());
    return torch::empty(s, torch::TensorOptions().dtype(dtype).device(device));
  }
};

// Thrown on the compute thread once the coordinator halts the generation
// (it lost a worker and is recovering).
struct Halted : std::runtime_error {
  Halted() : std::runtime_error("halted: the job lost a worker and is recovering") {}
};

class Worker {
 public:
  explicit Worker(const WorkerArgs& args) : args_(args) {}
  int run();

 private:
  Status join();
  Status build();
  Status exchangeShapes();
  void train();
  void iteration(std::int64_t epoch, std::int64_t stepInEpoch, std::int64_t globalStep);
  void evaluate(std::int64_t epoch);
  void synchronizeBuffers();
  void checkpoint(std::int64_t globalStep);
  // False when told to stop there (NOTE [Holding at an epoch's end]).
  bool holdAtEpochEnd(std::int64_t global);
  // False once told to stop (at this step or now).
  bool pollControl();
  // NOTE [The control thread]
  // Once training starts, one thread owns the control socket: it sends what
  // the compute thread posts, the heartbeats, and answers the coordinator:
  // stop and checkpoint requests, "done_ack", and during a recovery "halt"
  // (stop before the next optimizer step and say how many steps are done)
  // and "save" (write this stage's state at that step from here, since the
  // compute thread may be blocked on a peer that is gone).
  void controlLoop();
  void onControl(const Json& m);
  void post(Json message);
  void report(const std::string& kind, const std::string& message);
  // Where this worker writes a step's files: the shared checkpoint
  // directory's step-N.partial/, or (shipped) a fresh private directory on
  // its own host, gone once shipped.
  Result<std::string> checkpointDir(std::int64_t globalStep) const;
  bool shipsCheckpoints() const { return role_.checkpoint_root.empty(); }
  // A saved step's files to the coordinator (when `saved` is OK), then gone
  // from here either way (shipped mode).
  Status shipCheckpoint(std::int64_t globalStep, const std::string& dir, Status saved);
  // The assigned checkpoint's files of this stage, fetched from the
  // coordinator into a fresh private directory (the caller removes it).
  Result<std::string> fetchCheckpoint();

  bool firstStage() const { return role_.stage == 0; }
  bool lastStage() const { return role_.stage == role_.stages - 1; }
  int prevRank() const { return role_.rank - 1; }
  int nextRank() const { return role_.rank + 1; }
  std::vector<std::int64_t> microbatchSizes(const data::EpochSampler& sampler, std::int64_t step) const;

  WorkerArgs args_;
  Role role_;
  std::unique_ptr<wire::ControlClient> control_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<StageExecutor> stage_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<GradientSync> sync_;
  std::unique_ptr<Schedule> schedule_;
  std::optional<data::EpochSampler> trainSampler_, testSampler_;
  // NOTE [Recording sample ids]
  // With $HYDROZOA_RECORD_SAMPLES set, stage 0 appends "global_step epoch
  // replica id id ..." per step to <trace_path>.samples: tests check with it
  // that every sample is used once per epoch, across changes of replicas.
  std::unique_ptr<std::ofstream> sampleLog_;
  std::int64_t sampleEpoch_ = -1;
  std::vector<std::int64_t> samplePermutation_;
  void recordSamples(std::int64_t epoch, std::int64_t stepInEpoch, std::int64_t globalStep);
  std::unique_ptr<data::PrefetchLoader> trainLoader_, testLoader_;
  std::unique_ptr<Inbound> fromPrev_, fromNext_;
  std::unique_ptr<Outbound> toNext_, toPrev_;
  SampleShape inShape_, outShape_;
  torch::Device device_ = torch::kCPU;
  TraceRecorder trace_{true};
  std::atomic<std::int64_t> currentStep_{0};
  std::thread controlThread_;
  std::vector<int> helperCpus_ = usableCpus();  // the process's cores, for threads started after pinning
  std::atomic<bool> controlRunning_{false}, stopControl_{false}, doneAcked_{false};
  std::mutex outMu_;
  std::deque<Json> outbox_;  // posted by the compute thread, sent by the control thread
  // The optimizer step vs. a save from the control thread: under stateMu_,
  // completedStep_ counts the global steps whose update is applied, and
  // once halted_ no further update is.
  std::mutex stateMu_;
  std::int64_t completedStep_ = 0;
  bool halted_ = false;
  // NOTE [The step before]
  // Replicas of a stage update in lockstep, but stages do not: when a worker
  // is lost, a stage whose allreduce did not involve it may complete one
  // step more than the lost worker's stage. So that the survivors still
  // share a step, each worker of a replicated pipeline keeps its stage's
  // state from before its last update (a copy per step of the parameters,
  // optimizer state and buffers; memory for one more copy of them).
  struct Snapshot {
    std::int64_t step = -1;
    std::vector<torch::Tensor> params, buffers;
    std::vector<ParamState> optim;
  };
  Snapshot before_;
  bool keepSnapshots_ = false;
  void snapshot();             // under stateMu_, before an update
  std::vector<torch::Tensor> stageBuffers() const;
  Status saveSnapshot(const std::string& dir);  // under stateMu_, halted
  std::atomic<bool> haltSeen_{false};
  std::atomic<std::int64_t> checkpointAt_{-1};  // on-request checkpoint after this global step
  std::atomic<std::int64_t> stopAt_{-1};        // stop before this global step (all workers alike)
  std::atomic<std::int64_t> continueAt_{-1};    // go on past the epoch end at this global step
  std::atomic<bool> stopCheckpoint_{false};     // and checkpoint there first
  bool stopRequested_ = false;
};

std::vector<std::int64_t> Worker::microbatchSizes(const data::EpochSampler& sampler, std::int64_t step) const {
  std::vector<std::int64_t> sizes;
  const int n = sampler.microbatches(step, role_.replica);
  for (int mb = 0; mb < n; ++mb) sizes.push_back(sampler.microbatchSize(step, role_.replica, mb));
  return sizes;
}

Status Worker::join() {
  HZ_ASSIGN_OR_RETURN(control_, wire::ControlClient::connect(args_.join, fmt::format("w{}", args_.id), args_.token));
  control_->send({{"type", "register"}, {"worker", args_.id}, {"pid", ::getpid()}});
  Json assign;
  const auto t0 = Clock::now();
  while (true) {
    if (control_->receive(&assign, 1000)) {
      if (assign.value("type", "") == "assign") break;
      if (assign.value("type", "") == "stop") return unavailable("stopped before being assigned a role");
    }
    if (since(t0) > 300) return unavailable("no role from the coordinator within 300 s");
  }
  HZ_ASSIGN_OR_RETURN(role_, parseRole(assign));
  if (role_.listen_host.empty()) {
    // Started where the coordinator could not know this host's address
    // (a Slurm step): listen where the route to the coordinator leaves.
    HZ_ASSIGN_OR_RETURN(role_.listen_host, wire::localAddressToward(args_.join));
  }
  spdlog::info("replica {} stage {} of {}x{}, at {}", role_.replica, role_.stage, role_.replicas, role_.stages,
               role_.listen_host);
  return Status();
}

Status Worker::build() {
  const cluster::JobSpec& job = role_.job;
  torch::set_num_threads(job.threads);
  HZ_ASSIGN_OR_RETURN(auto schedule, makeSchedule(role_.schedule));
  schedule_ = std::move(schedule);
  HZ_ASSIGN_OR_RETURN(model::Model m,
                      model::buildModel({job.model, job.model_options}, {job.seed, role_.first_layer, role_.last_layer}));
  const model::InputSpec input = m.input;
  const model::TaskSpec task = m.task;
  // NOTE [Devices]: "auto" takes a GPU when this libtorch has CUDA and the
  // host has one; workers on one host share its GPUs round-robin by rank.
  if (job.device == "cuda" || (job.device == "auto" && torch::cuda::is_available())) {
    if (!torch::cuda::is_available()) {
      return invalidArgument("training.device is cuda but no CUDA device is usable here (Debian's libtorch is CPU-only)");
    }
    device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(role_.rank % torch::cuda::device_count()));
    m.to(device_);
  }
  inShape_.device = outShape_.device = device_;
  stage_ = std::make_unique<StageExecutor>(std::move(m), lastStage(), job.seed, trace_);
  optimizer_ = makeOptimizer(job.optimizer, stage_->model().parameters());
  if (!role_.checkpoint.empty()) {
    std::string dir = role_.checkpoint;
    if (shipsCheckpoints()) {
      HZ_ASSIGN_OR_RETURN(dir, fetchCheckpoint());
    }
    const Status loaded = loadStage(dir, stage_->model(), *optimizer_);
    std::error_code ec;
    if (shipsCheckpoints()) std::filesystem::remove_all(dir, ec);
    HZ_RETURN_IF_ERROR(loaded);
  }

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
  trainSampler_.emplace(so);
  if (const char* record = std::getenv("HYDROZOA_RECORD_SAMPLES"); record && *record && firstStage()) {
    sampleLog_ = std::make_unique<std::ofstream>(role_.trace_path + ".samples", std::ios::app);
  }
  if (job.eval && role_.test_size > 0) {
    so.dataset_size = role_.test_size;
    so.shuffle = false;
    so.drop_last = false;
    testSampler_.emplace(so);
  }
  if (firstStage() || lastStage()) {
    data::DataSpec ds;
    ds.kind = job.dataset;
    ds.path = job.data_path;
    ds.seq_len = input.kind == model::InputKind::kTokens ? input.shape.at(0) : 0;
    ds.synthetic_train = job.synthetic_train;
    ds.synthetic_test = job.synthetic_test;
    ds.synthetic_input = input;
    ds.synthetic_task = task;
    ds.seed = job.seed;
    const int depth = static_cast<int>(2 * role_.microbatches);
    HZ_ASSIGN_OR_RETURN(auto train, data::openDataset(ds, data::Split::kTrain));
    trainLoader_ = std::make_unique<data::PrefetchLoader>(train, *trainSampler_, role_.replica, depth);
    if (testSampler_) {
      HZ_ASSIGN_OR_RETURN(auto test, data::openDataset(ds, data::Split::kTest));
      testLoader_ = std::make_unique<data::PrefetchLoader>(test, *testSampler_, role_.replica, depth);
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
  to.cuda = device_.is_cuda();  // NCCL on GPUs, Gloo on CPUs
  if (role_.shared_memory) {
    // A slot holds every bucket of a step, each padded to 64 bytes (NOTE
    // [Shared-memory allreduce]); a worker pinned to a core of its own waits
    // there by spinning (on a shared core it would take the core from the
    // peer it waits for, so it sleeps).
    for (const torch::Tensor& p : stage_->model().parameters()) to.shared_memory_bytes += p.nbytes() + 64;
    to.shared_memory_bytes = std::max<Bytes>(to.shared_memory_bytes, 1);
    to.spin = !role_.cpus.empty() && !role_.cpus_shared;
  }
  HZ_ASSIGN_OR_RETURN(transport_, connectTransport(to));
  // Buckets as PyTorch DDP sizes them: 1 MB first, 25 MB after (plan/cost/allreduce.h).
  sync_ = std::make_unique<GradientSync>(transport_.get(), stage_->layerParameters(), plan::kFirstBucketBytes,
                                         plan::kBucketBytes, trace_);
  if (!firstStage()) {
    fromPrev_ = std::make_unique<Inbound>(*transport_, prevRank(), trace_, "activation");
    toPrev_ = std::make_unique<Outbound>(*transport_, prevRank(), trace_, "gradient");
  }
  if (!lastStage()) {
    fromNext_ = std::make_unique<Inbound>(*transport_, nextRank(), trace_, "gradient");
    toNext_ = std::make_unique<Outbound>(*transport_, nextRank(), trace_, "activation");
  }
  HZ_RETURN_IF_ERROR(exchangeShapes());
  // NOTE [Cores for compute threads]: with a core of its own, the compute
  // thread is never queued behind its neighbour's; the helper threads
  // (transfers, data, heartbeats) stay free to run on any of the process's
  // cores. Those started above inherit that; those started later (the
  // loaders' producers, built above, and the control thread) would inherit
  // the compute thread's core, and so are put back on helperCpus_: with the
  // loader sharing the compute core, a ResNet-18 1x1 step took 400 ms where
  // its profile said 273 ms, while the other core sat idle.
  if (!role_.cpus.empty()) {
    if (!runThreadOn(role_.cpus)) {
      spdlog::warn("could not pin the compute thread to cores {}: {}", fmt::join(role_.cpus, ","), std::strerror(errno));
    } else {
      spdlog::info("compute thread pinned to core{} {}", role_.cpus.size() == 1 ? "" : "s", fmt::join(role_.cpus, ","));
    }
  }
  return Status();
}

// Each stage learns the per-sample shape and type of what it receives, and
// tells the next stage what it sends, by running one sample through itself.
Status Worker::exchangeShapes() {
  if (firstStage()) {
    const model::InputSpec& in = stage_->model().input;
    inShape_.dims = in.shape;
    inShape_.dtype = in.kind == model::InputKind::kTokens ? torch::kLong : torch::kFloat;
  } else {
    torch::Tensor header = torch::zeros({kShapeSlots}, torch::TensorOptions(torch::kLong).device(device_));
    fromPrev_->expect(kShapeTag, kShapeTag, header, "shape");
    header = fromPrev_->take(kShapeTag).cpu();
    const auto* h = header.data_ptr<std::int64_t>();
    // The peer is checked like any input before anything is allocated from it:
    // a known type, a rank that fits the header, every dimension positive, and
    // one microbatch no larger than this machine's memory.
    if (h[0] != 0 && h[0] != 1) {
      return internalError(fmt::format("stage {} sent an unknown tensor type {} for its output", role_.stage - 1, h[0]));
    }
    if (h[1] < 1 || h[1] > kShapeSlots - 2) {
      return internalError(fmt::format("stage {} sent a tensor rank of {}; expected 1 to {}", role_.stage - 1, h[1],
                                       kShapeSlots - 2));
    }
    const std::int64_t elementBytes = h[0] == 1 ? 8 : 4;
    std::int64_t bytes = saturatingMul(elementBytes, role_.microbatch_size);
    for (std::int64_t i = 0; i < h[1]; ++i) {
      if (h[2 + i] < 1) {
        return internalError(fmt::format("stage {} sent dimension {} of its output as {}; expected at least 1",
                                         role_.stage - 1, i, h[2 + i]));
      }
      bytes = saturatingMul(bytes, h[2 + i]);
    }
    const std::int64_t physical = static_cast<std::int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGE_SIZE);
    if (bytes > std::max<std::int64_t>(physical, kGiB)) {
      return internalError(fmt::format("stage {} sent an output shape whose microbatch of {} needs more than {}, "
                                       "more than this machine's memory",
                                       role_.stage - 1, role_.microbatch_size, formatBytes(bytes)));
    }
    inShape_.dtype = h[0] == 1 ? torch::kLong : torch::kFloat;
    inShape_.dims.assign(h + 2, h + 2 + h[1]);
  }
  const torch::Tensor probe = torch::zeros(inShape_.buffer(1).sizes(),
                                           torch::TensorOptions(inShape_.dtype).device(device_));
  const torch::Tensor out = stage_->evaluate(probe);
  outShape_.dims.assign(out.sizes().begin() + 1, out.sizes().end());
  outShape_.dtype = out.scalar_type();
  if (!lastStage()) {
    if (outShape_.dims.size() + 2 > kShapeSlots) return internalError("tensor rank too high to exchange");
    torch::Tensor header = torch::zeros({kShapeSlots}, torch::kLong);
    auto* h = header.data_ptr<std::int64_t>();
    h[0] = outShape_.dtype == torch::kLong ? 1 : 0;
    h[1] = static_cast<std::int64_t>(outShape_.dims.size());
    for (size_t i = 0; i < outShape_.dims.size(); ++i) h[2 + i] = outShape_.dims[i];
    toNext_->send(kShapeTag, header.to(device_), "shape");
    toNext_->flush();
  }
  return Status();
}

void Worker::controlLoop() {
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(role_.job.heartbeat_interval));
  auto nextBeat = Clock::now();
  auto flush = [this] {
    std::deque<Json> out;
    {
      std::lock_guard<std::mutex> lock(outMu_);
      out.swap(outbox_);
    }
    for (Json& m : out) control_->send(std::move(m));
  };
  while (!stopControl_) {
    flush();
    if (Clock::now() >= nextBeat) {
      control_->send({{"type", "heartbeat"}, {"step", currentStep_.load()}, {"peak_memory", peakResidentBytes()}});
      nextBeat = Clock::now() + interval;
    }
    // Sleeps until a message comes, post() or the end wakes it, or the next
    // heartbeat is due (at most 50 ms): polling every few milliseconds cost
    // two busy workers a wake-up each per 5 ms on cores they compute on.
    const auto untilBeat = std::chrono::duration_cast<std::chrono::milliseconds>(nextBeat - Clock::now()).count();
    Json m;
    if (control_->receive(&m, static_cast<int>(std::clamp<std::int64_t>(untilBeat, 0, 50)))) onControl(m);
  }
  flush();
}

void Worker::onControl(const Json& m) {
  const std::string type = m.value("type", "");
  if (type == "stop") {
    // A stop at a given step lets every worker finish the same steps (a
    // clean, resumable stop); without one, stop now.
    stopCheckpoint_ = m.value("checkpoint", false);
    stopAt_ = m.value("at_step", std::int64_t{0});
  } else if (type == "checkpoint") {
    checkpointAt_ = m.value("step", std::int64_t{-1});
  } else if (type == "continue") {
    continueAt_ = m.value("step", std::int64_t{-1});
  } else if (type == "done_ack") {
    doneAcked_ = true;
  } else if (type == "halt") {
    std::int64_t completed = 0;
    Json steps = Json::array();
    {
      std::lock_guard<std::mutex> lock(stateMu_);
      halted_ = true;
      completed = completedStep_;
      steps.push_back(completed);
      if (before_.step >= 0 && before_.step == completed - 1) steps.push_back(before_.step);
    }
    haltSeen_ = true;
    control_->send({{"type", "halted"}, {"completed", completed}, {"can_save", steps}, {"stage", role_.stage}});
  } else if (type == "save") {
    const std::int64_t step = m.value("step", std::int64_t{-1});
    std::string problem;
    {
      std::lock_guard<std::mutex> lock(stateMu_);
      if (!halted_ || (completedStep_ != step && before_.step != step)) {
        problem = fmt::format("asked to save step {} but this worker has done {}", step, completedStep_);
      } else if (auto dir = checkpointDir(step); !dir.ok()) {
        problem = dir.status().message();
      } else {
        Status s = completedStep_ == step ? saveStage(*dir, stage_->model(), *optimizer_) : saveSnapshot(*dir);
        if (shipsCheckpoints()) s = shipCheckpoint(step, *dir, s);
        if (!s.ok()) problem = s.message();
      }
    }
    if (problem.empty()) {
      control_->send({{"type", "checkpoint"}, {"step", step}, {"stage", role_.stage}});
    } else {
      control_->send({{"type", "save_failed"}, {"step", step}, {"message", problem}});
    }
  }
}

void Worker::post(Json message) {
  if (!controlRunning_) {
    control_->send(std::move(message));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(outMu_);
    outbox_.push_back(std::move(message));
  }
  control_->wake();
}

std::vector<torch::Tensor> Worker::stageBuffers() const {
  std::vector<torch::Tensor> out;
  for (const auto& layer : stage_->model().layers) {
    for (const auto& b : layer.module->buffers()) out.push_back(b);
  }
  return out;
}

void Worker::snapshot() {
  torch::NoGradGuard guard;
  const std::vector<torch::Tensor> params = stage_->model().parameters();
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
}

// The worker is halted and ends after this: its live state is overwritten
// with the step before, then saved the usual way.
Status Worker::saveSnapshot(const std::string& dir) {
  torch::NoGradGuard guard;
  std::vector<torch::Tensor> params = stage_->model().parameters();
  std::vector<torch::Tensor> buffers = stageBuffers();
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].copy_(before_.params[i]);
    optimizer_->state().erase(c10::guts::to_string(params[i].unsafeGetTensorImpl()));
    setOptimizerStateOf(*optimizer_, params[i], before_.optim[i]);
  }
  for (size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(before_.buffers[i]);
  completedStep_ = before_.step;
  return saveStage(dir, stage_->model(), *optimizer_);
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

Status Worker::shipCheckpoint(std::int64_t globalStep, const std::string& dir, Status saved) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  Status s = std::move(saved);
  for (size_t i = 0; i < files.size() && s.ok(); ++i) {
    s = wire::sendFile(*control_, {{"step", globalStep}, {"stage", role_.stage}}, files[i]);
  }
  std::filesystem::remove_all(dir, ec);
  return s;
}

Result<std::string> Worker::fetchCheckpoint() {
  HZ_ASSIGN_OR_RETURN(const std::string dir, privateDir(args_.id, "restore"));
  const auto t0 = Clock::now();
  for (int layer = role_.first_layer; layer <= role_.last_layer; ++layer) {
    const std::string file = layerFileName(layer);
    if (Status s = wire::fetchFile(*control_, {{"stage", role_.stage}}, file, dir + "/" + file,
                                   [](const Json& m) { return m.value("type", "") != "stop"; });
        !s.ok()) {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      return s;
    }
  }
  spdlog::info("fetched layers {}-{} of {} from the coordinator in {:.2f} s", role_.first_layer, role_.last_layer,
               role_.checkpoint, since(t0));
  return dir;
}

bool Worker::pollControl() {
  if (haltSeen_) throw Halted();
  const std::int64_t at = stopAt_.load();
  return at < 0 || currentStep_.load() < at;
}

void Worker::recordSamples(std::int64_t epoch, std::int64_t stepInEpoch, std::int64_t globalStep) {
  const data::EpochSampler& sampler = *trainSampler_;
  if (sampleEpoch_ != epoch) {
    samplePermutation_ = sampler.permutation(epoch);
    sampleEpoch_ = epoch;
  }
  *sampleLog_ << globalStep << ' ' << epoch << ' ' << role_.replica;
  for (int mb = 0; mb < sampler.microbatches(stepInEpoch, role_.replica); ++mb) {
    for (std::int64_t i : sampler.indicesIn(samplePermutation_, stepInEpoch, role_.replica, mb)) *sampleLog_ << ' ' << i;
  }
  *sampleLog_ << '\n';
  sampleLog_->flush();
}

void Worker::iteration(std::int64_t epoch, std::int64_t stepInEpoch, std::int64_t globalStep) {
  const auto t0 = Clock::now();
  if (sampleLog_) recordSamples(epoch, stepInEpoch, globalStep);
  const data::EpochSampler& sampler = *trainSampler_;
  const std::vector<std::int64_t> sizes = microbatchSizes(sampler, stepInEpoch);
  const int M = static_cast<int>(sizes.size());
  const double stepSamples = static_cast<double>(sampler.stepSamples(stepInEpoch));
  const std::vector<Action> actions = schedule_->actions(role_.stage, role_.stages, M);
  const int finalBackward = lastBackward(actions);
  // Post every receive of the step now, so activations and gradients arrive
  // while this thread computes. The inbound threads complete receives in the
  // order posted, so post them in the order the schedule uses them, which is
  // also the order the neighbour (running the same schedule) sends them.
  for (const Action& act : actions) {
    const int mb = act.microbatch;
    if (act.kind == ActionKind::kForward && fromPrev_) {
      fromPrev_->expect(activationTag(mb), activationTag(mb), inShape_.buffer(sizes[mb]), fmt::format("act mb{}", mb));
    }
    if (act.kind == ActionKind::kBackward && fromNext_) {
      fromNext_->expect(gradientTag(mb), gradientTag(mb), outShape_.buffer(sizes[mb]), fmt::format("grad mb{}", mb));
    }
  }
  std::vector<data::Batch> batches(M);
  double computeSeconds = 0, waitSeconds = 0, lossSum = 0, samples = 0;
  for (size_t a = 0; a < actions.size(); ++a) {
    const Action& act = actions[a];
    const int mb = act.microbatch;
    if (act.kind == ActionKind::kForward) {
      torch::Tensor input;
      if (trainLoader_) {
        const auto w0 = traceNowUs();
        batches[mb] = trainLoader_->next();
        batches[mb].inputs = batches[mb].inputs.to(device_, /*non_blocking=*/true);
        batches[mb].labels = batches[mb].labels.to(device_, /*non_blocking=*/true);
        if (trainLoader_->lastWaitSeconds() > 1e-4) trace_.record("data wait", "data", TraceThread::kData, w0, traceNowUs());
        waitSeconds += trainLoader_->lastWaitSeconds();
      }
      if (firstStage()) {
        input = batches[mb].inputs;
      } else {
        double waited = 0;
        input = fromPrev_->take(activationTag(mb), &waited);
        waitSeconds += waited;
      }
      const auto c0 = Clock::now();
      double loss = 0;
      torch::Tensor out;
      {
        TraceSpan span(trace_, fmt::format("forward mb{}", mb), "compute", TraceThread::kCompute,
                       {{"step", globalStep}, {"samples", sizes[mb]}});
        out = stage_->forward(mb, input, globalStep, role_.replica * role_.microbatches + mb,
                              lastStage() ? batches[mb].labels : torch::Tensor(), sizes[mb] / stepSamples, &loss);
      }
      computeSeconds += since(c0);
      if (lastStage()) {
        lossSum += loss * sizes[mb] / stepSamples;
        samples += static_cast<double>(sizes[mb]);
      } else {
        toNext_->send(activationTag(mb), out, fmt::format("act mb{}", mb));
      }
    } else {
      torch::Tensor grad;
      if (!lastStage()) {
        double waited = 0;
        grad = fromNext_->take(gradientTag(mb), &waited);
        waitSeconds += waited;
      }
      const bool final = static_cast<int>(a) == finalBackward;
      const auto c0 = Clock::now();
      torch::Tensor gradIn;
      {
        TraceSpan span(trace_, fmt::format("backward mb{}", mb), "compute", TraceThread::kCompute, {{"step", globalStep}});
        gradIn = stage_->backward(mb, grad, final ? std::function<void(int)>([&](int l) { sync_->layerReady(l); })
                                                  : std::function<void(int)>());
      }
      computeSeconds += since(c0);
      if (toPrev_) toPrev_->send(gradientTag(mb), gradIn, fmt::format("grad mb{}", mb));
    }
  }
  double allreduceSeconds = 0;
  sync_->finish(&allreduceSeconds);
  {
    TraceSpan span(trace_, "optimizer step", "compute", TraceThread::kCompute, {{"step", globalStep}});
    const double lr = role_.lr_factor * scheduledLearningRate(role_.job.optimizer, role_.job.lr_schedule, globalStep,
                                                              epoch, role_.total_steps);
    setLearningRate(*optimizer_, lr);
    std::lock_guard<std::mutex> lock(stateMu_);
    if (halted_) throw Halted();
    if (keepSnapshots_) snapshot();
    optimizer_->step();
    optimizer_->zero_grad();
    completedStep_ = globalStep + 1;
  }
  if (toNext_) toNext_->flush();
  if (toPrev_) toPrev_->flush();
  Json report = {{"type", "step"},
                 {"step", globalStep},
                 {"epoch", epoch},
                 {"compute_s", computeSeconds},
                 {"wait_s", waitSeconds},
                 {"allreduce_s", allreduceSeconds},
                 {"iteration_s", since(t0)}};
  if (lastStage()) {
    report["loss"] = lossSum;
    report["samples"] = samples;
  }
  post(std::move(report));
}

void Worker::evaluate(std::int64_t epoch) {
  if (!testSampler_) return;
  const data::EpochSampler& sampler = *testSampler_;
  if (testLoader_) testLoader_->start(0, 0);
  double lossSum = 0, correct = 0, count = 0;
  TraceSpan span(trace_, fmt::format("evaluate epoch {}", epoch), "eval", TraceThread::kCompute);
  for (std::int64_t step = 0; step < sampler.stepsPerEpoch(); ++step) {
    const std::vector<std::int64_t> sizes = microbatchSizes(sampler, step);
    for (size_t mb = 0; mb < sizes.size(); ++mb) {
      const int tag = evalTag(static_cast<int>(mb));
      if (fromPrev_) fromPrev_->expect(tag, tag, inShape_.buffer(sizes[mb]), "eval");
    }
    for (size_t mb = 0; mb < sizes.size(); ++mb) {
      const int tag = evalTag(static_cast<int>(mb));
      data::Batch batch;
      if (testLoader_) {
        batch = testLoader_->next();
        batch.inputs = batch.inputs.to(device_);
        batch.labels = batch.labels.to(device_);
      }
      const torch::Tensor input = firstStage() ? batch.inputs : fromPrev_->take(tag);
      const torch::Tensor out = stage_->evaluate(input);
      if (!lastStage()) {
        toNext_->send(tag, out, "eval");
        continue;
      }
      const torch::Tensor logits = out.reshape({-1, out.size(-1)});
      const torch::Tensor labels = batch.labels.reshape({-1});
      lossSum += torch::nn::functional::cross_entropy(
                     logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                     .item<double>();
      correct += logits.argmax(1).eq(labels).sum().item<double>();
      count += static_cast<double>(labels.numel());
    }
    if (toNext_) toNext_->flush();
  }
  if (lastStage()) {
    post({{"type", "eval"}, {"epoch", epoch}, {"loss_sum", lossSum}, {"correct", correct}, {"count", count}});
  }
}

// Replicas of a stage saw different microbatches, so their BatchNorm running
// statistics differ; average them before evaluating or saving.
void Worker::synchronizeBuffers() {
  if (role_.replicas <= 1) return;
  torch::NoGradGuard guard;
  for (auto& layer : stage_->model().layers) {
    for (auto& b : layer.module->buffers()) {
      if (!b.is_floating_point()) continue;
      transport_->allreduceStage(b)->wait();
      b.div_(role_.replicas);
    }
  }
}

void Worker::checkpoint(std::int64_t globalStep) {
  synchronizeBuffers();
  if (role_.replica != 0) return;  // replicas hold identical parameters and optimizer state
  auto dir = checkpointDir(globalStep);
  if (!dir.ok()) throw std::runtime_error(dir.status().message());
  TraceSpan span(trace_, "checkpoint", "checkpoint", TraceThread::kCompute);
  Status s = saveStage(*dir, stage_->model(), *optimizer_);
  // Sent from here, before the "checkpoint" posted after them (one socket, in order).
  if (shipsCheckpoints()) s = shipCheckpoint(globalStep, *dir, s);
  if (!s.ok()) throw std::runtime_error(s.message());
  post({{"type", "checkpoint"}, {"step", globalStep}, {"stage", role_.stage}});
}

void Worker::train() {
  const cluster::JobSpec& job = role_.job;
  const std::int64_t perEpoch = trainSampler_->stepsPerEpoch();
  // Global steps from the beginning of this generation's first epoch.
  auto sinceStart = [this](std::int64_t global) { return global - role_.epoch_start_step; };
  std::int64_t global = role_.start_step;
  while (global < role_.stop_step && !stopRequested_) {
    const std::int64_t epoch = role_.first_epoch + sinceStart(global) / perEpoch;
    const std::int64_t first = sinceStart(global) % perEpoch;
    if (trainLoader_) trainLoader_->start(epoch, first);
    for (std::int64_t step = first; step < perEpoch && global < role_.stop_step; ++step) {
      currentStep_ = global;
      if (!pollControl()) {
        stopRequested_ = true;
        if (stopCheckpoint_ && global > role_.start_step) checkpoint(global);
        return;
      }
      trace_.setEnabled(step - first < job.trace_steps || step < job.trace_steps);
      iteration(epoch, step, global);
      ++global;
      if (checkpointAt_.load() >= 0 && global - 1 == checkpointAt_.load()) {
        checkpoint(global);
        checkpointAt_ = -1;
      }
    }
    trace_.setEnabled(true);
    const bool epochDone = sinceStart(global) % perEpoch == 0;
    if (epochDone) {
      synchronizeBuffers();
      if (job.eval) evaluate(epoch);
      const std::int64_t completed = epoch + 1;
      const bool hold = role_.hold_at_epoch_end && global < role_.stop_step;
      if ((job.checkpoint_every_epochs > 0 && completed % job.checkpoint_every_epochs == 0 && global < role_.stop_step) ||
          hold) {
        checkpoint(global);
      }
      if (hold && !holdAtEpochEnd(global)) stopRequested_ = true;
    } else if (global == role_.stop_step && job.eval) {
      synchronizeBuffers();
      evaluate(epoch);  // stopped mid-epoch (max_steps): still report accuracy
    }
    (void)trace_.flush(role_.trace_path);
  }
  if (!stopRequested_) checkpoint(global);  // the final weights
}

// NOTE [Holding at an epoch's end]
// A scaling rule reads the epoch's test accuracy, so its decision comes
// after the epoch's evaluation. With hold_at_epoch_end the workers say
// "boundary" once the epoch is evaluated and saved, and wait: "continue"
// (the same replicas) goes on at once; "stop" ends this generation there,
// and the coordinator starts the next one from that checkpoint.
bool Worker::holdAtEpochEnd(std::int64_t global) {
  post({{"type", "boundary"}, {"step", global}});
  for (;;) {
    if (haltSeen_) throw Halted();
    if (continueAt_.load() == global) return true;
    if (stopAt_.load() >= 0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void Worker::report(const std::string& kind, const std::string& message) {
  if (!control_) return;
  std::int64_t completed = 0;
  {
    std::lock_guard<std::mutex> lock(stateMu_);
    completed = completedStep_;
  }
  post({{"type", "error"}, {"kind", kind}, {"message", message}, {"completed", completed}, {"stage", role_.stage}});
}

int Worker::run() {
  configureAllocatorForTraining();  // NOTE [glibc malloc and tensor-sized allocations]
  if (Status s = join(); !s.ok()) {
    spdlog::error("{}", s.message());
    report("fatal", s.message());
    return 1;
  }
  if (Status s = build(); !s.ok()) {
    spdlog::error("{}", s.message());
    report("fatal", s.message());
    return 1;
  }
  control_->send({{"type", "ready"}});
  Json m;
  while (!control_->receive(&m, 1000) || m.value("type", "") != "go") {
    if (m.value("type", "") == "stop") return 0;
  }
  {
    std::lock_guard<std::mutex> lock(stateMu_);
    completedStep_ = role_.start_step;
    keepSnapshots_ = role_.replicas > 1 && role_.stages > 1 && role_.job.max_recoveries > 0;
  }
  controlRunning_ = true;
  controlThread_ = std::thread([this] {
    runThreadOn(helperCpus_);  // NOTE [Cores for compute threads]
    controlLoop();
  });
  int code = 0;
  try {
    train();
    // Done, until the coordinator says it heard (a lost "done" would make
    // this clean exit look like a death).
    const Json done = {{"type", "done"}, {"stopped", stopRequested_}, {"peak_memory", peakResidentBytes()}};
    for (int tries = 0; tries < 10 && !doneAcked_ && stopAt_.load() != 0; ++tries) {
      post(done);
      const auto until = Clock::now() + std::chrono::seconds(1);
      while (!doneAcked_ && stopAt_.load() != 0 && Clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    const bool halted = dynamic_cast<const Halted*>(&e) != nullptr;
    const bool lost = halted || isPeerLost(e);
    if (!halted) {
      spdlog::error("{}: {}", lost ? "lost a peer" : "failed", what);
      report(lost ? "peer_lost" : "fatal", what);
    } else {
      spdlog::info("{}", what);
    }
    code = lost ? 3 : 1;
    // A survivor may hold what the next generation needs: it stays until the
    // coordinator has asked (save) and says stop, or a minute has passed.
    if (lost) {
      const auto until = Clock::now() + std::chrono::seconds(60);
      while (stopAt_.load() != 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  (void)trace_.flush(role_.trace_path);
  stopControl_ = true;
  control_->wake();
  controlThread_.join();
  // Give the last messages a moment to leave before the sockets close.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return code;
}

}  // namespace

int runWorker(const WorkerArgs& args) {
  Worker w(args);
  return w.run();
}

}  // namespace hydrozoa::runtime
