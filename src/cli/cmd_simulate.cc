// `hydrozoa simulate`: Gavel's policies and round-based mechanism replaying a
// trace in virtual time (docs/simulate.md).
#include <fmt/format.h>

#include <iostream>

#include "cli/commands.h"
#include "core/table.h"
#include "core/units.h"
#include "sched/gavel_formats.h"
#include "sched/policy.h"
#include "sim/simulator.h"

namespace hydrozoa::cli {
namespace {

struct SimulateArgs {
  std::string trace, throughputs, cluster, policy = "max_min_fairness", round = "6min";
  bool json = false;
};

Status runSimulate(const SimulateArgs& a) {
  HZ_ASSIGN_OR_RETURN(const std::vector<sched::WorkerType> types, sched::parseCluster(a.cluster, "--cluster"));
  sim::SimOptions o;
  HZ_ASSIGN_OR_RETURN(o.round, parseSeconds(a.round, "--round"));
  if (!(o.round >= 1 && o.round <= 86400)) return invalidArgument("--round must be from 1 s to 24 h");
  std::vector<std::string> names;
  if (a.policy == "all") {
    for (const auto& p : sched::policyList()) names.push_back(p.name);
  } else {
    HZ_RETURN_IF_ERROR(sched::makePolicy(a.policy).status());
    names.push_back(a.policy);
  }
  HZ_ASSIGN_OR_RETURN(const sched::Throughputs throughputs, sched::Throughputs::load(a.throughputs));
  HZ_ASSIGN_OR_RETURN(const std::vector<sched::TraceJob> trace, sched::loadTrace(a.trace));
  TextTable table({"policy", "average JCT", "makespan", "utilisation", "rounds", "allocations", "solver"},
                  {false, true, true, true, true, true, true});
  Json out = Json::array();
  for (const std::string& name : names) {
    HZ_ASSIGN_OR_RETURN(const std::unique_ptr<sched::Policy> policy, sched::makePolicy(name));
    auto r = sim::simulate(trace, types, throughputs, *policy, o);
    if (!r.ok()) return Status(r.status().code(), fmt::format("{}: {}", name, r.status().message()));
    Json jobs = Json::array();
    for (const sim::SimJob& j : r->jobs) jobs.push_back({{"arrival", j.arrival}, {"finish", j.finish}});
    out.push_back({{"policy", name},
                   {"average_jct_seconds", r->average_jct},
                   {"makespan_seconds", r->makespan},
                   {"utilisation", r->utilisation},
                   {"rounds", r->rounds},
                   {"allocations", r->allocations},
                   {"solve_seconds", r->solve_seconds},
                   {"jobs", jobs}});
    table.addRow({name, fmt::format("{:.2f} h", r->average_jct / 3600), fmt::format("{:.2f} h", r->makespan / 3600),
                  fmt::format("{:.1f}%", 100 * r->utilisation), std::to_string(r->rounds),
                  std::to_string(r->allocations), formatSeconds(r->solve_seconds)});
  }
  if (a.json) {
    std::cout << (names.size() == 1 ? out[0] : out).dump(2) << "\n";
  } else {
    std::cout << fmt::format("{} jobs of {} on {}, rounds of {}:\n", trace.size(), a.trace, a.cluster,
                             formatSeconds(o.round))
              << table.render();
  }
  return Status();
}

}  // namespace

void addSimulateCommand(CLI::App& app, Status* status) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Replay a job trace on a pool of worker types under a multi-job policy, in virtual time (Gavel)");
  cmd->add_option("--trace", args->trace, "Jobs in Gavel's trace format (arrival times in seconds)")->required();
  cmd->add_option("--throughputs", args->throughputs, "Gavel's throughputs file")->required();
  cmd->add_option("--cluster", args->cluster, "Worker types and counts: v100=4,p100=4,k80=4")->required();
  cmd->add_option("--policy", args->policy, "A policy (hydrozoa allocate --help lists them), or all")
      ->capture_default_str();
  cmd->add_option("--round", args->round, "Length of a scheduling round")->capture_default_str();
  cmd->add_flag("--json", args->json, "Print the results (and each job's arrival and finish) as JSON");
  cmd->callback([status, args] { *status = runSimulate(*args); });
}

}  // namespace hydrozoa::cli
