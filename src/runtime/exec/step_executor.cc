#include "runtime/exec/step_executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <functional>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>

#include "model/tensor_parallel.h"
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

// NOTE [Scatter/gather of stage boundaries]
// Under tensor parallelism every worker of a stage's tensor group holds the
// same boundary tensor: a stage ends on the output of g or of a replicated
// layer (model/tensor_parallel.h), and the gradient of a stage's input is
// the same on every slice too (f's allreduce leaves one sum on all of
// them). Sent whole from each of the t slices to its counterpart, it
// crosses the stages' link t times. With scatter/gather (PTD-P §4.4.1)
// slice i sends only part i of t of the flattened tensor to slice i of the
// neighbouring stage (equal parts: a boundary is b·s·h and t divides h,
// model/arch.h checkTensorParallel), and the receiving group all-gathers
// the parts over its tensor group — the fast link — so the stages' link
// carries each boundary once. The tensor each slice then holds is the sent
// one, element for element. The all-gather runs on the compute thread
// where the schedule takes the receive: every slice runs the same actions,
// so the group's collectives come in the same order on all of them.
// Evaluation sends boundaries whole.
std::int64_t partOf(std::int64_t elements, int parts) {
  if (elements % parts != 0) {
    throw std::logic_error(fmt::format("a stage boundary of {} elements does not split into {} equal parts for "
                                       "scatter/gather: run without it",
                                       elements, parts));
  }
  return elements / parts;
}

torch::Tensor boundaryPart(const torch::Tensor& whole, int rank, int parts) {
  const torch::Tensor flat = whole.reshape(-1);
  const std::int64_t part = partOf(flat.numel(), parts);
  return flat.narrow(0, rank * part, part);
}

torch::Tensor wholeBoundary(model::TensorGroup& group, const torch::Tensor& part, const SampleShape& shape,
                            std::int64_t samples) {
  return torch::cat(group.allgather(part)).view(shape.sizes(samples));
}


}  // namespace

std::vector<std::int64_t> SampleShape::sizes(std::int64_t n) const {
  std::vector<std::int64_t> s = {n};
  s.insert(s.end(), dims.begin(), dims.end());
  return s;
}

torch::Tensor SampleShape::buffer(std::int64_t n) const {
  return torch::empty(sizes(n), torch::TensorOptions().dtype(dtype).device(device));
}

torch::Tensor SampleShape::partBuffer(std::int64_t n, int parts) const {
  const std::vector<std::int64_t> s = sizes(n);
  const std::int64_t elements = std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>());
  return torch::empty({partOf(elements, parts)}, torch::TensorOptions().dtype(dtype).device(device));
}

// -------------------------------------------------------------- StepExecutor

StepExecutor::StepExecutor(const Schedule& schedule, PipelineShape shape,
                           std::vector<std::vector<ChunkParts>> versions, Channels& channels,
                           data::PrefetchLoader* loader, torch::Device device, TraceRecorder& trace,
                           Update update, std::function<bool(bool)> agree)
    : schedule_(schedule),
      shape_(shape),
      versions_(std::move(versions)),
      channels_(channels),
      loader_(loader),
      device_(device),
      trace_(trace),
      update_(std::move(update)),
      agree_(std::move(agree)),
      window_(schedule.receiveWindow()) {
  if (versions_.empty()) throw std::logic_error("a step executor needs the stage's chunks");
  if (const char* w = std::getenv("HYDROZOA_RECEIVE_WINDOW"); w && *w) window_ = std::max(0, std::atoi(w));
}

