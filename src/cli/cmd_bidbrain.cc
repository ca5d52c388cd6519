// `hydrozoa simulate --bidbrain`: Proteus's BidBrain replayed on a spot
// price history against on-demand, spot with checkpoint-restart and a
// fixed bid (docs/spot.md).
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <map>
#include <sstream>
#include <utility>

#include "cli/cmd_bidbrain.h"
#include "cli/common.h"
#include "cli/torch_side.h"
#include "cluster/job_spec.h"
#include "core/table.h"
#include "plan/resources.h"
#include "sim/bidbrain.h"

namespace hydrozoa::cli {

namespace {

// The job's samples: max_steps × global batch, or its epochs over its
// training set (opened to count it).
Result<double> jobSamples(const cluster::JobSpec& spec) {
  if (spec.max_steps) return static_cast<double>(*spec.max_steps) * static_cast<double>(spec.global_batch);
  HZ_ASSIGN_OR_RETURN(const std::int64_t size, trainingSetSize(spec));
  return static_cast<double>(spec.epochs) * static_cast<double>(size);
}

// "c4.xlarge=0.199,c4.2xlarge=0.398" -> {type: value}, each positive.
Result<std::map<std::string, double>> parseTypeValues(const std::string& text, const std::string& flag,
                                                      const std::string& example) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const auto eq = item.find('=');
    char* end = nullptr;
    const double v = eq == std::string::npos ? NAN : std::strtod(item.c_str() + eq + 1, &end);
    if (eq == 0 || eq == std::string::npos || !end || *end != '\0' || !(v > 0 && v < 1e5)) {
      return invalidArgument(fmt::format("{}: \"{}\" is not {}", flag, item, example));
    }
    out[item.substr(0, eq)] = v;
  }
  return out;
}

// ν of each type of the history: --work-rate, else its vCPUs in the aws-vm
// catalog (as the thesis sets ν); an error naming the fix for a type with
// neither.
Result<std::map<std::string, double>> workRates(const sim::SpotHistory& h, const std::string& flag) {
  HZ_ASSIGN_OR_RETURN(auto rates, parseTypeValues(flag, "--work-rate", "TYPE=WORK_PER_HOUR (c4.xlarge=4)"));
  HZ_ASSIGN_OR_RETURN(const plan::Catalog aws, plan::loadCatalog("aws-vm"));
  // The types it may buy (one without an on-demand price is refused by
  // compareBidding, naming the fix for that first).
  for (const auto& [type, usd] : h.on_demand) {
    if (rates.count(type)) continue;
    for (const auto& vm : aws.instances) {
      if (vm.name == type && vm.vcpus > 0) rates[type] = vm.vcpus;
    }
    if (!rates.count(type)) {
      return invalidArgument(fmt::format("no work rate for {}: BidBrain weighs each type by the work an instance of "
                                         "it does in an hour (ν; the thesis uses its vCPUs): add --work-rate {}=N "
                                         "(its vCPUs, or its measured samples/s)",
                                         type, type));
    }
  }
  return rates;
}

}  // namespace

