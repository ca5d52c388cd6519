#include "profile/measure.h"

#include <fmt/format.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "model/model.h"
#include "profile/memory_tracker.h"

namespace hydrozoa::profile {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Resident memory of this process: the framework's share of a worker.
Bytes residentBytes() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<Bytes>(resident) * ::sysconf(_SC_PAGESIZE);
}

Bytes tensorBytes(const torch::Tensor& t) { return static_cast<Bytes>(t.numel() * t.element_size()); }

struct LayerSamples {
  std::vector<double> forward, backward;
  Bytes output = 0, stashed = 0, workspace = 0;
};

}  // namespace

Result<Profile> measureProfile(const model::ModelSpec& spec, const MeasureOptions& o) {
  if (o.microbatch_sizes.empty()) return invalidArgument("--microbatch-sizes is empty");
  if (o.repeats < 1 || o.warmup < 0) return invalidArgument("--repeats must be at least 1 and --warmup at least 0");
  HZ_ASSIGN_OR_RETURN(double stateFactor, optimizerStateFactor(o.optimizer));
  std::vector<std::int64_t> sizes = o.microbatch_sizes;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  if (o.threads > 0) torch::set_num_threads(o.threads);

  MemoryTracker& tracker = MemoryTracker::instance();
  const Bytes runtime = residentBytes();
  HZ_ASSIGN_OR_RETURN(model::Model m, model::buildModel(spec, {o.seed, 0, -1}));
  m.train(true);
  const int L = static_cast<int>(m.layers.size());

  Profile p;
  p.model = m.name;
  p.options = m.options;
  p.source = "measured";
  p.device = "cpu";
  p.device_kind = "cpu";
  p.device_memory = static_cast<Bytes>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE);
  p.threads = torch::get_num_threads();
  p.optimizer = o.optimizer;
  p.runtime_bytes = runtime;
  for (const auto& layer : m.layers) {
    Bytes params = 0;
    for (const auto& t : layer.module->parameters()) params += tensorBytes(t);
    p.layers.push_back({layer.name, layer.kind, params, static_cast<Bytes>(stateFactor * static_cast<double>(params))});
  }

  torch::Generator gen = at::detail::createCPUGenerator(o.seed + 1);
  for (size_t si = 0; si < sizes.size(); ++si) {
    const std::int64_t mb = sizes[si];
    if (o.progress) {
      o.progress(fmt::format("profiling {}: microbatch size {} ({}/{}), {} runs per layer", p.model, mb, si + 1,
                             sizes.size(), o.warmup + o.repeats));
    }
    const torch::Tensor input = model::syntheticInput(m.input, mb, gen);
    const torch::Tensor labels = model::syntheticLabels(m.input, m.task, mb, gen);
    std::vector<LayerSamples> samples(L);
    try {
      for (int rep = 0; rep < o.warmup + o.repeats; ++rep) {
        const bool keep = rep >= o.warmup;
        std::vector<torch::Tensor> ins(L), outs(L);
        torch::Tensor loss;
        torch::Tensor x = input;
        for (int i = 0; i < L; ++i) {
          // A stage receives a detached tensor; only layers after the first
          // need the gradient of their input.
          torch::Tensor in = x.detach();
          if (i > 0 && in.is_floating_point()) in.requires_grad_(true);
          const std::int64_t mark = tracker.current();
          tracker.resetPeak();
          const auto t0 = Clock::now();
          torch::Tensor y = m.layers[i].module->forward(in);
          if (i == L - 1) loss = model::taskLoss(m.task, y, labels);
          const double ms = msSince(t0);
          const Bytes retained = tracker.current() - mark;
          const Bytes peak = tracker.peak() - mark;
          LayerSamples& s = samples[i];
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
          const std::int64_t mark = tracker.current();
          tracker.resetPeak();
          const auto t0 = Clock::now();
          if (i == L - 1) {
            loss.backward();
          } else {
            outs[i].backward(grad);
          }
          const double ms = msSince(t0);
          if (keep) {
            samples[i].workspace = std::max(samples[i].workspace, tracker.peak() - mark);
            samples[i].backward.push_back(ms);
          }
          grad = ins[i].defined() && ins[i].requires_grad() ? ins[i].grad() : torch::Tensor();
          outs[i] = torch::Tensor();  // free as a stage would after sending the gradient
          ins[i] = torch::Tensor();
        }
        for (auto& t : m.parameters()) {
          if (t.grad().defined()) t.mutable_grad().zero_();
        }
      }
    } catch (const c10::Error& e) {
      const std::string what = e.what_without_backtrace();
      return invalidArgument(fmt::format("{}: running microbatch size {} failed: {}", p.model, mb,
                                         what.substr(0, what.find('\n'))));
    }
    Measurement meas;
    meas.microbatch_size = mb;
    meas.input_bytes = tensorBytes(input);
    for (int i = 0; i < L; ++i) {
      const LayerSamples& s = samples[i];
      meas.layers.push_back({median(s.forward), median(s.backward), s.output, s.stashed, s.workspace});
    }
    p.measurements.push_back(std::move(meas));
  }
  HZ_RETURN_IF_ERROR(validateProfile(p, "measured profile"));
  return p;
}

}  // namespace hydrozoa::profile
