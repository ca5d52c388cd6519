#include "runtime/exec/reassigning_step.h"

#include <fmt/format.h>

#include <chrono>

namespace hydrozoa::runtime {
namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

ReassigningStep::ReassigningStep(StageExecutor& layers, GradientSync& sync, data::PrefetchLoader& loader,
                                 Reassigner& reassigner, torch::Device device, TraceRecorder& trace,
                                 StepExecutor::Update update)
    : layers_(layers),
      sync_(sync),
      loader_(loader),
      reassigner_(reassigner),
      device_(device),
      trace_(trace),
      update_(std::move(update)) {}

StepStats ReassigningStep::run(const StepInput& in, int me, const std::vector<int>& perReplica, int stride,
                               const std::function<std::int64_t(int, int)>& sizeOf, const Load& load,
                               Reassigner::Counts* counts) {
  StepStats stats;
  // Forward and backward of one microbatch (NOTE [Reassigned microbatches]).
  auto pass = [&](const data::Batch& raw, int replica, int mb, const std::string& label) {
    const torch::Tensor inputs = raw.inputs.to(device_, /*non_blocking=*/true);
    const torch::Tensor labels = raw.labels.to(device_, /*non_blocking=*/true);
    const std::int64_t n = sizeOf(replica, mb);
    const auto c0 = std::chrono::steady_clock::now();
    double loss = 0;
    {
      TraceSpan span(trace_, "forward " + label, "compute", TraceThread::kCompute, {{"step", in.step}, {"samples", n}});
      layers_.forward(0, inputs, in.step, static_cast<std::int64_t>(replica) * stride + mb, labels,
                      static_cast<double>(n) / in.stepSamples, &loss);
    }
    {
      TraceSpan span(trace_, "backward " + label, "compute", TraceThread::kCompute, {{"step", in.step}});
      layers_.backward(0, torch::Tensor());
    }
    stats.compute += since(c0);
    if (afterPass_) afterPass_(since(c0));
    stats.lossSum += loss * static_cast<double>(n) / in.stepSamples;
    stats.samples += static_cast<double>(n);
  };

  reassigner_.beginStep(in.step, perReplica);
  for (int k = 0; k < static_cast<int>(in.sizes.size()); ++k) {
    const auto w0 = traceNowUs();
    data::Batch b = loader_.next();  // read in order whoever computes it
    if (loader_.lastWaitSeconds() > 1e-4) trace_.record("data wait", "data", TraceThread::kData, w0, traceNowUs());
    stats.wait += loader_.lastWaitSeconds();
    if (reassigner_.claimOwn(k)) pass(b, me, k, fmt::format("mb{}", k));
    reassigner_.ownDone(k);
  }
  reassigner_.finishedOwn();
  while (std::optional<Assignment> a = reassigner_.nextAssignment()) {
    int computed = 0;
    // From the end of the offer: its owner works up from the start.
    for (int k = a->last - 1; k >= a->first; --k) {
      if (!reassigner_.claimHelp(*a, k)) break;
      const auto w0 = std::chrono::steady_clock::now();
      data::Batch b = load(a->replica, k);
      stats.wait += since(w0);
      pass(b, a->replica, k, fmt::format("r{} mb{}", a->replica, k));
      ++computed;
    }
    reassigner_.completed(*a, computed);
  }
  double waited = 0;
  sync_.finish(&waited);
  stats.allreduce += waited;
  *counts = reassigner_.endStep();
  update_(in.step, 0, 0, /*last=*/true, 1.0);
  return stats;
}

}  // namespace hydrozoa::runtime
