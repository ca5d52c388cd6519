#include "runtime/exec/step_executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <set>
#include <stdexcept>

#include "runtime/exec/tags.h"

namespace hydrozoa::runtime {
namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The edge a transfer crosses, seen from the stage running it.
int edgeOf(const Action& a, const PipelineShape& shape) {
  const int v = shape.virtualStage(a.chunk);
  const bool towardsNext = (a.kind == ActionKind::kSend) == (a.payload == Payload::kActivation);
  return towardsNext ? v : v - 1;
}

}  // namespace

torch::Tensor SampleShape::buffer(std::int64_t n) const {
  std::vector<std::int64_t> s = {n};
  s.insert(s.end(), dims.begin(), dims.end());
  return torch::empty(s, torch::TensorOptions().dtype(dtype).device(device));
}

// ------------------------------------------------------------------ Channels

Channels::Channels(Transport& transport, TraceRecorder& trace, std::function<int(int)> rankOf)
    : transport_(transport), trace_(trace), rankOf_(std::move(rankOf)) {}

Inbound& Channels::in(int peerStage, Payload payload) {
  auto& slot = in_[{peerStage, payload}];
  if (!slot) {
    slot = std::make_unique<Inbound>(transport_, rankOf_(peerStage), trace_,
                                     payload == Payload::kActivation ? "activation" : "gradient");
  }
  return *slot;
}

Outbound& Channels::out(int peerStage, Payload payload) {
  auto& slot = out_[{peerStage, payload}];
  if (!slot) {
    slot = std::make_unique<Outbound>(transport_, rankOf_(peerStage), trace_,
                                      payload == Payload::kActivation ? "activation" : "gradient");
  }
  return *slot;
}

void Channels::flush() {
  for (auto& [key, o] : out_) o->flush();
}

// -------------------------------------------------------------- StepExecutor

StepExecutor::StepExecutor(const Schedule& schedule, PipelineShape shape, std::vector<ChunkParts> chunks,
                           Channels& channels, data::PrefetchLoader* loader, torch::Device device, TraceRecorder& trace,
                           std::function<void(std::int64_t)> update)
    : schedule_(schedule),
      shape_(shape),
      chunks_(std::move(chunks)),
      channels_(channels),
      loader_(loader),
      device_(device),
      trace_(trace),
      update_(std::move(update)),
      window_(schedule.receiveWindow()) {
  if (const char* w = std::getenv("HYDROZOA_RECEIVE_WINDOW"); w && *w) window_ = std::max(0, std::atoi(w));
}

// The receives of one step on one channel, in the order the schedule takes
// them; at most kReceiveWindow posted and not yet taken.
struct StepExecutor::Pending {
  struct Receive {
    int tag;
    const SampleShape* shape;
    std::int64_t samples;
    std::string label;
  };
  Inbound* channel = nullptr;
  std::deque<Receive> toPost;

  void post(int n) {
    for (; n > 0 && !toPost.empty(); --n) {
      const Receive& r = toPost.front();
      channel->expect(r.tag, r.tag, r.shape->buffer(r.samples), r.label);
      toPost.pop_front();
    }
  }
};

