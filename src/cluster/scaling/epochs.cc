#include "cluster/scaling/epochs.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/limits.h"
#include "data/sampler.h"

namespace hydrozoa::cluster {

EpochSchedule::EpochSchedule(std::int64_t datasetSize, std::int64_t perReplicaBatch, bool dropLast)
    : size_(datasetSize), batch_(perReplicaBatch), dropLast_(dropLast) {
  HZ_CHECK(datasetSize >= 1 && perReplicaBatch >= 1);
}

void EpochSchedule::append(std::int64_t firstEpoch, int replicas, double lrFactor, std::string why, Json plan) {
  HZ_CHECK(replicas >= 1 && firstEpoch >= 0);
  truncateAfter(firstEpoch - 1);
  Segment s;
  s.first_epoch = firstEpoch;
  s.first_step = segments_.empty() ? 0 : epochStart(firstEpoch);
  HZ_CHECK_MSG(!segments_.empty() || firstEpoch == 0, "the first segment begins at epoch 0");
  s.replicas = replicas;
  s.lr_factor = lrFactor;
  s.why = std::move(why);
  s.plan = std::move(plan);
  segments_.push_back(std::move(s));
}

void EpochSchedule::truncateAfter(std::int64_t epoch) {
  while (!segments_.empty() && segments_.back().first_epoch > epoch) segments_.pop_back();
}

std::int64_t EpochSchedule::stepsPerEpoch(int replicas) const {
  // The sampler's count, so the two never disagree.
  data::SamplerOptions o;
  o.dataset_size = size_;
  o.global_batch = replicas * batch_;
  o.replicas = replicas;
  o.microbatch_size = batch_;
  o.drop_last = dropLast_;
  return data::EpochSampler(o).stepsPerEpoch();
}

const Segment& EpochSchedule::atEpoch(std::int64_t epoch) const {
  HZ_CHECK(!segments_.empty());
  auto it = std::upper_bound(segments_.begin(), segments_.end(), epoch,
                             [](std::int64_t e, const Segment& s) { return e < s.first_epoch; });
  return it == segments_.begin() ? segments_.front() : *std::prev(it);
}

const Segment& EpochSchedule::atStep(std::int64_t step) const {
  HZ_CHECK(!segments_.empty());
  auto it = std::upper_bound(segments_.begin(), segments_.end(), step,
                             [](std::int64_t k, const Segment& s) { return k < s.first_step; });
  return it == segments_.begin() ? segments_.front() : *std::prev(it);
}

std::int64_t EpochSchedule::epochStart(std::int64_t epoch) const {
  const Segment& s = atEpoch(epoch);
  // Saturating: a damaged record's epoch 2^40 must not wrap into a "valid" step.
  return saturatingAdd(s.first_step, saturatingMul(epoch - s.first_epoch, stepsPerEpoch(s.replicas)));
}

std::int64_t EpochSchedule::epochOf(std::int64_t step) const {
  const Segment& s = atStep(step);
  return s.first_epoch + (step - s.first_step) / stepsPerEpoch(s.replicas);
}

std::int64_t EpochSchedule::stepInEpoch(std::int64_t step) const {
  const Segment& s = atStep(step);
  return (step - s.first_step) % stepsPerEpoch(s.replicas);
}

Json EpochSchedule::toJson() const {
  Json segs = Json::array();
  for (const Segment& s : segments_) {
    segs.push_back({{"first_epoch", s.first_epoch},
                    {"first_step", s.first_step},
                    {"replicas", s.replicas},
                    {"lr_factor", s.lr_factor},
                    {"why", s.why}});
    if (!s.plan.is_null()) segs.back()["plan"] = s.plan;
  }
  return {{"per_replica_batch", batch_}, {"segments", segs}};
}

Result<EpochSchedule> EpochSchedule::fromJson(const Json& j, std::int64_t datasetSize, bool dropLast) {
  auto bad = [](const std::string& what) {
    return invalidArgument(fmt::format("the checkpoint's scaling record is damaged: {}", what));
  };
  // Read like any file: every field checked, in range, before it is used.
  ObjectReader top(j, "scaling");
  const std::int64_t batch = top.count("per_replica_batch", kSamplesRange);
  const Json& segments = top.array("segments", /*nonEmpty=*/true);
  if (!top.ok()) return bad(top.status().message());
  EpochSchedule s(datasetSize, batch, dropLast);
  std::int64_t last = -1;
  for (size_t i = 0; i < segments.size(); ++i) {
    ObjectReader seg(segments[i], top.element("segments", i));
    const std::int64_t first = seg.count("first_epoch", {0, kStepsRange.max});
    const std::int64_t replicas = seg.count("replicas", kWorkersRange);
    const std::int64_t firstStep = seg.count("first_step", {0, kStepsRange.max});
    const double lr = seg.optNumber("lr_factor").value_or(1.0);
    const std::string why = seg.optString("why").value_or("");
    const Json* plan = seg.raw("plan");
    if (!seg.ok()) return bad(seg.status().message());
    if (!(lr > 0 && lr <= 1e6)) return bad(fmt::format("segments[{}].lr_factor {} is not from 0 to 1e6", i, lr));
    if (first <= last || (last < 0 && first != 0)) {
      return bad("segments must start at epoch 0 and increase");
    }
    s.append(first, static_cast<int>(replicas), lr, why, plan ? *plan : Json());
    if (firstStep != s.segments_.back().first_step) {
      return bad(fmt::format("segment at epoch {} begins at step {}, not {}", first + 1, firstStep,
                             s.segments_.back().first_step));
    }
    last = first;
  }
  return s;
}

}  // namespace hydrozoa::cluster
