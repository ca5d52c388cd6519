// Job: the reliable and transient tiers (NOTE [Evicting at a step
// boundary]): the transient tier's spot market replayed, its eviction
// notices, the step boundary where it leaves and where it comes back
// (coordinator_job.h; cluster/tiers.h; docs/spot.md).
#include "cluster/coordinator_job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

namespace hydrozoa::cluster::coordinator {

// NOTE [Evicting at a step boundary]
// Each of the job's R + T workers is a data-parallel replica of one stage,
// the R reliable ones replicas 0..R−1 (replica 0 writes the checkpoints and
// every save at a step boundary: the authoritative state stays on the
// reliable tier, AgileML's first stage; with every replica holding the whole
// state, a backup of the transient ones' state on the reliable tier, its
// second stage, is already there). The coordinator replays the transient
// tier's market (cluster/tiers.h). When its price rises above the bid, the
// transient workers get a notice with a deadline (`notice` of wall time):
// the workers are told to stop at a step no worker has begun (agreedStep())
// and save it there, and the next generation is the R reliable replicas
// alone, regrouped in their running processes (or started from that save
// where they cannot regroup): nothing is redone. The global batch
// stays: the reliable replicas take M·(R + T)/R microbatches each, and since
// the sampler cuts a step's samples in order into microbatches of the same
// size wherever the replica boundaries fall, and seeds each by its index in
// the step, the microbatches and their seeds are the same ones: the training
// is the same (the allreduce adds the same gradients in another order).
// When the price falls to the bid again, the transient replicas come back
// the same way at the next step boundary. A worker still running at its
// deadline is taken (SIGKILL), as the cloud would; with `notice: 0` they are
// taken at once. Either way that is a lost worker, recovered from the live
// reliable replicas (NOTE [Recovering from a lost worker]) and not counted
// in max_recoveries. Leaving with notice and coming back, the workers that
// stay regroup without restarting (NOTE [Regrouping at a step boundary]);
// where they cannot, every worker starts again with the new generation
// (seconds here).
//
// NOTE [BidBrain in a live run]
// With `bidder: bidbrain` the coordinator bids as BidBrain (seed 002 §4.3;
// sim/bidbrain.h) in the one market of the tiers: at its decision points
// (every 2 minutes of trace time; right after an eviction, once the
// generation without the evicted workers runs; and in the last 2 minutes,
// or the last wall second, of the held instances' billing hour) it weighs
// the allocations of k transient workers at a bid d above the price of the
// moment by their expected cost per work E = C/W, with β and τ estimated
// from the price history before that moment alone. Holding none, it buys
// the allocation with the lowest E if that is below the on-demand price
// (the reliable workers' E alone); holding some, at the hour's end it keeps
// them, replaces them by an allocation of another size with a lower E, or
// lets them lapse when none lowers E. The counts k are those that the
// replicas can share the step's M·(R + T) microbatches among evenly (R + k
// divides M·(R + T); k = T always can), and a change of k is a new
// generation at a step boundary like an eviction. It holds one allocation at
// a time where the simulator's BidBrain may hold several in several
// markets. And it charges an eviction what it costs this runtime: two
// changes of the transient workers, the evicted leaving and new ones joining
// (each a regroup, NOTE [Regrouping at a step boundary], or a new
// generation of every worker), so W loses β·(R + k)·s, s the two
// stalls as measured in this run (tierEvictionStall(), in trace hours at
// the replay's speed). Without that term, in which an evicted hour is
// free work, BidBrain bids low and pays each eviction in stalls
// (bench/proteus_bench.sh).

// NOTE [Reliable workers that compute nothing]
// AgileML's third stage (seed 002 §4.2.1): from a transient:reliable ratio
// on (the thesis: beyond 15:1; `reliable_idle_ratio`, default 16) the
// reliable machines run no workers, only the servers of the state, which
// at such ratios made them the stragglers. Here every replica holds the
// whole state and there are no servers: the reliable replicas become
// replicas that compute nothing. They get no samples (the sampler's idle
// replicas, data/sampler.h), take part in every allreduce with zero
// gradients and apply the optimizer step, so they hold the same state as
// the others; replica 0 still writes the checkpoints and saves and feeds
// the joiners. The transient replicas take the step's microbatches among
// them: the same global batch in the same microbatches, so the same
// training. Where the transient ones cannot share the step's microbatches
// evenly (or with FlexRR, which balances work among the replicas itself,
// or under an asynchronous schedule), the reliable ones keep computing.
// When transient workers leave or join, the ratio is taken again for the
// new group: evicted, the reliable replicas compute every step again
// (AgileML's first stage), and a return makes them idle at the same
// regroup. In an allreduce nothing on the
// reliable workers grows with the ratio, so the stage pays where they are
// the slower machines (bench/proteus_bench.sh); at equal speeds it costs
// the reliable workers' share of the compute. BidBrain's expected work
// counts them only once the transient ones are evicted (sim::chooseBid).
int Job::idleBeside(int transient) const {
  const int R = spec_.tiers.reliable;
  const double ratio = spec_.tiers.reliable_idle_ratio;
  const bool flushing = plan_.schedule == plan::ScheduleKind::kGPipe || plan_.schedule == plan::ScheduleKind::kOneFOneB;
  if (R < 1 || transient < 1 || ratio <= 0 || static_cast<double>(transient) < ratio * R || spec_.flexrr.enabled ||
      !flushing) {
    return 0;
  }
  const std::int64_t microbatches = static_cast<std::int64_t>(plan_.num_microbatches) * (R + spec_.tiers.transient);
  return microbatches % transient == 0 ? R : 0;
}

void Job::noteIdle() {
  if (idle_ > 0) {
    progress_.note(fmt::format("{} {} the state and {} nothing; the transient replicas take the step's "
                               "microbatches, {} each (AgileML's third stage: {} transient to {} reliable, "
                               "reliable_idle_ratio {})",
                               countOf(idle_, "reliable replica", "reliable replicas"), idle_ == 1 ? "holds" : "hold",
                               idle_ == 1 ? "computes" : "compute", gen_.num_microbatches, tierActive_,
                               spec_.tiers.reliable, spec_.tiers.reliable_idle_ratio));
  } else {
    progress_.note(fmt::format("The reliable replicas compute again ({} transient to {} reliable)", tierActive_,
                               spec_.tiers.reliable));
  }
}

Json Job::tierEvent(const char* name) const {
  const double t = tierWall();
  return {{"t", priorSeconds_ + since(trainingStart_)},  // training seconds, as every event's
          {"event", name},
          {"generation", generation_},
          {"step", reached_},
          {"trace_time", sim::formatTimestamp(tierMarket_->traceTime(t))},
          {"price", tierMarket_->price(t)},
          {"bid", tierMarket_->bid()}};
}

Status Job::openTiers() {
  if (!spec_.tiers.enabled()) return Status();
  HZ_ASSIGN_OR_RETURN(TierMarket market, TierMarket::open(spec_.tiers));
  tierMarket_ = std::move(market);
  tierActive_ = tierTarget_ = spec_.tiers.transient;
  tierBid_ = tierMarket_->bid();
  const bool brain = spec_.tiers.bidder == "bidbrain";
  if (brain && spec_.tiers.transient > 0) {  // its first decision: how many start
    const sim::BidChoice c = chooseTierBid(priorSeconds_);
    tierActive_ = tierTarget_ = c.count;
    tierBid_ = c.bid;
  }
  progress_.note(fmt::format("Tiers: {} on demand at ${}/h and {} {} in {}/{}, its prices replayed {}x from {}",
                             countOf(spec_.tiers.reliable, "reliable replica", "reliable replicas"),
                             tierMarket_->onDemand(), countOf(spec_.tiers.transient, "transient one", "transient ones"),
                             brain ? "bid for by BidBrain" : fmt::format("bidding ${}/h", tierBid_),
                             tierMarket_->market().type, tierMarket_->market().zone, spec_.tiers.speed,
                             spec_.tiers.spot_trace));
  return Status();
}

sim::BidChoice Job::chooseTierBid(Seconds wall) const {
  const int R = spec_.tiers.reliable, T = spec_.tiers.transient;
  const std::int64_t microbatches = static_cast<std::int64_t>(plan_.num_microbatches) * (R + T);
  std::vector<int> counts, idle;
  for (int k = 1; k <= T; ++k) {
    if (microbatches % (R + k - idleBeside(k)) == 0) counts.push_back(k);
    if (idleBeside(k) > 0) idle.push_back(k);
  }
  return sim::chooseBid(tierMarket_->market(), tierMarket_->onDemand(), R, counts, sim::BidBrainOptions{}.deltas,
                        tierMarket_->traceTime(wall), tierEvictionStall() * spec_.tiers.speed / 3600, idle);
}

// What an eviction stalls the job: its two changes of the transient
// workers, each the median of those of its kind measured (the leaves, the
// returns), else of the other kind, else the first generation's start
// (launch to training), else 2 s (what one took on the 2-core machine the
// defaults were set on).
Seconds Job::tierEvictionStall() const {
  Seconds fallback = 2;
  if (trainingStart_ != Clock::time_point{} && launched_ != Clock::time_point{}) {
    fallback = std::chrono::duration<double>(trainingStart_ - launched_).count();
  }
  const std::vector<double>& leaves = tierStalls_[0];
  const std::vector<double>& returns = tierStalls_[1];
  const Seconds leave = !leaves.empty() ? median(leaves) : !returns.empty() ? median(returns) : fallback;
  const Seconds back = !returns.empty() ? median(returns) : !leaves.empty() ? median(leaves) : fallback;
  return leave + back;
}

// The market's clock: training seconds, less those before this run's first
// step was done (on a loaded machine the first step alone took more than
// the 0.25 s after which the tests' replays raise the price).
Seconds Job::tierWall() const {
  return priorSeconds_ + std::max(0.0, since(trainingStart_) - std::max(0.0, tierClockFrom_));
}

void Job::pollTiers() {
  if (!tierMarket_ || trainingStart_ == Clock::time_point{}) return;
  TierMarket& m = *tierMarket_;
  if (!m.started()) {  // the instances' hours begin with the training's first step
    if (reached_ <= startStep_) return;
    tierClockFrom_ = since(trainingStart_);
    const double start = tierWall();
    m.start(start);
    tierPolled_ = start;
    if (tierTarget_ > 0) m.acquire(start, tierTarget_, tierBid_);
  }
  const double t = tierWall();
  m.advance(t);
  if (spec_.tiers.transient == 0) return;  // all on demand: nothing to evict
  // The cloud: the held instances are evicted when the price passes their bid.
  const Seconds polled = std::exchange(tierPolled_, t);
  if (m.held() > 0 && m.outbidBetween(polled, t)) {
    const int held = m.held();
    m.evict(t);
    tierDecideAt_ = t;  // BidBrain decides right after an eviction
    tierTarget_ = 0;
    if (tierActive_ > 0 && noticeDeadline_ < 0 && evictedIds_.empty()) {
      ++tierNotices_;
      Json event = tierEvent("eviction_notice");
      event["deadline"] = event["t"].get<double>() + spec_.tiers.notice;
      event["workers"] = held;
      report(event);
      progress_.note(fmt::format("Step {}: the spot price rose to ${:.4f}/h, above the bid of ${:.4f}/h: {} "
                                 "evicted {}",
                                 reached_, m.price(t), m.bid(),
                                 countOf(tierActive_, "transient worker is", "transient workers are"),
                                 spec_.tiers.notice > 0 ? "in " + formatSeconds(spec_.tiers.notice) : "now"));
      if (spec_.tiers.notice > 0) {
        noticeDeadline_ = t + spec_.tiers.notice;
      } else {
        evictTransients("evicted without notice");  // a lost worker: recovery starts the next generation
      }
    }
  }
  if (noticeDeadline_ >= 0 && t >= noticeDeadline_) evictTransients("still running at its eviction deadline");
  // The bidder, between changes: a change asked for happens first.
  if (!tierStopIssued_ && noticeDeadline_ < 0) {
    if (spec_.tiers.bidder == "bidbrain") {
      bidBrain(t);
    } else if (m.held() == 0 && tierTarget_ == 0 && m.price(t) <= tierBid_) {
      buyTransients(t);
      progress_.note(fmt::format("The spot price fell to ${:.4f}/h, at most the bid: the transient workers come "
                                 "back at the next step boundary",
                                 m.price(t)));
    }
  }
  if ((tierTarget_ != tierActive_ || noticeDeadline_ >= 0) && evictedIds_.empty()) issueTierStop();
}

void Job::bidBrain(Seconds t) {
  TierMarket& m = *tierMarket_;
  const sim::BidBrainOptions defaults;
  if (t < tierDecideAt_) return;
  tierDecideAt_ = t + defaults.decision_interval / spec_.tiers.speed;
  ++tierDecisions_;
  auto decided = [&](const char* what, const sim::BidChoice& c) {
    Json event = tierEvent("bid");
    event["decision"] = what;
    event["workers"] = c.count;
    event["bid"] = c.bid;
    event["cost_per_work"] = c.cost_per_work;
    event["eviction_stall_s"] = tierEvictionStall();
    report(event);
  };
  if (m.lapsing()) return;  // let go at its hour's end; then a new decision
  if (m.held() == 0) {
    const sim::BidChoice c = chooseTierBid(t);
    if (c.count == 0) return;
    m.acquire(t, c.count, c.bid);
    tierTarget_ = c.count;
    ++tierReturns_;
    decided("acquire", c);
    progress_.note(fmt::format("BidBrain: {} at ${:.4f}/h (the price ${:.4f}/h): an expected ${:.4f} per "
                               "instance-hour of work against ${:.4f} on demand",
                               countOf(c.count, "transient worker", "transient workers"), c.bid, m.price(t),
                               c.cost_per_work, m.onDemand()));
    return;
  }
  // Holding some: at their hour's end, keep, resize or let go.
  if (m.hourLeft(t) > std::max(defaults.decision_interval / spec_.tiers.speed, 1.0)) return;
  const double keep = sim::costPerWork(m.market(), m.onDemand(), spec_.tiers.reliable, m.held(), m.bid(),
                                       m.traceTime(t), tierEvictionStall() * spec_.tiers.speed / 3600,
                                       idleBeside(m.held()) > 0);
  const sim::BidChoice c = chooseTierBid(t);
  if (c.count == 0 && keep >= m.onDemand()) {
    m.lapse();
    tierTarget_ = 0;
    decided("lapse", {0, m.bid(), m.onDemand()});
  } else if (c.count > 0 && c.count != m.held() && c.cost_per_work < keep - 1e-12) {
    m.acquire(t, c.count, c.bid);
    tierTarget_ = c.count;
    decided("replace", c);
  }
}

void Job::issueTierStop() {
  if (tierStopIssued_ || !training_ || stopping_ || reinvoking_ || agreeing()) return;  // at its start, or later
  if (tierTarget_ <= tierActive_ && !joining_.empty()) {  // a return called off (evicted again) before it happened
    dropJoiners();
  }
  if (tierTarget_ > tierActive_ && canRegroup(nullptr) && !joinersReady()) return;  // asked again at the next poll
  std::int64_t at = std::max(resumeStep_ + 1, agreedStep());
  tierStopIssued_ = true;
  if (at >= genStop_) return;  // this generation ends before that anyway; the next one has the change
  if (canRegroup(&at)) {
    regroupAt_ = at;
    regroupWorkers_ = spec_.tiers.reliable + tierTarget_;
    const int idle = idleBeside(tierTarget_);
    const std::int64_t microbatches = stepMicrobatches() / (regroupWorkers_ - idle);
    regroupRole_ = {{"type", "regroup"},
                    {"generation", generation_ + 1},
                    {"replicas", regroupWorkers_},
                    {"microbatches", microbatches},
                    {"idle_replicas", idle},
                    {"joiners", static_cast<int>(joining_.size())}};
    std::map<int, Json> messages;
    for (const auto& w : workers_) {
      messages[w.id] = w.replica < regroupWorkers_ ? regroupRole_ : Json{{"type", "stop"}, {"checkpoint", false}};
    }
    propose(
        at, std::move(messages),
        [this](std::int64_t next) {
          if (epochs_.stepInEpoch(next) == 0) ++next;
          regroupAt_ = next;
          completeSteps();  // those the old group did since: a lone worker may have run on
          return next;
        },
        [this] { assignJoiners(); });
    return;
  }
  if (!joining_.empty()) {  // the return happens with the next generation instead
    dropJoiners();
  }
  genStop_ = at;
  proposeStop(at, [this](std::int64_t next) { return genStop_ = next; });
}

void Job::tierChanged(int before, bool regrouped, const Json& extra) {
  const bool left = A_ < before;
  if (idle_ != idleBefore_) noteIdle();
  idleBefore_ = idle_;
  tierChangeFrom_ = lastStepEnd_;  // to the first step (onStepComplete): the change's stall, for BidBrain
  tierChangeLeft_ = left;
  Json event = tierEvent(left ? "transient_tier_left" : "transient_tier_back");
  event["replicas_before"] = before;
  event["replicas"] = A_;
  event["idle_replicas"] = idle_;
  if (regrouped) {
    event["regrouped"] = true;
    ++tierRegroups_;
  }
  event.update(extra);
  report(event);
  const char* how = left ? (regrouped ? "transient workers left at the step boundary; the others regrouped without "
                                        "restarting"
                                      : "transient workers left at the step boundary")
                         : (regrouped ? "transient workers joined the running ones" : "transient workers joined");
  progress_.note(fmt::format("Step {}: {} → {} replicas ({}); nothing redone, the same global batch", reached_, before,
                             A_, how));
}

void Job::evictTransients(const std::string& why) {
  for (const auto& w : workers_) {
    if (w.replica < spec_.tiers.reliable || !launcher_->alive(w.id) || evictedIds_.count(w.id)) continue;
    spdlog::info("{}: {}", w.name(), why);
    evictedIds_.insert(w.id);
    ++tierTaken_;
    launcher_->signal(w.id, /*force=*/true);
  }
}

void Job::buyTransients(Seconds t) {
  tierMarket_->acquire(t, spec_.tiers.transient, tierBid_);
  tierTarget_ = spec_.tiers.transient;
  ++tierReturns_;
  report(tierEvent("transient_tier_available"));
}

Status Job::tiersAtNewGeneration(int active) {
  if (!tierMarket_) return Status();
  tierStopIssued_ = false;
  regroupAt_ = -1;
  const bool taken = !evictedIds_.empty();
  evictedIds_.clear();
  noticeDeadline_ = -1;
  tierActive_ = active >= 0 ? active : tierTarget_;
  // Every worker gone: the run waits for the price, if it has not fallen
  // already while this generation was being recovered.
  if (spec_.tiers.reliable + tierActive_ == 0 || (spec_.tiers.reliable == 0 && taken)) return waitForTransients();
  return Status();
}

// NOTE [Checkpoint-restart]
// Tiers that are all transient (reliable 0, checkpoint_restart: true) are
// the usual way to train on spot instances, and the baseline Proteus
// measures itself against: the state lives in the checkpoints (here the run
// directory stands in for the cloud's object store). Evicted with notice,
// the workers stop at a step boundary and save it there (as above);
// without, they are taken and the run restores from its last checkpoint,
// redoing the steps since. Either way no worker is left, so the run waits,
// billing nothing but the clock, until the price falls to the bid; then it
// buys the T workers again and a new generation restores the checkpoint
// from disk. A trace whose last price stays above the bid ends the run,
// resumable from that checkpoint.
Status Job::waitForTransients() {
  TierMarket& m = *tierMarket_;
  const double from = tierWall();
  Json left = tierEvent("transient_tier_left");
  left["replicas"] = 0;
  report(left);
  progress_.note(fmt::format("Step {}: every worker was transient and is gone; the state is in the checkpoint at "
                             "step {}: waiting for the spot price (${:.4f}/h) to fall to the bid (${:.4f}/h)",
                             reached_, reached_, m.price(from), tierBid_));
  const Seconds lastRecord = m.market().prices.empty() ? 0 : m.market().prices.back().first;
  for (;;) {
    const double t = tierWall();
    m.advance(t);
    if (m.price(t) <= tierBid_) {
      tierWaited_ += t - from;
      if (m.held() == 0) buyTransients(t);  // else bought back while the lost ones were recovered
      tierActive_ = tierTarget_;
      progress_.note(fmt::format("The spot price fell to ${:.4f}/h after {} ({:.1f} h of the trace): {} restart "
                                 "from the checkpoint",
                                 m.price(t), formatSeconds(t - from), (t - from) * spec_.tiers.speed / 3600,
                                 countOf(spec_.tiers.transient, "transient worker", "transient workers")));
      return Status();
    }
    if (interruptAsked()) {
      interrupted_ = true;
      return failure("interrupted while waiting for the spot price to fall");
    }
    if (m.traceTime(t) >= lastRecord) {
      return failure(fmt::format("the spot price of {}/{} stays at ${:.4f}/h, above the bid of ${:.4f}/h, to the end "
                                 "of {}: no transient worker can run; resume from the checkpoint at step {} with a "
                                 "higher bid or another trace (hydrozoa train --resume {})",
                                 m.market().type, m.market().zone, m.price(t), tierBid_, spec_.tiers.spot_trace,
                                 reached_, run_.root()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Json Job::tiersSummary() const {
  Json j = tierMarket_->summary(spec_.tiers.reliable, spec_.tiers.transient);
  j["reliable"] = spec_.tiers.reliable;
  j["transient"] = spec_.tiers.transient;
  j["bidder"] = spec_.tiers.bidder;
  j["notice_s"] = spec_.tiers.notice;
  j["eviction_notices"] = tierNotices_;
  j["workers_taken"] = tierTaken_;  // still running at the deadline, or evicted without notice
  j["returns"] = tierReturns_;      // the transient tier (re)acquired
  if (spec_.tiers.bidder == "bidbrain") j["decisions"] = tierDecisions_;
  // Per change of the transient workers: last step before it to first after.
  if (!tierStalls_[0].empty()) j["leave_stall_s"] = median(tierStalls_[0]);
  if (!tierStalls_[1].empty()) j["return_stall_s"] = median(tierStalls_[1]);
  j["regroups"] = tierRegroups_;
  if (spec_.tiers.checkpoint_restart) {
    j["checkpoint_restart"] = true;
    j["waited_trace_hours"] = tierWaited_ * spec_.tiers.speed / 3600;
  }
  return j;
}

}  // namespace hydrozoa::cluster::coordinator
