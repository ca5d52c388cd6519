#include "profile/measure.h"

#include <ATen/DeviceAccelerator.h>
#include <ATen/cuda/CUDAContextLight.h>
#include <c10/core/Event.h>
#include <fmt/format.h>
#include <torch/torch.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>

#include "core/allocator.h"
#include "core/cpus.h"
#include "core/memory.h"
#include "model/model.h"
#include "profile/corun.h"
#include "profile/memory_tracker.h"
#include "profile/samples.h"

namespace hydrozoa::profile {
namespace {


Bytes tensorBytes(const torch::Tensor& t) { return static_cast<Bytes>(t.numel() * t.element_size()); }

// Pins the calling thread to the CPU it runs on until destroyed, then
// restores its affinity. Measured here: a 28 us layer took 28 us pinned and
// up to 44 us when the scheduler moved the process between cores.
class PinToCurrentCpu {
 public:
  PinToCurrentCpu() {
    if (::sched_getaffinity(0, sizeof(saved_), &saved_) != 0) return;
    const int cpu = ::sched_getcpu();
    if (cpu < 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pinned_ = ::sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~PinToCurrentCpu() {
    if (pinned_) ::sched_setaffinity(0, sizeof(saved_), &saved_);
  }
  PinToCurrentCpu(const PinToCurrentCpu&) = delete;
  PinToCurrentCpu& operator=(const PinToCurrentCpu&) = delete;

 private:
  cpu_set_t saved_;
  bool pinned_ = false;
};

struct LayerSamples {
  std::vector<double> forward, backward, update, snapshot;
  std::vector<double> cold_forward, cold_backward;  // NOTE [Passes after another chunk's]
  Bytes output = 0, stashed = 0, workspace = 0;
};

// NOTE [Timing the update]
// A worker ends each iteration with its optimizer's step over the stage's
// parameters: elementwise passes over parameters, gradients and state, bound
// by memory bandwidth and the same at every microbatch size. Measured on 2
// cores it was 13% of a VGG-11 step (74 of 562 ms) and 19% of the MLP's, and
// the planner did not count it. Each layer gets an optimizer of the profile's
// kind over its own parameters, stepped right after each backward pass, as
// the worker does, so the caches hold what they hold then; the learning rate
// is 0, so the weights stay as they are. The worker zeroes the gradients
// right after the step (libtorch 1.13's zero_grad writes zeros; the next
// backward pass adds into them): a pass over the gradients that is timed
// with the step. Before it was, the MLP's update measured 6.1 ms a step
// against the profile's 4.0. A worker of a replicated pipeline also copies
// its parameters and optimizer state aside before each update (docs/
// recovery.md, "The step before"): timed here too, as copies of the layer's
// parameters into a scratch buffer, once and once more per state tensor
// (the state has the parameters' shapes), after the update so that the
// update's own timing is as it is without one. Measured in a 2x2 MLP before
// the planner counted it: the step's update took 10 ms against 4.9 planned.
struct Snapshots {
  torch::Tensor scratch;  // as large as the largest parameter tensor
  int copies = 1;         // the parameters, then each of the optimizer's state tensors
};
using Updates = std::vector<std::unique_ptr<torch::optim::Optimizer>>;

Result<Updates> layerOptimizers(model::Model& m, const std::string& optimizer) {
  Updates updates;
  for (const auto& layer : m.layers) {
    std::vector<torch::Tensor> params = layer.module->parameters();
    if (params.empty()) {
      updates.push_back(nullptr);
    } else if (optimizer == "sgd" || optimizer == "sgd_momentum") {
      const double momentum = optimizer == "sgd" ? 0.0 : 0.9;
      updates.push_back(std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(0).momentum(momentum)));
    } else if (optimizer == "adam") {
      updates.push_back(std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(0)));
    } else if (optimizer == "adamw") {
      updates.push_back(std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(0)));
    } else {
      return invalidArgument(fmt::format("cannot time the optimizer \"{}\"; use sgd, sgd_momentum or adam", optimizer));
    }
  }
  return updates;
}

// NOTE [Profiles on a GPU]
// `hydrozoa profile --on cuda` runs the layers on a GPU. A pass there only
// enqueues its kernels, so each timed region lies between two CUDA events
// recorded on the device's current stream, and ends by waiting for the
// second: its time is the kernels' and the gaps between them while the CPU
// launches the next, as a worker's compute thread issues them. A layer's
// kept and transient memory come from the caching allocator's allocated
// bytes (NOTE [Tensor memory on a GPU], memory_tracker.h). The passes after
// a cache flush and beside busy cores measure the CPU's caches and cores,
// so they are not run there.
class Meter {
 public:
  explicit Meter(c10::Device device) : device_(device) {
    if (device_.is_cuda()) {
      begin_.emplace(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
      end_.emplace(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);
    }
  }
  void start() {
    if (begin_) {
      begin_->record(at::accelerator::getCurrentStream(device_.index()));
    } else {
      t0_ = Clock::now();
    }
  }
  double stopMs() {
    if (!end_) return msSince(t0_);
    end_->record(at::accelerator::getCurrentStream(device_.index()));
    end_->synchronize();
    return begin_->elapsedTime(*end_);
  }
  Bytes current() const { return currentOn(device_); }
  Bytes peak() const { return peakOn(device_); }
  void resetPeak() { resetPeakOn(device_); }

 private:
  c10::Device device_;
  std::optional<c10::Event> begin_, end_;
  Clock::time_point t0_;
};

// One forward and backward pass over every layer at one microbatch size;
// times and memory go into `samples` when `keep`.
void measurePass(model::Model& m, const torch::Tensor& input, const torch::Tensor& labels, bool keep, Meter& meter,
                 Updates& updates, Snapshots& snapshots, std::vector<LayerSamples>* samples) {
  const int L = static_cast<int>(m.layers.size());
  std::vector<torch::Tensor> ins(L), outs(L);
  torch::Tensor loss;
  torch::Tensor x = input;
  for (int i = 0; i < L; ++i) {
    // A stage receives a detached tensor; only layers after the first need
    // the gradient of their input.
    torch::Tensor in = x.detach();
    if (i > 0 && in.is_floating_point()) in.requires_grad_(true);
    const std::int64_t mark = meter.current();
    meter.resetPeak();
    meter.start();
    torch::Tensor y = m.layers[i].module->forward(in);
    if (i == L - 1) loss = model::taskLoss(m.task, y, labels);
    const double ms = meter.stopMs();
    const Bytes retained = meter.current() - mark;
    const Bytes peak = meter.peak() - mark;
    LayerSamples& s = (*samples)[i];
    s.output = tensorBytes(y);
    if (keep) {
      // Warm-up runs allocate the parameters' gradients; they are not workspace.
      s.stashed = std::max({s.stashed, retained, s.output});
      s.workspace = std::max(s.workspace, peak - retained);
      s.forward.push_back(ms);
    }
    ins[i] = in;
    outs[i] = y;
    x = y;
  }
  torch::Tensor grad;
  for (int i = L - 1; i >= 0; --i) {
    const std::int64_t mark = meter.current();
    meter.resetPeak();
    meter.start();
    if (i == L - 1) {
      loss.backward();
    } else {
      outs[i].backward(grad);
    }
    const double ms = meter.stopMs();
    if (keep) {
      (*samples)[i].workspace = std::max((*samples)[i].workspace, meter.peak() - mark);
      (*samples)[i].backward.push_back(ms);
    }
    grad = ins[i].defined() && ins[i].requires_grad() ? ins[i].grad() : torch::Tensor();
    outs[i] = torch::Tensor();  // free as a stage would after sending the gradient
    ins[i] = torch::Tensor();
  }
  for (int i = 0; i < L; ++i) {  // NOTE [Timing the update]: in the order the worker's optimizer goes
    if (!updates[i]) continue;
    meter.start();
    updates[i]->step();
    updates[i]->zero_grad();  // the worker's "optimizer step" zeroes the gradients too
    const double ms = meter.stopMs();
    if (keep) (*samples)[i].update.push_back(ms);
  }
  torch::NoGradGuard noGrad;
  for (int i = 0; i < L; ++i) {
    if (!updates[i]) continue;
    meter.start();
    for (int k = 0; k < snapshots.copies; ++k) {
      for (const auto& t : m.layers[i].module->parameters()) {
        snapshots.scratch.narrow(0, 0, t.numel()).view_as(t).copy_(t);
      }
    }
    const double ms = meter.stopMs();
    if (keep) (*samples)[i].snapshot.push_back(ms);
  }
  for (auto& t : m.parameters()) {
    if (t.grad().defined()) t.mutable_grad().zero_();
  }
}

// NOTE [Passes after another chunk's]
// The passes above run the layers one after another on one microbatch, so
// each finds the weights, gradients and activations that it reads where the
// layers before it left them: in the core's own caches. Under interleaved
// 1F1B a worker alternates between the passes of its chunks, and each pass
// follows another chunk's, which has filled those caches with its own
// tensors. Traced on 2 cores (the CNN, 2 workers, 2 chunks each, microbatches
// of 4) every pass took longer than profiled: backward passes 1.4-1.9x. So
// each layer's forward and backward pass is also timed right after a buffer
// of twice the core's private cache (its L2, from sysfs; 8 MB where unknown)
// is written, which leaves none of its tensors in it; the planner charges
// those times to passes that follow another chunk's (chainCosts, plan/
// profile_costs.cc). The forward runs on a detached copy of the layer's input, the
// backward from a gradient of ones, as a stage would run them; every other
// repetition, so that a profile takes 1.5 times as many passes, not twice.
// Measured on 2 cores (the CNN at microbatches of 4, profiles of 1-4 s):
// cold passes 0-12% longer in the two convolutions, 10-30% in fc1 and
// 10-90% in fc2's 30-70 us; the same with another profile computing on the
// other core (so not the memory bus). They explain about a third of what
// interleaving's passes lost in a traced run (fc1's backward: 383 us warm,
// 475 cold, a mean of 626 in the run); bench/README.md, "Passes after
// another chunk's".
class CacheFlush {
 public:
  CacheFlush() : buffer_(static_cast<size_t>(2 * privateCacheBytes())) {}
  void operator()() {
    ++round_;
    std::fill(buffer_.begin(), buffer_.end(), static_cast<unsigned char>(round_));
  }