// NOTE [Vertical sync]
// Under pipedream-vs every stage runs a microbatch on the version stage 0
// ran it on. Stage 0 keeps p microbatches in flight, so its j-th
// microbatch since the pipeline last drained enters after max(0, j − p + 1)
// of the updates since then, on every replica alike; each stage counts its
// own microbatches the same way and takes that version from its ring of p
// (version u in copy u mod p), which still holds it: a later stage is at
// most s updates ahead of stage 0 and keeps p − s microbatches in flight.
int StepExecutor::versionOf(const Action& a, std::int64_t step, const PassKey& key) {
  const auto V = static_cast<std::int64_t>(versions_.size());
  if (V == 1) return 0;
  if (!schedule_.updatePerMicrobatch()) return static_cast<int>(step % V);
  if (a.kind == ActionKind::kForward && schedule_.verticalSync()) {
    const std::int64_t j = segmentMicrobatches_ + (a.step ? stepMicrobatches_ : 0) + a.microbatch;
    const std::int64_t v = segmentStart_ + std::max<std::int64_t>(0, j - (shape_.stages - 1));
    HZ_CHECK_MSG(v <= updates_ && updates_ - v < V, "vertical sync: a version no longer kept");
    return versionOf_[key] = static_cast<int>(v % V);
  }
  if (a.kind == ActionKind::kForward) return versionOf_[key] = static_cast<int>(updates_ % V);
  auto it = versionOf_.find(key);
  return it != versionOf_.end() ? it->second : static_cast<int>(updates_ % V);  // an empty update: the latest
}

void StepExecutor::openChannels() {
  const bool async = schedule_.asynchronous();
  for (const Action& a : schedule_.actions(shape_, 0, async ? shape_.orderMicrobatches() : 0)) {
    if (a.kind == ActionKind::kRecv) channels_.in(a.peer, shape_.onPeer(a.peer, a.microbatch).first, a.payload);
    if (a.kind == ActionKind::kSend) channels_.out(a.peer, shape_.onPeer(a.peer, a.microbatch).first, a.payload);
  }
  if (async && shape_.stage > 0) channels_.in(shape_.stage - 1, speaker(shape_, shape_.stage - 1), Payload::kControl);
  if (async && shape_.stage + 1 < shape_.stages) {
    for (int j : listeners(shape_, shape_.stage + 1)) channels_.out(shape_.stage + 1, j, Payload::kControl);
  }
}

// The receives of one step on one channel, in the order the schedule takes
// them; at most the window posted and not yet taken. The next step's are
// held back until the pipeline is known not to drain (and dropped if it
// does): a receive posted for a transfer that never comes would take the
// tag of the next step's.
struct StepExecutor::Pending {
  struct Receive {
    int tag;
    const SampleShape* shape;
    std::int64_t samples;
    std::string label;
    bool next;  // of the next step
  };
  Inbound* channel = nullptr;
  int parts = 1;  // > 1: each receive is one part of the boundary (NOTE [Scatter/gather of stage boundaries])
  std::deque<Receive> toPost;
  int posted = 0;  // posted and not yet taken

  void post(int window, bool nextAllowed) {
    while (!toPost.empty() && (window <= 0 || posted < window) && (nextAllowed || !toPost.front().next)) {
      const Receive& r = toPost.front();
      channel->expect(r.tag, r.tag, parts == 1 ? r.shape->buffer(r.samples) : r.shape->partBuffer(r.samples, parts),
                      r.label);
      toPost.pop_front();
      ++posted;
    }
  }
  void dropNext() {
    toPost.erase(std::remove_if(toPost.begin(), toPost.end(), [](const Receive& r) { return r.next; }), toPost.end());
  }
};