Status runBidBrain(const BidBrainArgs& a) {
  sim::SpotHistory history;
  if (a.synthetic_days > 0) {
    if (!a.spot_trace.empty()) return invalidArgument("give --spot-trace or --synthetic-spot-days, not both");
    if (a.synthetic_days > 366) return invalidArgument("--synthetic-spot-days must be at most 366");
    sim::SpotGenOptions g;
    g.days = a.synthetic_days;
    g.seed = a.seed;
    history = sim::generateSpotHistory(g);
  } else if (!a.spot_trace.empty()) {
    HZ_ASSIGN_OR_RETURN(history, sim::loadSpotHistory(a.spot_trace));
  } else {
    return invalidArgument("--bidbrain needs a spot price history: --spot-trace FILE (the cloud's export, "
                           "docs/spot.md) or --synthetic-spot-days N");
  }
  HZ_ASSIGN_OR_RETURN(const auto prices,
                      parseTypeValues(a.on_demand, "--on-demand", "TYPE=USD_PER_HOUR (c4.xlarge=0.199)"));
  for (const auto& [type, usd] : prices) history.on_demand[type] = usd;
  if (!a.write_spot_trace.empty()) {
    HZ_RETURN_IF_ERROR(writeFileAtomically(a.write_spot_trace, sim::spotHistoryToJson(history).dump(1) + "\n"));
  }
  sim::BidBrainJob job;
  HZ_ASSIGN_OR_RETURN(job.work_rate, workRates(history, a.work_rate));
  HZ_ASSIGN_OR_RETURN(const auto tiers, sim::parseTiers(a.tiers, "--tiers"));
  job.reliable = tiers.first;
  job.transient = tiers.second;
  std::string source;
  if (a.work_hours > 0) {
    job.work_hours = a.work_hours;
    source = fmt::format("{:g} instance-hours of work", a.work_hours);
  } else if (!a.job.empty()) {
    HZ_ASSIGN_OR_RETURN(cluster::JobSpec spec, cluster::loadJobSpec(a.job));
    if (!(a.samples_per_s > 0 && a.samples_per_s < 1e9)) return invalidArgument("--samples-per-s must be positive");
    HZ_ASSIGN_OR_RETURN(const double samples, jobSamples(spec));
    job.work_hours = samples / a.samples_per_s / 3600;
    source = fmt::format("{}: {:.0f} samples at {:g} samples/s per instance = {:.3g} instance-hours", a.job, samples,
                         a.samples_per_s, job.work_hours);
  } else {
    return invalidArgument("--bidbrain needs the job: --job job.yaml, or --work-hours H");
  }
  sim::BidBrainOptions o;
  HZ_ASSIGN_OR_RETURN(o.change_overhead, parseSeconds(a.change_overhead, "--change-overhead"));
  HZ_ASSIGN_OR_RETURN(o.eviction_overhead, parseSeconds(a.eviction_overhead, "--eviction-overhead"));
  o.scaling = a.scaling;
  o.checkpoint_overhead = a.checkpoint_overhead;
  // One start (--start), or --starts spread over the history after what
  // BidBrain learns from (--learn), each job replayed from there; the
  // figures are their means.
  std::vector<Seconds> starts;
  Seconds learn = 0;
  if (!a.start.empty()) {
    HZ_ASSIGN_OR_RETURN(Seconds t, sim::parseTimestamp(a.start, "--start"));
    starts.push_back(t);
  } else {
    if (a.starts < 1 || a.starts > 1000) return invalidArgument("--starts must be from 1 to 1000");
    HZ_ASSIGN_OR_RETURN(learn, parseSeconds(a.learn, "--learn"));
    learn = std::min(learn, (history.end - history.begin) / 2);
    // Room for the on-demand run's length (all instances, whole hours) before the history ends.
    const Seconds length = std::ceil(job.work_hours / (job.reliable + job.transient)) * 3600;
    const Seconds room = std::max<Seconds>(0, history.end - history.begin - learn - length);
    for (int i = 0; i < a.starts; ++i) starts.push_back(history.begin + learn + room * i / a.starts);
  }
  std::vector<sim::StrategyResult> results;
  for (Seconds start : starts) {
    o.start = start;
    HZ_ASSIGN_OR_RETURN(const auto one, sim::compareBidding(history, job, o));
    if (results.empty()) {
      results = one;
      for (auto& r : results) {  // the sums start from nothing but the name
        sim::StrategyResult empty;
        empty.name = r.name;
        r = std::move(empty);
      }
    }
    for (size_t i = 0; i < one.size(); ++i) {
      const double n = static_cast<double>(starts.size());
      results[i].cost += one[i].cost / n;
      results[i].time += one[i].time / n;
      results[i].lost_hours += one[i].lost_hours / n;
      results[i].instance_hours += one[i].instance_hours / n;
      results[i].evictions += one[i].evictions;
      results[i].finished = results[i].finished && one[i].finished;
      results[i].decisions.insert(results[i].decisions.end(), one[i].decisions.begin(), one[i].decisions.end());
    }
  }
  const sim::StrategyResult& onDemand = results[0];
  const sim::StrategyResult& checkpoint = results[1];
  if (a.json) {
    Json out = {{"work_hours", job.work_hours},
                {"learnt_hours", learn / 3600},
                {"work_rates", job.work_rate},
                {"reliable", job.reliable},
                {"transient", job.transient},
                {"starts", starts.size()}};
    for (const auto& r : results) {
      out["strategies"].push_back({{"name", r.name},
                                   {"cost_usd", r.cost},
                                   {"hours", r.time / 3600},
                                   {"evictions", r.evictions},
                                   {"lost_instance_hours", r.lost_hours},
                                   {"instance_hours", r.instance_hours},
                                   {"finished", r.finished},
                                   {"decisions", r.decisions.size()}});
    }
    std::cout << out.dump(2) << "\n";
    return Status();
  }
  TextTable table({"strategy", "cost", "hours", "evicted", "redone inst-h", "cost vs on-demand", "vs spot+ckpt: cost",
                   "time"},
                  {false, true, true, true, true, true, true, true});
  for (const auto& r : results) {
    table.addRow({r.name + (r.finished ? "" : " (unfinished)"), formatUsd(r.cost), fmt::format("{:.2f}", r.time / 3600),
                  std::to_string(r.evictions), fmt::format("{:.2f}", r.lost_hours),
                  fmt::format("{:+.0f}%", 100 * (r.cost / onDemand.cost - 1)),
                  fmt::format("{:+.0f}%", 100 * (r.cost / checkpoint.cost - 1)),
                  fmt::format("{:+.0f}%", 100 * (r.time / checkpoint.time - 1))});
  }
  std::string rates;
  for (const auto& [type, nu] : job.work_rate) rates += fmt::format("{}{} {:g}", rates.empty() ? "" : ", ", type, nu);
  std::cout << fmt::format("{}; tiers: {} reliable (on demand) + up to {} transient; {} spot markets from {} to {}; "
                           "means over {} start{}{} (evictions: all); work per instance-hour (ν): {}:\n",
                           source, job.reliable, job.transient, history.markets.size(),
                           sim::formatTimestamp(history.begin), sim::formatTimestamp(history.end), starts.size(),
                           starts.size() == 1 ? "" : "s",
                           learn > 0 ? fmt::format(", after the first {:g} h that BidBrain learns from", learn / 3600)
                                     : "",
                           rates)
            << table.render();
  return Status();
}

}  // namespace hydrozoa::cli
