// FlexRR's RapidReassignment among the replicas of a data-parallel job
// (seed 002 §3.3; docs/stragglers.md): within a step, a replica that falls
// behind a faster one of its helper group hands it some of its microbatches
// not yet begun, and the helper computes them and adds their gradients to its
// own before the allreduce. Every microbatch is computed exactly once, by
// whoever claims it first, so the allreduce sums the same per-sample
// gradients as without reassignment (NOTE [Reassigned microbatches]).
//
// Messages go through the job's store (the coordinator's, runtime/comm/
// control_store.h), each worker reading its own inbox for the step:
//   report    a helper at its report point (75% of its own microbatches) to
//             its helpees: how far it is;
//   offer     (FlexRR's do-this) a helpee behind that helper by more than the
//             threshold: microbatches [first, last) of its own, from the end;
//   begun     (begun-helping) the helper claimed the first of them: the
//             helpee answers with a follow-up offer while it has more to give;
//   completed (help-completed) the helper's gradients of n of them are in;
//   cancel    (cancel-help) the helpee finished what it kept: offers not yet
//             begun are void, and the helper stops waiting for more (sent
//             to every helper: they wait for it, NOTE [Helpers wait for
//             their helpees]).
// A microbatch's claim is the store's compare-and-set on its key: the helpee
// claims an offered microbatch before running it (which cancels it if no
// helper has begun it), a helper before computing it.
//
//   Reassigner r(store, io, "gen0/flexrr/", replica, replicas, options);
//   r.beginStep(step, microbatchesOfEachReplica);
//   for k in own microbatches: if (r.claimOwn(k)) { run k; } r.ownDone(k);
//   r.finishedOwn();
//   while (auto a = r.nextAssignment()) for k in a->microbatches(): if (r.claimHelp(*a, k)) run it; r.completed(*a)
//   ... allreduce ...; Counts c = r.endStep();
//
// Thread-safety: one compute thread calls the methods above. Two threads of
// the reassigner's own: one sends the messages (the compute thread waits
// only for its claims, and for flush()), one reads the inbox; it decides
// the offers, and after the step's "end" removes the step's keys.
//
// NOTE [A step's FlexRR keys]
// Worker w's keys of step S are <prefix>S/w/: its inbox (n, the counter;
// m0, m1, ... the messages) and the claims of its microbatches (c0, ...).
// Its reader reads step S's inbox up to the "end" w sends itself after S's
// allreduce (what comes later is of no use: S is over), then deletes the
// keys of step S − 1 (one request: the store's delete_prefix). None is
// written after: every worker flushes its sends of step S − 1 when it
// begins S, before S's allreduce, which w's reader is past. The last two
// steps' keys go with the reassigner. Nothing of a step is left behind, and
// no worker waits for a message but its claims.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/comm/control_store.h"

namespace hydrozoa::runtime {

struct ReassignOptions {
  int helper_group = 4;      // helpers per replica (at most replicas − 1)
  double report_at = 0.75;   // a replica reports its progress at this fraction of its microbatches
  double threshold = 0.2;    // behind a helper by more than this fraction of a step: offer it work
  double initial = 0.025;    // the first offer to a helper: this fraction of the step's microbatches (at least 1)
  double follow_up = 0.05;   // each follow-up offer, once the helper has begun
};

// Replica r's helpers: the next helper_group replicas after it, round the
// ring; its helpees: those whose helpers it is.
std::vector<int> helpersOf(int replica, int replicas, int group);
std::vector<int> helpeesOf(int replica, int replicas, int group);

// Microbatches [first, last) of `replica`'s step, offered to this worker.
struct Assignment {
  int replica = 0, first = 0, last = 0;
  std::int64_t seq = 0;  // its sender's order of offers and cancels this step
};

class Reassigner {
 public:
  struct Counts {
    int took = 0;      // microbatches of others this worker computed
    int gave = 0;      // of its own, computed by others
    int offered = 0;   // of its own, offered (some may have come back)
  };
  // `store` for sends and claims, `inbox` (another connection to the same
  // store, whose timeout bounds each wait: a second or so) for the reading
  // thread's waits; keys under `prefix`.
  Reassigner(c10::intrusive_ptr<ControlStore> store, c10::intrusive_ptr<ControlStore> inbox, std::string prefix,
             int replica, int replicas, ReassignOptions options);
  ~Reassigner();
  Reassigner(const Reassigner&) = delete;
  Reassigner& operator=(const Reassigner&) = delete;

