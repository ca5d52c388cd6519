// `hydrozoa simulate`: Gavel's policies and round-based mechanism replaying a
// trace in virtual time (docs/simulate.md).
#include <fmt/format.h>

#include <iostream>

#include "cli/cmd_bidbrain.h"
#include "cli/commands.h"
#include "core/table.h"
#include "core/units.h"
#include "sched/gavel_formats.h"
#include "sched/policy.h"
#include "cli/common.h"
#include "core/files.h"
#include "sim/generate.h"
#include "sim/market.h"
#include "sim/simulator.h"

namespace hydrozoa::cli {
namespace {

struct SimulateArgs {
  std::string trace, throughputs, cluster, policy = "max_min_fairness", round = "6min", measure, write_trace, prices,
      entities, preemption = "0s", reallocate_after = "0s", spot_trace, spot_uptime, spot_downtime, write_spot_trace;
  double budget = -1;
  int generate = 0;
  double rate = 0;
  bool multiple = false, json = false, space_sharing = false;
  std::uint64_t seed = 0;
  bool bidbrain = false, no_fill_idle = false;
  BidBrainArgs bid;  // with --bidbrain (cli/cmd_bidbrain.h)
};

// The simulation on a spot market drawn from `spot`, over a horizon that
// covers it: drawn again twice as long while the simulation outlasts it (a
// longer draw begins with the same events). Leaves the draw in o->spot.
Result<sim::SimResult> simulateOnDrawnSpot(const std::vector<sched::TraceJob>& trace,
                                           const std::vector<sched::WorkerType>& types,
                                           const sched::Throughputs& throughputs, const sched::Policy& policy,
                                           sim::SimOptions* o, sim::SpotTraceOptions* spot) {
  Seconds last = 0;
  for (const auto& j : trace) last = std::max(last, j.arrival);
  if (!(spot->horizon > 0)) spot->horizon = last + 30 * 86400.0;
  for (;;) {
    HZ_ASSIGN_OR_RETURN(o->spot, sim::generateSpotTrace(types, *spot));
    auto r = sim::simulate(trace, types, throughputs, policy, *o);
    Seconds end = 0;
    if (r.ok()) {
      for (const auto& j : r->jobs) end = std::max(end, j.finish);
    }
    if ((r.ok() && end <= spot->horizon) || spot->horizon * 2 > o->max_time) return r;
    spot->horizon *= 2;
  }
}

Status runSimulate(const SimulateArgs& a) {
  if (a.bidbrain) {
    BidBrainArgs b = a.bid;
    b.spot_trace = a.spot_trace;
    b.write_spot_trace = a.write_spot_trace;
    b.seed = a.seed;
    b.json = a.json;
    return runBidBrain(b);
  }
  if (a.throughputs.empty() || a.cluster.empty()) {
    return invalidArgument("simulate needs --throughputs and --cluster (or --bidbrain, docs/spot.md)");
  }
  HZ_ASSIGN_OR_RETURN(const std::vector<sched::WorkerType> types, sched::parseCluster(a.cluster, "--cluster"));
  sim::SimOptions o;
  HZ_ASSIGN_OR_RETURN(o.round, parseSeconds(a.round, "--round"));
  if (!(o.round >= 1 && o.round <= 86400)) return invalidArgument("--round must be from 1 s to 24 h");
  HZ_ASSIGN_OR_RETURN(o.preemption, parseSeconds(a.preemption, "--preemption-cost"));
  HZ_ASSIGN_OR_RETURN(o.reallocate_after, parseSeconds(a.reallocate_after, "--reallocate-after"));
  o.fill_idle = !a.no_fill_idle;
  if (!(o.preemption >= 0 && o.preemption < o.round)) {
    return invalidArgument("--preemption-cost must be from 0 s to less than a round (--round)");
  }
  if (!a.prices.empty()) {
    HZ_ASSIGN_OR_RETURN(o.price, sim::clusterPrices(a.prices, types, "--prices"));
  }
  const bool generateSpot = !a.spot_uptime.empty() || !a.spot_downtime.empty();
  if (generateSpot && !a.spot_trace.empty()) {
    return invalidArgument(
        "give the spot market as --spot-trace FILE or --spot-uptime/--spot-downtime, one of the two");
  }
  sim::SpotTraceOptions spot;
  if (generateSpot) {
    HZ_ASSIGN_OR_RETURN(spot.uptime, parseSeconds(a.spot_uptime.empty() ? "4h" : a.spot_uptime, "--spot-uptime"));
    HZ_ASSIGN_OR_RETURN(spot.downtime,
                        parseSeconds(a.spot_downtime.empty() ? "30min" : a.spot_downtime, "--spot-downtime"));
    spot.seed = a.seed;
  } else if (!a.spot_trace.empty()) {
    HZ_ASSIGN_OR_RETURN(o.spot, sim::loadSpotTrace(a.spot_trace, types));
  }
  if (!a.write_spot_trace.empty() && !generateSpot) {
    return invalidArgument("--write-spot-trace writes the spot trace --spot-uptime/--spot-downtime draws");
  }
  o.budget = a.budget;
  o.space_sharing = a.space_sharing;
  std::vector<std::string> names;
  if (a.policy == "all") {
    // Those the inputs allow.
    for (const auto& p : sched::policyList()) {
      if ((p.prices && o.price.empty()) || (p.budget && !(o.budget > 0)) || (p.entities && a.entities.empty()) ||
          (a.space_sharing && !p.pairs)) {
        continue;
      }
      names.push_back(p.name);
    }
  } else {
    HZ_RETURN_IF_ERROR(sched::makePolicy(a.policy).status());
    names.push_back(a.policy);
  }
  HZ_ASSIGN_OR_RETURN(const sched::Throughputs throughputs, sched::Throughputs::load(a.throughputs));
  if (a.trace.empty() == (a.generate == 0)) {
    return invalidArgument("give the jobs as --trace FILE or --generate N --rate JOBS_PER_HOUR, one of the two");
  }
  std::vector<sched::TraceJob> trace;
  std::string source = a.trace;
  if (a.generate > 0) {
    sim::TraceOptions t;
    t.jobs = a.generate;
    t.rate = a.rate;
    t.multiple = a.multiple;
    t.seed = a.seed;
    HZ_ASSIGN_OR_RETURN(trace, sim::generateTrace(throughputs, t));
    source = fmt::format("a {} trace at {:g} jobs/h (seed {})", a.multiple ? "continuous-multiple" : "continuous-single",
                         a.rate, a.seed);
    if (!a.write_trace.empty()) HZ_RETURN_IF_ERROR(writeFileAtomically(a.write_trace, sim::formatTrace(trace)));
  } else {
    HZ_ASSIGN_OR_RETURN(trace, sched::loadTrace(a.trace));
  }
  if (!a.entities.empty()) {
    HZ_ASSIGN_OR_RETURN(o.entity_of, sched::parseEntities(a.entities, trace.size(), &o.entities, "--entities"));
  }
  if (!a.measure.empty()) {
    const auto dash = a.measure.find('-');
    auto first = parseCount(a.measure.substr(0, dash), "--measure", {0, 1000000});
    auto last = dash == std::string::npos ? first : parseCount(a.measure.substr(dash + 1), "--measure", {1, 1000000});
    if (dash == std::string::npos || !first.ok() || !last.ok()) {
      return invalidArgument(fmt::format("--measure {}: expected FIRST-LAST, the jobs (by trace index, LAST not "
                                         "included) whose completion times are averaged, e.g. 400-800",
                                         a.measure));
    }
    o.measure_first = static_cast<int>(*first);
    o.measure_last = static_cast<int>(*last);
  }
  std::vector<std::string> header = {"policy", "average JCT", "makespan", "FTF rho mean / max", "utilisation",
                                     "rounds", "allocations", "solver"};
  std::vector<bool> right = {false, true, true, true, true, true, true, true};
  if (!o.price.empty()) {
    header.push_back("cost");
    right.push_back(true);
  }
  const bool spotMarket = generateSpot || !o.spot.empty();
  if (spotMarket) {
    header.push_back("reclaimed");
    right.push_back(true);
  }
  bool slos = false;
  for (const auto& j : trace) slos |= j.slo > 0;
  if (slos) {
    header.push_back("SLOs missed");
    right.push_back(true);
  }
  TextTable table(header, right);
  Json out = Json::array();
  std::string failures;
  for (const std::string& name : names) {
    HZ_ASSIGN_OR_RETURN(const std::unique_ptr<sched::Policy> policy, sched::makePolicy(name));
    auto r = generateSpot ? simulateOnDrawnSpot(trace, types, throughputs, *policy, &o, &spot)
                          : sim::simulate(trace, types, throughputs, *policy, o);
    if (!r.ok() && names.size() == 1) return Status(r.status().code(), fmt::format("{}: {}", name, r.status().message()));
    if (!r.ok()) {  // side by side: the others still run
      out.push_back({{"policy", name}, {"error", r.status().message()}});
      std::vector<std::string> row(header.size(), "");
      row[0] = name;
      row[1] = "failed";
      table.addRow(row);
      failures += fmt::format("{}: {}\n", name, r.status().message());
      continue;
    }
    Json jobs = Json::array();
    for (const sim::SimJob& j : r->jobs) {
      jobs.push_back({{"arrival", j.arrival}, {"finish", j.finish}, {"finish_time_fairness", j.rho}});
    }
    out.push_back({{"policy", name},
                   {"average_jct_seconds", r->average_jct},
                   {"makespan_seconds", r->makespan},
                   {"finish_time_fairness", {{"mean", r->rho_mean}, {"max", r->rho_max}}},
                   {"utilisation", r->utilisation},
                   {"rounds", r->rounds},
                   {"allocations", r->allocations},
                   {"solve_seconds", r->solve_seconds},
                   {"cost_usd", r->cost},
                   {"slo_jobs", r->slo_jobs},
                   {"slo_missed", r->slo_missed},
                   {"reclaimed", r->reclaimed},
                   {"jobs", jobs}});
    std::vector<std::string> row = {name, fmt::format("{:.2f} h", r->average_jct / 3600),
                                    fmt::format("{:.2f} h", r->makespan / 3600),
                                    fmt::format("{:.2f} / {:.2f}", r->rho_mean, r->rho_max),
                                    fmt::format("{:.1f}%", 100 * r->utilisation),
                                    std::to_string(r->rounds), std::to_string(r->allocations),
                                    formatSeconds(r->solve_seconds)};
    if (!o.price.empty()) row.push_back(fmt::format("${:.2f}", r->cost));
    if (spotMarket) row.push_back(std::to_string(r->reclaimed));
    if (slos) row.push_back(fmt::format("{} of {}", r->slo_missed, r->slo_jobs));
    table.addRow(row);
  }
  if (!a.write_spot_trace.empty()) {
    HZ_RETURN_IF_ERROR(writeFileAtomically(a.write_spot_trace, sim::formatSpotTrace(o.spot, types)));
  }
  if (a.json) {
    std::cout << (names.size() == 1 ? out[0] : out).dump(2) << "\n";
  } else {
    std::cout << fmt::format("{} jobs of {} on {}, rounds of {}{}:\n", trace.size(), source, a.cluster,
                             formatSeconds(o.round),
                             a.measure.empty() ? "" : fmt::format(", average JCT of jobs {}", a.measure))
              << table.render() << failures;
  }
  return Status();
}

}  // namespace

void addSimulateCommand(CLI::App& app, Status* status) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Replay a job trace on a pool of worker types under a multi-job policy, in virtual time (Gavel)");
  cmd->add_option("--trace", args->trace, "Jobs in Gavel's trace format (arrival times in seconds)");
  cmd->add_option("--generate", args->generate,
                  "Instead of --trace: this many jobs, Poisson arrivals at --rate, as Gavel's simulations draw them");
  cmd->add_option("--rate", args->rate, "--generate: jobs per hour");
  cmd->add_flag("--multiple", args->multiple,
                "--generate: 70% of jobs on 1 worker, 25% on 2 or 4, 5% on 8 (else all on 1)");
  cmd->add_option("--seed", args->seed, "--generate: the seed")->capture_default_str();
  cmd->add_option("--write-trace", args->write_trace, "--generate: also write the trace there (Gavel's format)");
  cmd->add_option("--measure", args->measure,
                  "Average the completion times of jobs FIRST-LAST only (trace indices; steady state)");
  cmd->add_option("--throughputs", args->throughputs, "Gavel's throughputs file");
  cmd->add_option("--cluster", args->cluster, "Worker types and counts: v100=4,p100=4,k80=4");
  cmd->add_option("--policy", args->policy, "A policy (hydrozoa allocate --help lists them), or all")
      ->capture_default_str();
  cmd->add_option("--round", args->round, "Length of a scheduling round")->capture_default_str();
  cmd->add_option("--reallocate-after", args->reallocate_after,
                  "Decide the allocation again no sooner than this after the last time (Gavel's own simulator: "
                  "32min); 0: at the first round after any arrival or completion")
      ->capture_default_str();
  cmd->add_flag("--no-fill-idle", args->no_fill_idle,
                "Leave the workers the allocation does not use idle (by default, each round they take jobs still "
                "waiting that run there, as Gavel's mechanism)");
  cmd->add_option("--preemption-cost", args->preemption,
                  "Time a job loses of a round it resumes in on another type, or after waiting or a spot reclaim "
                  "(restoring its checkpoint)")
      ->capture_default_str();
  cmd->add_option("--prices", args->prices,
                  "USD per worker-hour of each type (cost policies, and the cost column): TYPE=USD,... or a VM "
                  "catalog (gcp-vm, a path) whose on-demand and spot prices (TYPE:spot) are used");
  cmd->add_option("--spot-trace", args->spot_trace,
                  "Spot prices and workers to be had over time: lines SECONDS TYPE price USD | SECONDS TYPE available N");
  cmd->add_option("--spot-uptime", args->spot_uptime,
                  "Instead of --spot-trace: each TYPE:spot worker is reclaimed after this long on average (default 4h)");
  cmd->add_option("--spot-downtime", args->spot_downtime,
                  "... and another is to be had this long after (on average; default 30min)");
  cmd->add_option("--write-spot-trace", args->write_spot_trace, "Also write the spot trace drawn (the last policy's)");
  cmd->add_option("--budget", args->budget, "USD for the whole trace (min_makespan_budget)");
  cmd->add_option("--entities", args->entities,
                  "hierarchical: NAME=WEIGHT:fairness|fifo:FIRST-LAST,... (jobs by trace index, LAST not included)");
  cmd->add_flag("--space-sharing", args->space_sharing,
                "Let pairs of jobs share workers at the throughputs file's pair rates (policies that weigh them)");
  cmd->add_flag("--json", args->json, "Print the results (and each job's arrival and finish) as JSON");
  cmd->add_flag("--bidbrain", args->bidbrain,
                "Proteus's BidBrain on a spot price history (--spot-trace: the cloud's JSON export) against on-demand, "
                "spot with checkpoint-restart and a fixed bid, for --job or --work-hours (docs/spot.md)");
  cmd->add_option("--job", args->bid.job, "--bidbrain: the job spec whose samples make the work");
  cmd->add_option("--samples-per-s", args->bid.samples_per_s,
                  "--bidbrain: one instance's pace on the job (a one-worker run's throughput)")
      ->capture_default_str();
  cmd->add_option("--work-hours", args->bid.work_hours,
                  "--bidbrain: the job's work in hours of one instance of the reliable type, instead of --job");
  cmd->add_option("--tiers", args->bid.tiers, "--bidbrain: reliable (on-demand) and at most this many transient instances")
      ->capture_default_str();
  cmd->add_option("--on-demand", args->bid.on_demand, "--bidbrain: on-demand prices, TYPE=USD_PER_HOUR,...");
  cmd->add_option("--start", args->bid.start, "--bidbrain: when the job starts in the history (2016-03-14T00:00:00Z)");
  cmd->add_option("--starts", args->bid.starts, "--bidbrain: without --start, this many starts spread over the history")
      ->capture_default_str();
  cmd->add_option("--work-rate", args->bid.work_rate,
                  "--bidbrain: the work of an hour of each type, TYPE=N,... (ν; default: its vCPUs in the aws-vm "
                  "catalog, as the thesis)");
  cmd->add_option("--learn", args->bid.learn,
                  "--bidbrain: without --start, the history before the first start, which BidBrain learns from "
                  "(at most half the history; it never sees prices after a decision)")
      ->capture_default_str();
  cmd->add_option("--change-overhead", args->bid.change_overhead,
                  "--bidbrain: σ, how long the job makes no progress after its footprint changes")
      ->capture_default_str();
  cmd->add_option("--eviction-overhead", args->bid.eviction_overhead,
                  "--bidbrain: λ, how long the job makes no progress after an eviction")
      ->capture_default_str();
  cmd->add_option("--scaling", args->bid.scaling, "--bidbrain: φ, how efficiently the job scales (0-1]")
      ->capture_default_str();
  cmd->add_option("--checkpoint-overhead", args->bid.checkpoint_overhead,
                  "--bidbrain: the share of spot+checkpoint's time spent writing checkpoints (the thesis measured 0.17)")
      ->capture_default_str();
  cmd->add_option("--synthetic-spot-days", args->bid.synthetic_days,
                  "--bidbrain: replay a synthetic history of this many days instead (seeded by --seed; docs/spot.md)");
  cmd->callback([status, args] { *status = runSimulate(*args); });
}

}  // namespace hydrozoa::cli
