// Job: the reliable and transient tiers (NOTE [Evicting at a step
// boundary]): the transient tier's spot market replayed, its eviction
// notices, the step boundary where it leaves and where it comes back
// (coordinator_job.h; cluster/tiers.h; docs/spot.md).
#include "cluster/coordinator_job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

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
// alone, started from that save: nothing is redone. The global batch
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
// in max_recoveries. Gloo's groups cannot shrink, so the reliable workers
// start again with the new generation too (about a second here).

Json Job::tierEvent(const char* name) const {
  const double t = priorSeconds_ + since(trainingStart_);
  return {{"t", t},
          {"event", name},
          {"generation", generation_},
          {"step", reached_},
          {"trace_time", sim::formatTimestamp(tierMarket_->traceTime(t))},
          {"price", tierMarket_->price(t)},
          {"bid", tierMarket_->bid()}};
}

void Job::pollTiers() {
  if (!tierMarket_ || trainingStart_ == Clock::time_point{}) return;
  const double t = priorSeconds_ + since(trainingStart_);
  const int reliable = spec_.tiers.reliable;
  int onDemand = 0, spot = 0;
  for (const auto& w : workers_) {
    if (w.registered && launcher_->alive(w.id)) ++(w.replica < reliable ? onDemand : spot);
  }
  tierMarket_->bill(t, onDemand, spot);
  if (spec_.tiers.transient == 0) return;  // all on demand: nothing to evict
  const bool outbid = tierMarket_->outbid(t);
  switch (tierState_) {
    case TierState::kIn: {
      if (!outbid) return;
      tierState_ = TierState::kNoticed;
      ++tierNotices_;
      noticeDeadline_ = t + spec_.tiers.notice;
      Json event = tierEvent("eviction_notice");
      event["deadline"] = noticeDeadline_;
      report(event);
      progress_.note(fmt::format("Step {}: the spot price rose to ${:.4f}/h, above the bid of ${:.4f}/h: {} "
                                 "evicted {}",
                                 reached_, tierMarket_->price(t), tierMarket_->bid(),
                                 countOf(spec_.tiers.transient, "transient worker is", "transient workers are"),
                                 spec_.tiers.notice > 0 ? "in " + formatSeconds(spec_.tiers.notice) : "now"));
      if (spec_.tiers.notice <= 0) {
        evictTransients("evicted without notice");
      } else {
        issueTierStop();
      }
      return;
    }
    case TierState::kNoticed:
      if (!tierStopIssued_ && spec_.tiers.notice > 0) issueTierStop();
      if (t >= noticeDeadline_) evictTransients("still running at its eviction deadline");
      return;
    case TierState::kOut:
      if (outbid) return;
      tierState_ = TierState::kReturning;
      ++tierReturns_;
      report(tierEvent("transient_tier_available"));
      progress_.note(fmt::format("The spot price fell to ${:.4f}/h, at most the bid: the transient workers come back "
                                 "at the next step boundary",
                                 tierMarket_->price(t)));
      issueTierStop();
      return;
    case TierState::kReturning:
      if (!tierStopIssued_) issueTierStop();
      return;
  }
}

void Job::issueTierStop() {
  if (tierStopIssued_ || !training_ || stopping_ || reinvoking_) return;  // a generation starting: at its start
  const std::int64_t at = std::max(resumeStep_ + 1, agreedStep());
  tierStopIssued_ = true;
  if (at >= genStop_) return;  // this generation ends before that anyway; the next one has the change
  genStop_ = at;
  for (const auto& w : workers_) {
    control_->send(from(w.id), {{"type", "stop"}, {"at_step", at}, {"checkpoint", true}});
  }
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

void Job::tiersAtNewGeneration() {
  if (!tierMarket_) return;
  tierStopIssued_ = false;
  evictedIds_.clear();
  if (tierState_ == TierState::kNoticed) {
    tierState_ = TierState::kOut;
    noticeDeadline_ = -1;
  } else if (tierState_ == TierState::kReturning) {
    tierState_ = TierState::kIn;
  }
}

Json Job::tiersSummary() const {
  Json j = tierMarket_->summary(spec_.tiers.reliable, spec_.tiers.transient);
  j["reliable"] = spec_.tiers.reliable;
  j["transient"] = spec_.tiers.transient;
  j["notice_s"] = spec_.tiers.notice;
  j["eviction_notices"] = tierNotices_;
  j["workers_taken"] = tierTaken_;  // still running at the deadline, or evicted without notice
  j["returns"] = tierReturns_;
  return j;
}

}  // namespace hydrozoa::cluster::coordinator