  // `microbatches[r]`: replica r's microbatches this step.
  void beginStep(std::int64_t step, std::vector<int> microbatches);
  // Before own microbatch k (in order): false when a helper has it.
  bool claimOwn(int k);
  // Own microbatch k is done (computed here or skipped): progress.
  void ownDone(int k);
  // Every own microbatch is done: cancels what was offered and not begun.
  void finishedOwn();
  // The next offer to take (Algorithm 2: once this worker's own work is
  // done), waiting for one while a helpee has not finished its own work
  // (NOTE [Helpers wait for their helpees]); nullopt once all have.
  std::optional<Assignment> nextAssignment();
  // Claims microbatch k of `a` (false: its owner or another helper has it;
  // the rest of the offer below k is gone too). The first claim of an offer
  // tells the owner "begun".
  bool claimHelp(const Assignment& a, int k);
  // The claimed microbatches of `a` are computed: "completed".
  void completed(const Assignment& a, int computed);
  // Waits until every message queued so far is in the store (beginStep
  // does, for the step before: NOTE [A step's FlexRR keys]).
  void flush();
  // After the step's allreduce: what was reassigned. The reader finishes the
  // step in the background.
  Counts endStep();
  // The job halts (it lost a worker): a helper stops waiting for helpees
  // and offers, a flush for its sends; from any thread.
  void abort();

 private:
  std::string key(std::int64_t step, int owner, const std::string& what) const;
  // Queues a message to `to`'s inbox of this step for the sending thread.
  void send(int to, std::string message);
  void sendNow(std::int64_t step, int to, const std::string& message);
  void sendLoop();
  // Reads step `step`'s inbox up to its "end" (false: stopped first).
  bool readInbox(std::int64_t step);
  void erase(std::int64_t step);
  void handle(std::int64_t step, const std::string& message);
  // Under mu_: offers `count` microbatches from the end of what is still
  // unclaimed and unoffered to `helper`.
  void offerLocked(int helper, int count);

  c10::intrusive_ptr<ControlStore> store_, inbox_;
  std::string prefix_;
  int replica_, replicas_;
  ReassignOptions o_;
  std::vector<int> helpers_, helpees_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::int64_t step_ = -1;
  std::vector<int> sizes_;          // microbatches per replica this step
  int next_ = 0;                    // own microbatches begun (or given up) so far
  int done_ = 0;                    // own microbatches done
  int offeredFrom_ = 0;             // own microbatches >= this were offered
  bool reported_ = false, finished_ = false;
  std::int64_t stepStartUs_ = 0;
  double stepSeconds_ = 0;          // an average of this worker's steps (0: none yet)
  std::set<int> offeredTo_;         // helpers with an offer from here this step
  std::set<int> cancelled_;         // helpees that finished their own work this step
  std::set<int> waitingFor_;        // helpees that have not (NOTE [Helpers wait for their helpees])
  std::set<std::pair<int, int>> begun_;  // offers (helpee, first) this worker began
  std::deque<Assignment> offers_;   // to take once own work is done
  Counts counts_;
  std::int64_t seq_ = 0;            // offers and cancels sent this step
  std::int64_t served_ = -1;        // the step whose inbox the reader reads
  std::int64_t readTo_ = -1;        // the last step read to its "end"
  struct Outgoing {
    std::int64_t step;
    int to;
    std::string message;
  };
  std::deque<Outgoing> outbox_;
  bool sending_ = false;            // the sender holds a message it took from outbox_
  std::thread sender_;
  bool stopping_ = false;
  bool aborted_ = false;
  std::thread reader_;
};

}  // namespace hydrozoa::runtime