StepStats StepExecutor::run(const StepInput& in) {
  const int M = static_cast<int>(in.sizes.size());
  auto found = actions_.find(M);
  if (found == actions_.end()) {
    PipelineShape shape = shape_;
    shape.microbatches = M;
    found = actions_.emplace(M, schedule_.actions(shape)).first;
  }
  const std::vector<Action>& actions = found->second;
  const bool chunked = shape_.chunks > 1;
  auto label = [&](const char* what, const Action& a) {
    return chunked ? fmt::format("{} mb{} c{}", what, a.microbatch, a.chunk) : fmt::format("{} mb{}", what, a.microbatch);
  };
  auto tagOf = [&](const Action& a) {
    return transferTag(a.payload == Payload::kGradient, a.microbatch, edgeChunk(edgeOf(a, shape_), shape_.stages),
                       in.step + a.step);
  };

  // Receives, per channel in the order taken; the first few posted now.
  std::map<std::pair<int, Payload>, Pending> pending;
  for (const Action& a : actions) {
    if (a.kind != ActionKind::kRecv) continue;
    Pending& p = pending[{a.peer, a.payload}];
    p.channel = &channels_.in(a.peer, a.payload);
    const ChunkParts& c = chunks_.at(a.chunk);
    const SampleShape& shape = a.payload == Payload::kActivation ? c.in : c.out;
    p.toPost.push_back(
        {tagOf(a), &shape, in.sizes.at(a.microbatch), label(a.payload == Payload::kActivation ? "act" : "grad", a)});
  }
  for (auto& [key, p] : pending) p.post(window_ > 0 ? window_ : static_cast<int>(p.toPost.size()));

  // Data: inputs on the first virtual stage, labels on the last, read in
  // microbatch order as passes first need them.
  std::vector<data::Batch> batches;
  StepStats stats;
  auto batch = [&](int mb) -> const data::Batch& {
    while (static_cast<int>(batches.size()) <= mb) {
      const auto w0 = traceNowUs();
      data::Batch b = loader_->next();
      b.inputs = b.inputs.to(device_, /*non_blocking=*/true);
      b.labels = b.labels.to(device_, /*non_blocking=*/true);
      if (loader_->lastWaitSeconds() > 1e-4) trace_.record("data wait", "data", TraceThread::kData, w0, traceNowUs());
      stats.wait += loader_->lastWaitSeconds();
      batches.push_back(std::move(b));
    }
    return batches[mb];
  };

  // What passes consume and produce, until used: (chunk, microbatch) ->.
  std::map<std::pair<int, int>, torch::Tensor> inputs, gradOutputs, outputs, gradInputs;
  for (const Action& a : actions) {
    const auto key = std::make_pair(a.chunk, a.microbatch);
    switch (a.kind) {
      case ActionKind::kRecv: {
        Pending& p = pending.at({a.peer, a.payload});
        double waited = 0;
        torch::Tensor t = p.channel->take(tagOf(a), &waited);
        stats.wait += waited;
        if (window_ > 0) p.post(1);
        (a.payload == Payload::kActivation ? inputs : gradOutputs)[key] = std::move(t);
        break;
      }
      case ActionKind::kSend: {
        auto& from = a.payload == Payload::kActivation ? outputs : gradInputs;
        auto it = from.find(key);
        if (it == from.end()) throw std::logic_error(fmt::format("schedule {}: \"{}\" has nothing to send",
                                                                 schedule_.name(), toString(a)));
        channels_.out(a.peer, a.payload)
            .send(tagOf(a), std::move(it->second), label(a.payload == Payload::kActivation ? "act" : "grad", a));
        from.erase(it);
        break;
      }
      case ActionKind::kForward: {
        const bool first = shape_.firstVirtual(a.chunk), last = shape_.lastVirtual(a.chunk);
        torch::Tensor input;
        if (first) {
          input = batch(a.microbatch).inputs;
        } else {
          auto it = inputs.find(key);
          if (it == inputs.end()) throw std::logic_error(fmt::format("schedule {}: \"{}\" has no input",
                                                                     schedule_.name(), toString(a)));
          input = std::move(it->second);
          inputs.erase(it);
        }
        const std::int64_t n = in.sizes.at(a.microbatch);
        const auto c0 = std::chrono::steady_clock::now();
        double loss = 0;
        torch::Tensor out;
        {
          TraceSpan span(trace_, label("forward", a), "compute", TraceThread::kCompute,
                         {{"step", in.step}, {"samples", n}});
          out = chunks_[a.chunk].layers->forward(a.microbatch, input, in.step, in.firstMicrobatch + a.microbatch,
                                                 last ? batch(a.microbatch).labels : torch::Tensor(),
                                                 static_cast<double>(n) / in.stepSamples, &loss);
        }
        stats.compute += since(c0);
        if (last) {
          stats.lossSum += loss * static_cast<double>(n) / in.stepSamples;
          stats.samples += static_cast<double>(n);
        } else {
          outputs[key] = out;
        }
        break;
      }
      case ActionKind::kBackward: {
        torch::Tensor grad;
        if (!shape_.lastVirtual(a.chunk)) {
          auto it = gradOutputs.find(key);
          if (it == gradOutputs.end()) throw std::logic_error(fmt::format("schedule {}: \"{}\" has no gradient",
                                                                          schedule_.name(), toString(a)));
          grad = std::move(it->second);
          gradOutputs.erase(it);
        }
        GradientSync* sync = chunks_[a.chunk].sync;
        const int offset = chunks_[a.chunk].syncOffset;
        const auto c0 = std::chrono::steady_clock::now();
        torch::Tensor gradIn;
        {
          TraceSpan span(trace_, label("backward", a), "compute", TraceThread::kCompute, {{"step", in.step}});
          gradIn = chunks_[a.chunk].layers->backward(
              a.microbatch, grad,
              a.final && sync ? std::function<void(int)>([sync, offset](int l) { sync->layerReady(offset + l); })
                              : std::function<void(int)>());
        }
        stats.compute += since(c0);
        if (!shape_.firstVirtual(a.chunk)) gradInputs[key] = gradIn;
        break;
      }
      case ActionKind::kSyncWait: {
        std::set<GradientSync*> finished;
        for (ChunkParts& c : chunks_) {
          if (!c.sync || !finished.insert(c.sync).second) continue;
          double waited = 0;
          c.sync->finish(&waited);
          stats.allreduce += waited;
        }
        break;
      }
      case ActionKind::kOptimizerStep:
        update_(in.step + a.step);
        break;
    }
  }
  channels_.flush();
  return stats;
}

}  // namespace hydrozoa::runtime
