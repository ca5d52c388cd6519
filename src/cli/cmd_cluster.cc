// The multi-job scheduler service (Gavel; docs/cluster.md): `hydrozoa
// cluster serve` runs it on a pool of worker types; `submit`, `jobs` and
// `cancel` talk to it (sched/service/server.h).
#include <fmt/format.h>

#include <csignal>
#include <iostream>

#include "cli/commands.h"
#include "cluster/job_spec.h"
#include "core/paths.h"
#include "core/table.h"
#include "core/units.h"
#include "model/zoo.h"
#include "sched/service/server.h"

namespace hydrozoa::cli {
namespace {

std::atomic<int> gStop{0};
extern "C" void onStop(int) { gStop.fetch_add(1); }

struct ClusterArgs {
  std::string config, state, cluster, job, entity;
  double weight = 1, slo = -1, budget = -1;
  int id = 0;
  bool json = false;
};

std::string stateDir(const ClusterArgs& a) { return a.cluster.empty() ? sched::defaultStateDir() : a.cluster; }

Status runServe(const ClusterArgs& a) {
  HZ_ASSIGN_OR_RETURN(sched::ClusterConfig config, sched::loadClusterConfig(a.config));
  if (!a.state.empty()) config.state_dir = a.state;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, onStop);
  std::signal(SIGPIPE, SIG_IGN);
  return sched::serve(std::move(config), executablePath(), &gStop);
}

Status runSubmit(const ClusterArgs& a) {
  HZ_ASSIGN_OR_RETURN(cluster::JobSpec spec, cluster::loadJobSpec(a.job));
  HZ_RETURN_IF_ERROR(cluster::validateJobSpec(spec, a.job));
  cluster::makePathsAbsolute(&spec, model::isTorchScriptPath(spec.model));
  HZ_ASSIGN_OR_RETURN(const sched::ServiceClient service, sched::ServiceClient::connect(stateDir(a)));
  HZ_ASSIGN_OR_RETURN(const Json r, service.post("/api/jobs", {{"spec", cluster::jobSpecToJson(spec)},
                                                               {"weight", a.weight},
                                                               {"slo_hours", a.slo},
                                                               {"budget", a.budget},
                                                               {"entity", a.entity}}));
  std::cout << fmt::format("Submitted job {} ({}, weight {}{}); follow it with: hydrozoa jobs\n", r["id"].get<int>(),
                           spec.name, a.weight, a.entity.empty() ? "" : ", entity " + a.entity);
  return Status();
}

Status runJobs(const ClusterArgs& a) {
  HZ_ASSIGN_OR_RETURN(const sched::ServiceClient service, sched::ServiceClient::connect(stateDir(a)));
  HZ_ASSIGN_OR_RETURN(const Json s, service.get("/api/state"));
  if (a.json) {
    std::cout << s.dump(1) << "\n";
    return Status();
  }
  std::vector<std::string> header = {"id", "name", "status", "on", "workers"};
  std::vector<bool> right = {true, false, false, false, true};
  bool entities = false;  // a hierarchical pool: each job's entity
  for (const Json& j : s["jobs"]) entities |= !j.value("entity", "").empty();
  if (entities) {
    header.insert(header.begin() + 2, "entity");
    right.insert(right.begin() + 2, false);
  }
  for (const Json& t : s["types"]) {
    header.push_back("X " + t["name"].get<std::string>());
    right.push_back(true);
  }
  for (const char* h : {"rounds", "progress", "cost", "ETA"}) {
    header.push_back(h);
    right.push_back(true);
  }
  TextTable table(header, right);
  for (const Json& j : s["jobs"]) {
    std::vector<std::string> row = {std::to_string(j["id"].get<int>()), j["name"], j["status"], j["type_name"],
                                    std::to_string(j["scale"].get<int>())};
    if (entities) row.insert(row.begin() + 2, j.value("entity", ""));
    for (const Json& t : s["types"]) {
      const std::string name = t["name"];
      row.push_back(j["allocation"].contains(name) ? fmt::format("{:.2f}", j["allocation"][name].get<double>()) : "-");
    }
    const auto total = j["total_steps"].get<std::int64_t>();
    row.push_back(std::to_string(j["rounds"].get<int>()));
    row.push_back(total > 0 ? fmt::format("{}/{}", j["steps"].get<std::int64_t>(), total) : "-");
    row.push_back(formatUsd(j["cost"].get<double>()));
    row.push_back(j["eta_seconds"].is_null() ? "-" : formatSeconds(j["eta_seconds"].get<double>()));
    table.addRow(row);
  }
  std::cout << fmt::format("{}: policy {}, round {} (rounds of {}), ${:.4f} so far; status page {}/?token=…\n",
                           s["cluster"].get<std::string>(), s["policy"].get<std::string>(), s["round"].get<int>(),
                           formatSeconds(s["round_seconds"].get<double>()), s["cost_usd"].get<double>(), service.url());
  if (!s["jobs"].empty()) std::cout << table.render() << "\n";
  for (const Json& j : s["jobs"]) {
    if (!j["reason"].get<std::string>().empty()) {
      std::cout << fmt::format("  job {}: {}\n", j["id"].get<int>(), j["reason"].get<std::string>());
    }
    // NOTE [A worker lost in a round] (sched/service/scheduler.cc)
    if (const int lost = j.value("workers_lost", 0); lost > 0) {
      std::cout << fmt::format("  job {}: {} worker{} lost and recovered from; its throughput measured again\n",
                               j["id"].get<int>(), lost, lost == 1 ? "" : "s");
    }
  }
  if (!s["error"].get<std::string>().empty()) std::cout << "  policy: " << s["error"].get<std::string>() << "\n";
  return Status();
}

Status runCancel(const ClusterArgs& a) {
  HZ_ASSIGN_OR_RETURN(const sched::ServiceClient service, sched::ServiceClient::connect(stateDir(a)));
  HZ_RETURN_IF_ERROR(service.post(fmt::format("/api/jobs/{}/cancel", a.id), Json::object()).status());
  std::cout << fmt::format("Cancelling job {}: it checkpoints and stops\n", a.id);
  return Status();
}

void addClusterOption(CLI::App* cmd, ClusterArgs* a) {
  cmd->add_option("--cluster", a->cluster,
                  "The scheduler's state directory (default: $HYDROZOA_CLUSTER, else ~/.hydrozoa/cluster)");
}

}  // namespace