 private:
  static Bytes privateCacheBytes() {
    // index2 is the level-2 unified cache on x86 and ARM, written as "2048K".
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index2/size");
    long long n = 0;
    char unit = 0;
    if (in >> n >> unit) {
      const Bytes size = unit == 'K' ? n * kKiB : unit == 'M' ? n * kMiB : 0;
      if (size >= 64 * kKiB && size <= 64 * kMiB) return size;
    }
    return 4 * kMiB;
  }
  std::vector<unsigned char> buffer_;
  unsigned round_ = 0;
};

void measureColdPasses(model::Model& m, const torch::Tensor& input, const torch::Tensor& labels, CacheFlush& flush,
                       std::vector<LayerSamples>* samples) {
  const int L = static_cast<int>(m.layers.size());
  std::vector<torch::Tensor> ins(L);
  {
    torch::NoGradGuard noGrad;
    torch::Tensor x = input;
    for (int i = 0; i < L; ++i) {
      ins[i] = x;
      x = m.layers[i].module->forward(x);
    }
  }
  for (int i = 0; i < L; ++i) {
    torch::Tensor in = ins[i].detach();
    if (i > 0 && in.is_floating_point()) in.requires_grad_(true);
    flush();
    auto t0 = Clock::now();
    torch::Tensor y = m.layers[i].module->forward(in);
    torch::Tensor loss;
    if (i == L - 1) loss = model::taskLoss(m.task, y, labels);
    (*samples)[i].cold_forward.push_back(msSince(t0));
    if (!(i == L - 1 ? loss : y).requires_grad()) {  // nothing to differentiate: the warm time stands
      (*samples)[i].cold_backward.push_back(0);
      continue;
    }
    torch::Tensor grad = i == L - 1 ? torch::Tensor() : torch::ones_like(y);
    flush();
    t0 = Clock::now();
    if (i == L - 1) {
      loss.backward();
    } else {
      y.backward(grad);
    }
    (*samples)[i].cold_backward.push_back(msSince(t0));
  }
  for (auto& t : m.parameters()) {
    if (t.grad().defined()) t.mutable_grad().zero_();
  }
}

// NOTE [A worker process's own memory]: the resident memory of the process
// before it builds the model (libtorch, the allocator) is not all a worker
// holds beyond its model. The first matrix multiplications allocate BLAS
// buffers, OpenMP starts its threads, and glibc keeps freed tensor memory in
// its heap (NOTE [glibc malloc and tensor-sized allocations]). Measured here,
// the process's peak after its first pass (of the smallest microbatch size)
// was 10-20 MB above its start plus the model's weights, their gradients
// and optimizer state, that pass's activations and the inputs (MLP, CNN).
// runtime_bytes counts that too, taken after the smallest size's first pass.
// Larger passes leave more in the heap, which grows with the size and is
// not a constant of the process (taking the peak over all sizes as the
// constant put a GPT's plan 22% above its workers' peaks): that is measured
// per size (Measurement::heap_bytes), from the process's peak after the
// first pass of each size (the sizes run in ascending order, so that peak is
// the size's own largest) less the model's part of it, less the smallest
// size's; the planner adds the heap of the size it plans with. Measured on 2
// cores before that, a GPT stage training at microbatch size 16 peaked 14%
// above its plan, reached in its first step and flat after it. What a
// training worker adds on top (Gloo, ZeroMQ, loader threads) is left for
// `hydrozoa profile --from-run`.
Bytes unmodelledPeak(const Profile& p, const Measurement& meas, Bytes peak, Bytes runtime, Bytes held) {
  if (peak <= 0) return 0;
  Bytes weights = 0;
  // and their gradients and optimizer state (NOTE [Timing the update] makes it)
  for (const auto& l : p.layers) weights += 2 * l.parameter_bytes + l.optimizer_state_bytes;
  Bytes stashed = 0, workspace = 0;
  for (const auto& c : meas.layers) {
    stashed += c.stashed_bytes;
    workspace = std::max(workspace, c.workspace_bytes);
  }
  return std::max<Bytes>(0, peak - (runtime + weights + stashed + workspace + held));
}


// The GPU as the pricing catalogs name accelerators ("NVIDIA H100 80GB
// HBM3" -> "h100"); its whole name in lower case when it has no such part.
std::string acceleratorName(const std::string& product) {
  std::string lower = product;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  std::smatch m;
  if (std::regex_search(lower, m, std::regex("\\b([a-z][0-9]{2,3})\\b"))) return m[1];
  return lower;
}

// `build` makes the model after the process's own memory is measured.
Result<Profile> measureBuilt(const std::function<Result<model::Model>()>& build, const MeasureOptions& o) {
  if (o.microbatch_sizes.empty()) return invalidArgument("--microbatch-sizes is empty");
  const bool gpu = o.on.is_cuda();
  const c10::Device device = gpu ? c10::Device(c10::kCUDA, o.on.has_index() ? o.on.index() : 0) : o.on;
  if (gpu && (!torch::cuda::is_available() || device.index() >= torch::cuda::device_count())) {
    return invalidArgument(fmt::format("--on {}: this machine has {} usable CUDA device(s); profile on the CPU (drop "
                                       "--on) or on a GPU machine",
                                       device.str(), torch::cuda::is_available() ? torch::cuda::device_count() : 0));
  }
  if (o.repeats < 1 || o.warmup < 0) return invalidArgument("--repeats must be at least 1 and --warmup at least 0");
  if (o.min_seconds < 0) return invalidArgument("--min-time must not be negative");
  HZ_ASSIGN_OR_RETURN(double stateFactor, optimizerStateFactor(o.optimizer));
  std::vector<std::int64_t> sizes = o.microbatch_sizes;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  if (o.threads > 0) torch::set_num_threads(o.threads);
  configureAllocatorForTraining();  // NOTE [glibc malloc and tensor-sized allocations]

  MemoryTracker::instance();  // counts from here
  Meter meter(device);
  // NOTE [Profiles on a GPU]: what the device holds before the model (the
  // CUDA context, other processes) stands for the process's own memory.
  std::optional<std::pair<size_t, size_t>> gpuMemory;  // free, total
  if (gpu) gpuMemory = at::accelerator::getMemoryInfo(device.index());
  const Bytes runtime = gpu ? static_cast<Bytes>(gpuMemory->second - gpuMemory->first) : residentBytes();
  HZ_ASSIGN_OR_RETURN(model::Model m, build());
  m.train(true);
  if (gpu) m.to(device);
  const int L = static_cast<int>(m.layers.size());
  HZ_ASSIGN_OR_RETURN(Updates updates, layerOptimizers(m, o.optimizer));
  Snapshots snapshots;
  snapshots.copies = 1 + static_cast<int>(std::lround(stateFactor));
  std::int64_t largest = 1;
  for (const auto& t : m.parameters()) largest = std::max(largest, t.numel());
  snapshots.scratch = torch::empty({largest}, torch::TensorOptions().device(device));

  Profile p;
  p.model = m.name;
  p.options = m.options;
  p.source = "measured";
  if (gpu) {
    p.device = acceleratorName(at::cuda::getDeviceProperties(device.index())->name);
    p.device_kind = "gpu";
    p.device_memory = static_cast<Bytes>(gpuMemory->second);
  } else {
    p.device = "cpu";
    p.device_kind = "cpu";
    p.device_memory = static_cast<Bytes>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE);
  }
  p.threads = torch::get_num_threads();
  p.optimizer = o.optimizer;
  for (const auto& layer : m.layers) {
    Bytes params = 0;
    for (const auto& t : layer.module->parameters()) params += tensorBytes(t);
    p.layers.push_back({layer.name, layer.kind, params, static_cast<Bytes>(stateFactor * static_cast<double>(params))});
  }

