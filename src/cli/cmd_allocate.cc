// `hydrozoa allocate`: one decision of a multi-job policy (Gavel,
// docs/cluster.md) on Gavel's inputs: the fraction of time each job of a
// trace gets on each worker type of a cluster.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "cli/commands.h"
#include "core/table.h"
#include "sched/gavel_formats.h"
#include "sched/policy.h"
#include "sim/market.h"

namespace hydrozoa::cli {
namespace {

struct AllocateArgs {
  std::string throughputs, jobs, cluster, policy = "max_min_fairness", prices, entities;
  double budget = -1;
  bool json = false, space_sharing = false;
};

Status runAllocate(const AllocateArgs& a) {
  HZ_ASSIGN_OR_RETURN(const std::vector<sched::WorkerType> types, sched::parseCluster(a.cluster, "--cluster"));
  HZ_ASSIGN_OR_RETURN(const std::unique_ptr<sched::Policy> policy, sched::makePolicy(a.policy));
  HZ_ASSIGN_OR_RETURN(const sched::Throughputs throughputs, sched::Throughputs::load(a.throughputs));
  HZ_ASSIGN_OR_RETURN(const std::vector<sched::TraceJob> jobs, sched::loadTrace(a.jobs));
  HZ_ASSIGN_OR_RETURN(sched::Problem problem, sched::problemOf(jobs, types, throughputs));
  if (!a.prices.empty()) {
    HZ_ASSIGN_OR_RETURN(problem.price, sim::clusterPrices(a.prices, types, "--prices"));
  }
  problem.budget = a.budget;
  if (!a.entities.empty()) {
    HZ_ASSIGN_OR_RETURN(const std::vector<int> of,
                        sched::parseEntities(a.entities, problem.jobs.size(), &problem.entities, "--entities"));
    for (size_t m = 0; m < of.size(); ++m) problem.jobs[m].entity = of[m];
  }
  if (a.space_sharing) sched::addSpaceSharing(&problem, throughputs);
  HZ_ASSIGN_OR_RETURN(const sched::Allocation x, policy->allocate(problem));
  // The pairs that share some type, named "(a, b)".
  std::vector<size_t> shared;
  for (size_t c = 0; c < x.pairs.size(); ++c) {
    if (*std::max_element(x.pairs[c].begin(), x.pairs[c].end()) > 0) shared.push_back(c);
  }
  const auto pairName = [&](size_t c) { return fmt::format("({}, {})", problem.pairs[c].a, problem.pairs[c].b); };
  if (a.json) {
    Json allocation = Json::object();
    for (size_t m = 0; m < x.x.size(); ++m) {
      Json row = Json::object();
      for (size_t j = 0; j < types.size(); ++j) row[types[j].name] = x.x[m][j];
      allocation[std::to_string(m)] = row;
    }
    for (size_t c : shared) {
      Json row = Json::object();
      for (size_t j = 0; j < types.size(); ++j) row[types[j].name] = x.pairs[c][j];
      allocation[pairName(c)] = row;
    }
    std::cout << Json({{"policy", a.policy}, {"allocation", allocation}, {"objective", x.objective}}).dump(2) << "\n";
    return Status();
  }
  std::vector<std::string> header = {"job", "type", "workers"};
  std::vector<bool> right = {true, false, true};
  for (const auto& t : types) {
    header.push_back(t.name);
    right.push_back(true);
  }
  header.push_back("steps/s");
  right.push_back(true);
  TextTable table(header, right);
  for (size_t m = 0; m < x.x.size(); ++m) {
    std::vector<std::string> row = {std::to_string(m), problem.jobs[m].type, std::to_string(problem.jobs[m].scale_factor)};
    for (double share : x.x[m]) row.push_back(fmt::format("{:.3f}", share));
    row.push_back(fmt::format("{:.3g}", sched::effectiveThroughput(problem, x, static_cast<int>(m))));
    table.addRow(row);
  }
  for (size_t c : shared) {  // pairs sharing workers: their time together
    std::vector<std::string> row = {pairName(c), "shared",
                                    std::to_string(problem.jobs[static_cast<size_t>(problem.pairs[c].a)].scale_factor)};
    for (double share : x.pairs[c]) row.push_back(fmt::format("{:.3f}", share));
    row.push_back("");
    table.addRow(row);
  }
  std::string objective;
  for (const auto& p : sched::policyList()) {
    if (p.name == a.policy) objective = p.objective;
  }
  std::cout << fmt::format("{} on {}: the fraction of time each job spends on each worker type\n", a.policy, a.cluster)
            << table.render()
            << fmt::format("objective: {:.6g} ({})\n", x.objective, objective);
  return Status();
}

}  // namespace

void addAllocateCommand(CLI::App& app, Status* status) {
  auto args = std::make_shared<AllocateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "allocate", "One decision of a multi-job policy: each job's fraction of time on each worker type (Gavel)");
  cmd->add_option("--throughputs", args->throughputs, "Gavel's throughputs file (steps/s of each job type per type)")
      ->required();
  cmd->add_option("--jobs", args->jobs, "The jobs, in Gavel's trace format (one per line, 10 tab-separated fields)")
      ->required();
  cmd->add_option("--cluster", args->cluster, "Worker types and counts: v100=4,p100=4,k80=4")->required();
  std::string names;
  for (const auto& p : sched::policyList()) names += (names.empty() ? "" : ", ") + p.name;
  cmd->add_option("--policy", args->policy, "One of " + names)->capture_default_str();
  cmd->add_option("--prices", args->prices,
                  "USD per worker-hour of each type, for the cost policies: v100=3.06,k80=0.9, or a VM catalog "
                  "(gcp-vm, a path) whose on-demand and spot prices (TYPE:spot) are used");
  cmd->add_option("--budget", args->budget, "USD for the jobs' steps (min_makespan_budget)");
  cmd->add_flag("--space-sharing", args->space_sharing,
                "Let pairs of jobs share workers at the throughputs file's pair rates (rows \"(a, b)\")");
  cmd->add_option("--entities", args->entities,
                  "hierarchical: NAME=WEIGHT:fairness|fifo:FIRST-LAST,... (jobs by trace index, LAST not included)");
  cmd->add_flag("--json", args->json,
                "Print {\"allocation\": {\"<job index>\": {\"<type>\": fraction}}, \"objective\": value}");
  cmd->footer("Jobs are indexed 0.. in trace order. docs/cluster.md describes each policy.\n");
  cmd->callback([status, args] { *status = runAllocate(*args); });
}

}  // namespace hydrozoa::cli