void addClusterCommands(CLI::App& app, Status* status) {
  auto a = std::make_shared<ClusterArgs>();
  CLI::App* cluster = app.add_subcommand("cluster", "Run a pool of workers that many jobs share (Gavel's scheduler)");
  cluster->require_subcommand(1);
  CLI::App* serve = cluster->add_subcommand("serve", "Serve the pool: schedule the submitted jobs in rounds");
  serve->add_option("--config", a->config, "The pool: worker types, policy, round length (docs/cluster.md)")
      ->required();
  serve->add_option("--state", a->state, "Keep the state here (default: the config's state_dir, else "
                                         "$HYDROZOA_CLUSTER, else ~/.hydrozoa/cluster)");
  serve->footer("Example:\n  hydrozoa cluster serve --config examples/cluster.yaml &\n"
                "Ctrl-C or SIGTERM: the running jobs checkpoint and stop; the next serve resumes them.\n");
  serve->callback([status, a] { *status = runServe(*a); });

  CLI::App* submit = app.add_subcommand("submit", "Submit a job to the pool's scheduler");
  submit->add_option("job", a->job, "Job spec (YAML), as for hydrozoa train")->required();
  submit->add_option("--weight", a->weight, "Its priority weight (weighted policies)")->capture_default_str();
  submit->add_option("--slo", a->slo, "Hours it must finish within (min_cost_slo)");
  submit->add_option("--entity", a->entity, "The entity it belongs to (a pool with policy hierarchical)");
  submit->add_option("--budget", a->budget, "USD it may spend; it stops when spent");
  addClusterOption(submit, a.get());
  submit->footer("Example:\n  hydrozoa submit examples/fashion_mnist_cnn.yaml --weight 2\n");
  submit->callback([status, a] { *status = runSubmit(*a); });

  CLI::App* jobs = app.add_subcommand("jobs", "The pool's jobs: allocation, rounds, progress, cost, ETA");
  jobs->add_flag("--json", a->json, "The scheduler's whole state as JSON");
  addClusterOption(jobs, a.get());
  jobs->callback([status, a] { *status = runJobs(*a); });

  CLI::App* cancel = app.add_subcommand("cancel", "Cancel a job of the pool (it checkpoints and stops)");
  cancel->add_option("id", a->id, "The job's id (hydrozoa jobs)")->required()->check(CLI::Range(1, 1 << 30));
  addClusterOption(cancel, a.get());
  cancel->callback([status, a] { *status = runCancel(*a); });
}

}  // namespace hydrozoa::cli
