#include "runtime/schedule/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "plan/cost/round_robin.h"

namespace hydrozoa::runtime {

std::string toString(const Action& a) {
  const std::string chunk = a.chunk > 0 ? fmt::format("c{}", a.chunk) : "";
  const std::string step = a.step != 0 ? fmt::format("@{:+d}", a.step) : "";
  switch (a.kind) {
    case ActionKind::kForward:
      return fmt::format("F{}{}{}", a.microbatch, chunk, step);
    case ActionKind::kBackward:
      return fmt::format("B{}{}{}{}", a.microbatch, chunk, step, a.final ? "*" : "");
    case ActionKind::kRecv:
    case ActionKind::kSend:
      return fmt::format("{} {} mb{} c{}{} {} {}", a.kind == ActionKind::kRecv ? "recv" : "send",
                         a.payload == Payload::kActivation ? "act"
                         : a.payload == Payload::kGradient ? "grad"
                                                           : "control",
                         a.microbatch, a.chunk, step,
                         a.kind == ActionKind::kRecv ? "from" : "to", a.peer);
    case ActionKind::kSyncWait:
      return "sync";
    case ActionKind::kOptimizerStep:
      return "step";
  }
  return "?";
}

Status Schedule::check(const PipelineShape& shape) const {
  if (shape.chunks != 1) {
    return invalidArgument(fmt::format("the {} schedule runs one model chunk per stage, not {}; use --schedule "
                                       "interleaved for more, or leave --chunks out",
                                       name(), shape.chunks));
  }
  return Status();
}

std::vector<Action> Schedule::actions(const PipelineShape& shape) const {
  return lowerFlushed(computeOrder(shape), shape);
}

std::vector<Action> Schedule::actions(const PipelineShape& shape, int /*carried*/, int /*next*/) const {
  return actions(shape);
}

int Schedule::carriedInto(const PipelineShape& /*shape*/, int /*next*/) const { return 0; }

int PipelineShape::downstreamWorkers() const {
  int n = 0;
  for (int s = stage + 1; s < stages; ++s) n += replicasOf(s);
  return n;
}

int PipelineShape::inFlight() const {
  return roundRobin() ? static_cast<int>(plan::roundRobinWindow(stageReplicas, stage)) : stages - stage;
}

int PipelineShape::dealt(int microbatches) const {
  const int r = replicasOf(stage);
  return microbatches > replica ? (microbatches - replica - 1) / r + 1 : 0;
}

PipelineShape PipelineShape::forStep(int microbatches) const {
  PipelineShape shape = *this;
  shape.stepMicrobatches = microbatches;
  shape.microbatches = dealt(microbatches);
  return shape;
}

std::vector<Action> dealtPasses(const std::vector<plan::Pass>& global, const PipelineShape& shape) {
  if (!shape.roundRobin()) return fromPasses(global);
  const int r = shape.replicasOf(shape.stage);
  std::vector<plan::Pass> mine;
  for (plan::Pass p : global) {
    if (p.microbatch % r != shape.replica) continue;
    p.microbatch /= r;
    mine.push_back(p);
  }
  return fromPasses(mine);
}

std::vector<Action> fromPasses(const std::vector<plan::Pass>& passes) {
  std::vector<Action> out;
  out.reserve(passes.size());
  for (const plan::Pass& p : passes) {
    Action a;
    a.kind = p.backward ? ActionKind::kBackward : ActionKind::kForward;
    a.microbatch = p.microbatch;
    a.chunk = p.chunk;
    a.step = p.step;
    out.push_back(a);
  }
  return out;
}

std::vector<Action> lowerFlushed(const std::vector<Action>& compute, const PipelineShape& shape) {
  std::map<int, size_t> lastBackward;  // chunk -> index in `compute`
  for (size_t i = 0; i < compute.size(); ++i) {
    if (compute[i].kind == ActionKind::kBackward) lastBackward[compute[i].chunk] = i;
  }
  auto stageOf = [&](int virtualStage) { return virtualStage % shape.stages; };
  std::vector<Action> out;
  out.reserve(3 * compute.size() + 2);
  for (size_t i = 0; i < compute.size(); ++i) {
    const Action& a = compute[i];
    const int v = shape.virtualStage(a.chunk);
    Action transfer = a;
    if (a.kind == ActionKind::kForward) {
      transfer.payload = Payload::kActivation;
      if (!shape.firstVirtual(a.chunk)) {
        transfer.kind = ActionKind::kRecv;
        transfer.peer = stageOf(v - 1);
        out.push_back(transfer);
      }
      out.push_back(a);
      if (!shape.lastVirtual(a.chunk)) {
        transfer.kind = ActionKind::kSend;
        transfer.peer = stageOf(v + 1);
        out.push_back(transfer);
      }
    } else {
      transfer.payload = Payload::kGradient;
      transfer.final = false;
      if (!shape.lastVirtual(a.chunk)) {
        transfer.kind = ActionKind::kRecv;
        transfer.peer = stageOf(v + 1);
        out.push_back(transfer);
      }
      Action backward = a;
      backward.final = lastBackward[a.chunk] == i;
      out.push_back(backward);
      if (!shape.firstVirtual(a.chunk)) {
        transfer.kind = ActionKind::kSend;
        transfer.peer = stageOf(v - 1);
        out.push_back(transfer);
      }
    }
  }
  out.push_back({ActionKind::kSyncWait});
  Action step{ActionKind::kOptimizerStep};
  step.final = true;
  out.push_back(step);
  return out;
}

std::vector<Action> lowerPerMicrobatch(const std::vector<Action>& compute, const PipelineShape& shape) {
  std::vector<Action> flushed = lowerFlushed(compute, shape);
  flushed.resize(flushed.size() - 2);  // the flush
  std::vector<Action> out;
  out.reserve(flushed.size() + 2 * compute.size());
  for (size_t i = 0; i < flushed.size(); ++i) {
    Action a = flushed[i];
    if (a.kind != ActionKind::kBackward) {
      out.push_back(a);
      continue;
    }
    a.final = true;
    out.push_back(a);
    if (i + 1 < flushed.size() && flushed[i + 1].kind == ActionKind::kSend &&
        flushed[i + 1].payload == Payload::kGradient) {
      out.push_back(flushed[++i]);
    }
    out.push_back({ActionKind::kSyncWait, a.microbatch, a.chunk, a.step});
    out.push_back({ActionKind::kOptimizerStep, a.microbatch, a.chunk, a.step});
  }
  for (auto it = out.rbegin(); it != out.rend(); ++it) {
    if (it->kind == ActionKind::kOptimizerStep) {
      it->final = true;
      break;
    }
  }
  return out;
}

int peakStashed(const std::vector<Action>& actions) {
  int now = 0, peak = 0;
  for (const Action& a : actions) {
    if (a.kind == ActionKind::kForward) peak = std::max(peak, ++now);
    if (a.kind == ActionKind::kBackward) --now;
  }
  return peak;
}

Status verifySchedule(const Schedule& schedule, int stages, int chunks, int microbatches) {
  return verifySteps(schedule, stages, chunks, {microbatches});
}

Status verifySteps(const Schedule& schedule, int stages, int chunks, const std::vector<int>& steps,
                   const std::vector<int>& stageReplicas) {
  const int microbatches = steps.empty() ? 0 : *std::max_element(steps.begin(), steps.end());
  // Keys are by the step's microbatch index (the same as the local one
  // unless round-robin).
  struct StageRun {
    PipelineShape shape;
    std::vector<Action> actions;
    size_t next = 0;
    std::set<std::tuple<int, int, int>> forwarded, backwarded;  // (step, chunk, mb)
    std::set<std::tuple<int, int, int, int>> have;              // received: (payload, step, chunk, mb)
  };
  std::vector<StageRun> runs;
  for (int s = 0; s < stages; ++s) {
    const int replicas = stageReplicas.empty() ? 1 : stageReplicas.at(static_cast<size_t>(s));
    for (int j = 0; j < replicas; ++j) {
      StageRun& run = runs.emplace_back();
      const PipelineShape base{s, stages, chunks, microbatches, stageReplicas, j};
      run.shape = base.forStep(microbatches);
      if (steps.size() == 1 && !schedule.asynchronous()) {
        run.actions = schedule.actions(run.shape);
      } else {
        // Consecutive steps, their actions' steps made absolute.
        int carried = 0;
        for (size_t k = 0; k < steps.size(); ++k) {
          const PipelineShape shape = base.forStep(steps[k]);
          const int next = schedule.asynchronous() && k + 1 < steps.size() ? steps[k + 1] : 0;
          for (Action a : schedule.actions(shape, carried, next)) {
            a.step += static_cast<int>(k);
            run.actions.push_back(a);
          }
          carried = next > 0 ? schedule.carriedInto(shape, next) : 0;
        }
      }
      // Local microbatches to the step's.
      for (Action& a : run.actions) a.microbatch = base.stepMicrobatch(a.microbatch);
    }
  }
  // Messages sent and not yet received: (from, to, payload, step, virtual edge, mb).
  std::multiset<std::tuple<int, int, int, int, int, int>> wire;
  auto edgeOf = [&](const Action& a, const PipelineShape& shape) {
    const int v = shape.virtualStage(a.chunk);
    const bool towardsNext = (a.kind == ActionKind::kSend) == (a.payload == Payload::kActivation);
    return towardsNext ? v : v - 1;  // the edge between virtual stages e and e+1
  };
  auto fail = [&](const StageRun& r, const Action& a, const std::string& why) {
    return internalError(fmt::format("schedule {} ({} stages, {} chunks, {} microbatches): stage {}{} at \"{}\": {}",
                                     schedule.name(), stages, chunks, microbatches, r.shape.stage,
                                     r.shape.roundRobin() ? fmt::format(" replica {}", r.shape.replica) : "",
                                     toString(a), why));
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (StageRun& r : runs) {
      const int s = r.shape.stage;
      while (r.next < r.actions.size()) {
        const Action& a = r.actions[r.next];
        const auto key = std::make_tuple(a.step, a.chunk, a.microbatch);
        const int payload = static_cast<int>(a.payload);
        const bool pass = a.kind != ActionKind::kSyncWait && a.kind != ActionKind::kOptimizerStep;
        const int stepMicrobatches = a.step >= 0 && a.step < static_cast<int>(steps.size()) ? steps[a.step] : 0;
        if (pass && (a.chunk < 0 || a.chunk >= chunks || a.microbatch < 0 || a.microbatch >= stepMicrobatches)) {
          return fail(r, a, "microbatch or chunk out of range");
        }
        if (a.kind == ActionKind::kRecv) {
          const auto msg = std::make_tuple(a.peer, s, payload, a.step, edgeOf(a, r.shape), a.microbatch);
          auto it = wire.find(msg);
          if (it == wire.end()) break;  // waits for the peer
          wire.erase(it);
          r.have.insert({payload, a.step, a.chunk, a.microbatch});
        } else if (a.kind == ActionKind::kSend) {
          const bool produced = a.payload == Payload::kActivation ? r.forwarded.count(key) : r.backwarded.count(key);
          if (!produced) return fail(r, a, "sends what no pass has produced yet");
          wire.insert({s, a.peer, payload, a.step, edgeOf(a, r.shape), a.microbatch});
        } else if (a.kind == ActionKind::kForward) {
          if (!r.shape.firstVirtual(a.chunk) && !r.have.count({0, a.step, a.chunk, a.microbatch})) {
            return fail(r, a, "runs before its input was received");
          }
          if (!r.forwarded.insert(key).second) return fail(r, a, "a second forward pass of one microbatch");
        } else if (a.kind == ActionKind::kBackward) {
          if (!r.forwarded.count(key)) return fail(r, a, "a backward pass before its forward pass");
          if (!r.shape.lastVirtual(a.chunk) && !r.have.count({1, a.step, a.chunk, a.microbatch})) {
            return fail(r, a, "runs before its output's gradient was received");
          }
          if (!r.backwarded.insert(key).second) return fail(r, a, "a second backward pass of one microbatch");
        }
        ++r.next;
        progress = true;
      }
    }
  }
  std::string stuck;
  for (const StageRun& r : runs) {
    if (r.next < r.actions.size()) {
      stuck += fmt::format(" stage {}{} waits at \"{}\";", r.shape.stage,
                           r.shape.roundRobin() ? fmt::format(" replica {}", r.shape.replica) : "",
                           toString(r.actions[r.next]));
    }
  }
  if (!stuck.empty()) {
    return internalError(fmt::format("schedule {} ({} stages, {} chunks, {} microbatches) deadlocks:{}", schedule.name(),
                                     stages, chunks, microbatches, stuck));
  }
  // Every microbatch of every step forward and backward once per stage, over its replicas.
  size_t want = 0;
  for (int m : steps) want += static_cast<size_t>(chunks) * m;
  std::vector<size_t> forwards(static_cast<size_t>(stages)), backwards(static_cast<size_t>(stages));
  for (const StageRun& r : runs) {
    forwards[static_cast<size_t>(r.shape.stage)] += r.forwarded.size();
    backwards[static_cast<size_t>(r.shape.stage)] += r.backwarded.size();
  }
  for (int s = 0; s < stages; ++s) {
    if (forwards[static_cast<size_t>(s)] != want || backwards[static_cast<size_t>(s)] != want) {
      return internalError(fmt::format("schedule {}: stage {} runs {} forward and {} backward passes of the {} it has",
                                       schedule.name(), s, forwards[static_cast<size_t>(s)],
                                       backwards[static_cast<size_t>(s)], want));
    }
  }
  if (!wire.empty()) return internalError(fmt::format("schedule {}: {} messages sent are never received",
                                                      schedule.name(), wire.size()));
  return Status();
}

}  // namespace hydrozoa::runtime