// NOTE [Draining an asynchronous pipeline]
// Whether a step begins the next one (or the pipeline drains after it, for
// an epoch's end, a checkpoint, a stop) must be the same on every stage and
// every replica, or a stage would wait for a transfer that never comes. The
// coordinator's requests reach the workers at different moments, so one
// worker decides: stage 0, at the start of the step (with its replicas, the
// first to wish it has them all drain: agree()). It sends its word down the
// pipeline on a channel of its own; each stage takes it before its first
// pass of the next step (or at the end of its step if it has none) and
// passes it on. A stage's actions are the same either way up to that point:
// draining only leaves out the next step's passes and their transfers. A
// worker stops, evaluates or saves only after a step that drained.
StepStats StepExecutor::run(const StepInput& in) {
  const int M = static_cast<int>(in.sizes.size());
  stepMicrobatches_ = M;
  const bool async = schedule_.asynchronous();
  // Round-robin, a step's and the next's microbatches are counted over all
  // of the stage's replicas.
  const bool dealt = shape_.roundRobin();
  const int K = dealt ? in.stepMicrobatches : M;
  const int next = !async ? 0 : dealt ? in.nextStepMicrobatches : static_cast<int>(in.nextSizes.size());
  PipelineShape stepShape = shape_;
  stepShape.microbatches = M;
  stepShape.stepMicrobatches = K;
  auto found = actions_.find({M, K, carried_, next});
  if (found == actions_.end()) {
    found = actions_.emplace(std::make_tuple(M, K, carried_, next), schedule_.actions(stepShape, carried_, next)).first;
  }
  const std::vector<Action>& actions = found->second;
  const bool chunked = shape_.chunks > 1;
  const bool words = async && shape_.stages > 1;  // the drain word travels
  // Traced by the step's index of the microbatch (round-robin: the same on every stage).
  auto label = [&](const char* what, const Action& a) {
    const std::string step = a.step ? fmt::format(" s{}", in.step + a.step) : "";
    const int mb = shape_.stepMicrobatch(a.microbatch);
    return chunked ? fmt::format("{} mb{} c{}{}", what, mb, a.chunk, step) : fmt::format("{} mb{}{}", what, mb, step);
  };
  // A transfer is tagged with the microbatch's index on the receiver.
  auto tagOf = [&](const Action& a) {
    const int mb = a.kind == ActionKind::kSend ? shape_.onPeer(a.peer, a.microbatch).second : a.microbatch;
    return transferTag(a.payload == Payload::kGradient, mb, edgeChunk(edgeOf(a, shape_), shape_.stages),
                       in.step + a.step);
  };
  auto peerOf = [&](const Action& a) { return shape_.onPeer(a.peer, a.microbatch).first; };
  auto sizeOf = [&](const Action& a) { return (a.step ? in.nextSizes : in.sizes).at(a.microbatch); };
  // What a receive brings, per sample (every version's shapes are the same).
  auto shapeOf = [&](const Action& a) -> const SampleShape& {
    const ChunkParts& c = versions_.front().at(a.chunk);
    return a.payload == Payload::kActivation ? c.in : c.out;
  };

  // Receives, per channel in the order taken; the first few posted now.
  std::map<std::tuple<int, int, Payload>, Pending> pending;
  for (const Action& a : actions) {
    if (a.kind != ActionKind::kRecv) continue;
    Pending& p = pending[{a.peer, peerOf(a), a.payload}];
    p.channel = &channels_.in(a.peer, peerOf(a), a.payload);
    if (scatter_) p.parts = scatter_->size();
    const SampleShape& shape = shapeOf(a);
    p.toPost.push_back({tagOf(a), &shape, sizeOf(a), label(a.payload == Payload::kActivation ? "act" : "grad", a),
                        a.step != 0});
  }

  // The drain decision (NOTE above): known now on stage 0, from upstream
  // on the others.
  std::optional<bool> drain;
  const int word = drainTag(in.step);
  auto sendWord = [&](bool d) {
    if (shape_.stage + 1 == shape_.stages) return;
    for (int j : listeners(shape_, shape_.stage + 1)) {
      channels_.out(shape_.stage + 1, j, Payload::kControl)
          .send(word, torch::full({1}, d ? 1 : 0, torch::TensorOptions(torch::kLong).device(device_)), "drain");
    }
  };
  Inbound* wordFrom =
      async && shape_.stage > 0 ? &channels_.in(shape_.stage - 1, speaker(shape_, shape_.stage - 1), Payload::kControl)
                                : nullptr;
  if (!async) {
    drain = true;
  } else if (shape_.stage == 0) {
    bool d = in.drain || next == 0;
    if (agree_) d = agree_(d);
    drain = d;
    if (words) sendWord(d);
  } else {
    wordFrom->expect(word, word, torch::empty({1}, torch::TensorOptions(torch::kLong).device(device_)), "drain");
  }
  auto decide = [&] {
    if (drain) return;
    double waited = 0;
    const torch::Tensor w = wordFrom->take(word, &waited);
    drain = w.cpu().item<std::int64_t>() != 0;
    sendWord(*drain);
    for (auto& [key, p] : pending) {
      if (*drain) p.dropNext();
      p.post(window_, true);
    }
  };
  for (auto& [key, p] : pending) p.post(window_, drain.has_value() && !*drain);

  // Data: inputs on the first virtual stage, labels on the last, read in
  // microbatch order (across steps) as passes first need them.
  StepStats stats;
  auto batch = [&](std::int64_t step, int mb) -> const data::Batch& {
    std::vector<data::Batch>& read = batches_[step];
    while (static_cast<int>(read.size()) <= mb) {
      const auto w0 = traceNowUs();
      data::Batch b = loader_->next();
      b.inputs = b.inputs.to(device_, /*non_blocking=*/true);
      b.labels = b.labels.to(device_, /*non_blocking=*/true);
      if (loader_->lastWaitSeconds() > 1e-4) trace_.record("data wait", "data", TraceThread::kData, w0, traceNowUs());
      stats.wait += loader_->lastWaitSeconds();
      read.push_back(std::move(b));
    }
    return read[static_cast<size_t>(mb)];
  };
  auto missing = [&](const Action& a, const char* what) {
    return std::logic_error(fmt::format("schedule {}: \"{}\" {}", schedule_.name(), toString(a), what));
  };

  // A replica with fewer microbatches than the others (an epoch's short
  // last step) joins their per-microbatch allreduces with nothing: empty
  // updates after its own, the last of them the step's last.
  const bool perMicrobatch = schedule_.updatePerMicrobatch();
  // NOTE [Updates over unevenly replicated stages]
  // With an update per microbatch, update u of stage s sums microbatch u of
  // each of its r_s replicas, and stages replicated differently sum
  // different microbatches: the loss (on the last stage) cannot weigh each
  // microbatch by its update's samples on every stage. So round-robin, a
  // microbatch's loss is weighed by the step's samples, as under a flush,
  // and each stage scales update u by the step's samples over update u's:
  // the update is the samples' mean gradient, as with every stage alike.
  const bool regroup = perMicrobatch && dealt;
  const std::vector<Action>* steps = &actions;
  std::vector<Action> padded;
  if (perMicrobatch && M < in.updates) {
    padded = actions;
    for (Action& a : padded) a.final = a.final && a.kind != ActionKind::kOptimizerStep;
    for (int mb = M; mb < in.updates; ++mb) {
      padded.push_back({ActionKind::kSyncWait, mb});
      padded.push_back({ActionKind::kOptimizerStep, mb});
    }
    padded.back().final = true;
    steps = &padded;
  }
  for (const Action& a : *steps) {
    if (a.step != 0) {
      decide();
      if (*drain) continue;
    }
    const std::int64_t step = in.step + a.step;
    const PassKey key{step, a.chunk, a.microbatch};
    // The chunk holds a pass's activations under this (two steps' passes
    // are in flight at once under an asynchronous schedule, the next's
    // microbatch indices among this one's).
    const int cached = a.microbatch * 4 + static_cast<int>(step & 3);
    const bool pass = a.kind == ActionKind::kForward || a.kind == ActionKind::kBackward;
    const ChunkParts& part = versions_[static_cast<size_t>(pass ? versionOf(a, step, key) : 0)].at(
        static_cast<size_t>(a.chunk));
    switch (a.kind) {
      case ActionKind::kRecv: {
        Pending& p = pending.at({a.peer, peerOf(a), a.payload});
        double waited = 0;
        torch::Tensor t = p.channel->take(tagOf(a), &waited);
        stats.wait += waited;
        --p.posted;
        p.post(window_, drain.has_value() && !*drain);
        if (scatter_) {
          const auto g0 = std::chrono::steady_clock::now();
          TraceSpan span(trace_, label(a.payload == Payload::kActivation ? "gather act" : "gather grad", a), "tensor",
                         TraceThread::kCompute);
          t = wholeBoundary(*scatter_, t, shapeOf(a), sizeOf(a));
          stats.wait += since(g0);
        }
        (a.payload == Payload::kActivation ? inputs_ : gradOutputs_)[key] = std::move(t);
        break;
      }
      case ActionKind::kSend: {
        auto& from = a.payload == Payload::kActivation ? outputs_ : gradInputs_;
        auto it = from.find(key);
        if (it == from.end()) throw missing(a, "has nothing to send");
        torch::Tensor t = std::move(it->second);
        if (scatter_) t = boundaryPart(t, scatter_->rank(), scatter_->size());
        channels_.out(a.peer, peerOf(a), a.payload)
            .send(tagOf(a), std::move(t), label(a.payload == Payload::kActivation ? "act" : "grad", a));
        from.erase(it);
        break;
      }
      case ActionKind::kForward: {
        const bool first = shape_.firstVirtual(a.chunk), last = shape_.lastVirtual(a.chunk);
        torch::Tensor input;
        if (first) {
          input = batch(step, a.microbatch).inputs;
        } else {
          auto it = inputs_.find(key);
          if (it == inputs_.end()) throw missing(a, "has no input");
          input = std::move(it->second);
          inputs_.erase(it);
        }
        const std::int64_t n = sizeOf(a);
        // The loss weights' N: the step's samples, or with an update per
        // microbatch, the microbatch's over all replicas (NOTE above).
        const double samples = regroup || !perMicrobatch
                                   ? (a.step ? in.nextStepSamples : in.stepSamples)
                                   : (a.step ? in.nextMicrobatchSamples : in.microbatchSamples).at(a.microbatch);
        const auto c0 = std::chrono::steady_clock::now();
        double loss = 0;
        torch::Tensor out;
        {
          TraceSpan span(trace_, label("forward", a), "compute", TraceThread::kCompute,
                         {{"step", step}, {"samples", n}});
          out = part.layers->forward(cached, input, step, in.firstMicrobatch + shape_.stepMicrobatch(a.microbatch),
                                     last ? batch(step, a.microbatch).labels : torch::Tensor(),
                                     static_cast<double>(n) / samples, &loss);
        }
        stats.compute += since(c0);
        if (afterPass_) afterPass_(since(c0));
        if (last) {
          if (a.step != 0) throw missing(a, "computes a loss of the next step");  // no schedule does
          stats.lossSum += loss * static_cast<double>(n) / in.stepSamples;
          stats.samples += static_cast<double>(n);
        } else {
          outputs_[key] = out;
        }
        break;
      }
      case ActionKind::kBackward: {
        torch::Tensor grad;
        if (!shape_.lastVirtual(a.chunk)) {
          auto it = gradOutputs_.find(key);
          if (it == gradOutputs_.end()) throw missing(a, "has no gradient");
          grad = std::move(it->second);
          gradOutputs_.erase(it);
        }
        GradientSync* sync = part.sync;
        const int offset = part.syncOffset;
        const auto c0 = std::chrono::steady_clock::now();
        torch::Tensor gradIn;
        {
          TraceSpan span(trace_, label("backward", a), "compute", TraceThread::kCompute, {{"step", step}});
          gradIn = part.layers->backward(
              cached, grad,
              a.final && sync ? std::function<void(int)>([sync, offset](int l) { sync->layerReady(offset + l); })
                              : std::function<void(int)>());
        }
        stats.compute += since(c0);
        if (afterPass_) afterPass_(since(c0));
        if (!shape_.firstVirtual(a.chunk)) gradInputs_[key] = gradIn;
        break;
      }
      case ActionKind::kSyncWait: {
        // Every stage takes the word, and passes it on, before its flush.
        if (!perMicrobatch) decide();
        std::set<GradientSync*> finished;
        for (const ChunkParts& c : versions_[static_cast<size_t>(versionOf(a, step, key))]) {
          if (!c.sync || !finished.insert(c.sync).second) continue;
          double waited = 0;
          c.sync->finish(&waited);
          stats.allreduce += waited;
        }
        break;
      }
      case ActionKind::kOptimizerStep: {
        const int from = versionOf(a, step, key);
        versionOf_.erase(key);
        ++updates_;
        const int to = perMicrobatch ? static_cast<int>(updates_ % static_cast<std::int64_t>(versions_.size())) : from;
        double scale = 1;
        if (regroup) {
          scale = (a.step ? in.nextStepSamples : in.stepSamples) /
                  (a.step ? in.nextMicrobatchSamples : in.microbatchSamples).at(a.microbatch);
        }
        update_(step, from, to, a.final, scale);
        break;
      }
    }
  }
  decide();
  batches_.erase(batches_.begin(), batches_.upper_bound(in.step));
  drained_ = *drain;
  segmentMicrobatches_ += M;
  if (drained_) {
    segmentStart_ = updates_;
    segmentMicrobatches_ = 0;
    carried_ = 0;
    // Everything sent has left (the next step's sends, when it was begun,
    // complete once its receives are posted there).
    channels_.flush();
  } else {
    carried_ = schedule_.carriedInto(stepShape, next);
  }
  return stats;
}

}  // namespace hydrozoa::runtime