  // NOTE [Interleaved repetitions]
  // Each repetition is one pass over every microbatch size, so repetitions of
  // the same size are spread over the whole measurement: a burst of
  // interference from other processes slows one repetition of many sizes
  // rather than many repetitions of one size, and the median discards it.
  torch::Generator gen = at::detail::createCPUGenerator(o.seed + 1);
  struct SizeRun {
    std::int64_t microbatch;
    torch::Tensor input, labels;
    std::vector<LayerSamples> samples;
  };
  std::vector<SizeRun> runs;
  for (std::int64_t mb : sizes) {
    runs.push_back({mb, model::syntheticInput(m.input, mb, gen).to(device),
                    model::syntheticLabels(m.input, m.task, mb, gen).to(device), std::vector<LayerSamples>(L)});
  }
  // One compute thread is what a core-bound worker runs: keep it on one core.
  const std::vector<int> cpus = usableCpus();  // before the pinning narrows them
  std::optional<PinToCurrentCpu> pin;
  if (torch::get_num_threads() == 1) pin.emplace();
  // Warm-up passes, then timed passes until both --repeats and --min-time are met.
  Clock::time_point measuring = Clock::now();
  std::vector<Bytes> firstPeaks(runs.size(), 0);  // after each size's first pass
  int kept = 0;
  CacheFlush flush;
  for (int rep = 0;; ++rep) {
    const bool keep = rep >= o.warmup;
    if (rep == o.warmup) measuring = Clock::now();
    if (keep && kept >= o.repeats &&
        (msSince(measuring) >= 1e3 * o.min_seconds || kept >= std::max(o.repeats, o.max_repeats))) {
      break;
    }
    if (o.progress && (rep < o.warmup + o.repeats)) {
      o.progress(fmt::format("profiling {}: {} {}/{} over microbatch sizes {}..{}", p.model, keep ? "run" : "warm-up",
                             keep ? rep - o.warmup + 1 : rep + 1, keep ? o.repeats : o.warmup, sizes.front(),
                             sizes.back()));
    }
    for (size_t r = 0; r < runs.size(); ++r) {
      SizeRun& run = runs[r];
      try {
        measurePass(m, run.input, run.labels, keep, meter, updates, snapshots, &run.samples);
        if (firstPeaks[r] == 0) firstPeaks[r] = gpu ? 0 : peakResidentBytes();
        if (keep && kept % 2 == 0 && !gpu) measureColdPasses(m, run.input, run.labels, flush, &run.samples);
      } catch (const c10::Error& e) {
        const std::string what = e.what_without_backtrace();
        return invalidArgument(fmt::format("{}: running microbatch size {} failed: {}", p.model, run.microbatch,
                                           what.substr(0, what.find('\n'))));
      }
    }
    if (!keep) continue;
    ++kept;
  }
  for (const SizeRun& run : runs) {
    Measurement meas;
    meas.microbatch_size = run.microbatch;
    meas.input_bytes = tensorBytes(run.input);
    for (int i = 0; i < L; ++i) {
      const LayerSamples& s = run.samples[i];
      meas.layers.push_back({median(s.forward), median(s.backward), s.output, s.stashed, s.workspace});
      if (!s.cold_forward.empty()) {
        meas.layers.back().cold_forward_ms = median(s.cold_forward);
        meas.layers.back().cold_backward_ms = median(s.cold_backward);
      }
    }
    p.measurements.push_back(std::move(meas));
  }
  for (int i = 0; i < L; ++i) {  // every size's passes: the update does not depend on it
    std::vector<double> all;
    for (const SizeRun& run : runs) all.insert(all.end(), run.samples[i].update.begin(), run.samples[i].update.end());
    if (!all.empty()) p.layers[i].optimizer_ms = median(all);
    std::vector<double> copies;
    for (const SizeRun& run : runs) {
      copies.insert(copies.end(), run.samples[i].snapshot.begin(), run.samples[i].snapshot.end());
    }
    if (!copies.empty()) p.layers[i].snapshot_ms = median(copies);
  }
  // Every size's inputs and labels, held at once while profiling, and the
  // snapshots' scratch buffer: none of it is a worker's.
  Bytes held = tensorBytes(snapshots.scratch);
  for (const SizeRun& run : runs) held += tensorBytes(run.input) + tensorBytes(run.labels);
  // (On a GPU the heap is the caching allocator's, which the layers' own
  // figures count: firstPeaks stay 0.)
  const Bytes smallest = unmodelledPeak(p, p.measurements.front(), firstPeaks.front(), runtime, held);
  p.runtime_bytes = runtime + smallest;
  for (size_t r = 0; r < runs.size(); ++r) {
    p.measurements[r].heap_bytes =
        std::max<Bytes>(0, unmodelledPeak(p, p.measurements[r], firstPeaks[r], runtime, held) - smallest);
  }
  // At the smallest size whose pass takes 5 ms (shorter ones time the
  // framework more than the model), else the largest.
  if (o.corun && pin && !gpu) {
    size_t at = runs.size() - 1;
    for (size_t r = 0; r < runs.size(); ++r) {
      double ms = 0;
      for (const LayerCost& c : p.measurements[r].layers) ms += c.forward_ms + c.backward_ms;
      if (ms >= 5) {
        at = r;
        break;
      }
    }
    if (o.progress) o.progress(fmt::format("profiling {}: its passes with every core busy", p.model));
    try {
      Bytes modelBytes = 0;
      for (const LayerInfo& l : p.layers) modelBytes += l.parameter_bytes;
      p.corun = measureCorun(build, m, modelBytes, *p.device_memory, cpus, runs[at].microbatch, runs[at].input,
                             runs[at].labels, o.min_seconds);
    } catch (const c10::Error& e) {
      const std::string what = e.what_without_backtrace();
      return invalidArgument(fmt::format("{}: running microbatch size {} on every core failed: {}", p.model,
                                         runs[at].microbatch, what.substr(0, what.find('\n'))));
    }
  }
  HZ_RETURN_IF_ERROR(validateProfile(p, "measured profile"));
  return p;
}

}  // namespace

Result<Profile> measureProfile(const model::ModelSpec& spec, const MeasureOptions& o) {
  return measureBuilt([&] { return model::buildModel(spec, {o.seed, 0, -1}); }, o);
}

Result<Profile> measureArch(const model::Arch& arch, const MeasureOptions& o) {
  return measureBuilt([&] { return model::buildFromArch(arch, {o.seed, 0, -1}); }, o);
}

}  // namespace hydrozoa::profile
