// The policies by name (sched/policy.h's makePolicy, policyList) and their
// agnostic forms.
#include <fmt/format.h>

#include <functional>

#include "sched/policies/policies.h"

namespace hydrozoa::sched {

namespace {

// The same policy on the problem with every throughput 1 where the job runs.
class Agnostic : public Policy {
 public:
  explicit Agnostic(std::unique_ptr<Policy> inner) : inner_(std::move(inner)) {}
  Result<Allocation> allocate(const Problem& problem) const override {
    Problem flat = problem;
    flat.pairs.clear();  // as Gavel's baselines: no space sharing
    for (JobDemand& job : flat.jobs) {
      for (double& t : job.throughput) t = t > 0 ? 1.0 : 0.0;
    }
    return inner_->allocate(flat);
  }

 private:
  std::unique_ptr<Policy> inner_;
};

struct Entry {
  PolicyInfo info;
  std::function<std::unique_ptr<Policy>()> make;
};

PolicyInfo needs(const char* name, const char* objective, bool prices = false, bool budget = false,
                 bool entities = false) {
  return {name, objective, prices, budget, entities};
}

PolicyInfo sharing(PolicyInfo info) {
  info.pairs = true;
  return info;
}

const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {
      {sharing(needs("max_min_fairness", "the least weighted share: throughput / throughput on equal time everywhere")),
       [] { return std::make_unique<MaxMinFairness>(); }},
      {needs("max_min_fairness_water_filling", "the least normalised share, then each job as fast as the others allow"),
       [] { return std::make_unique<WaterFilling>(false); }},
      {needs("hierarchical", "the least normalised share: entities by weight, fairness or FIFO inside (--entities)",
             false, false, /*entities=*/true),
       [] { return std::make_unique<WaterFilling>(true); }},
      {sharing(needs("finish_time_fairness", "the largest ρ: finish time against that on 1/n of the cluster")),
       [] { return std::make_unique<FinishTimeFairness>(); }},
      {sharing(needs("min_makespan", "seconds until the last job finishes")), [] { return std::make_unique<MinMakespan>(); }},
      {sharing(needs("max_total_throughput", "Σ throughput / throughput on the job's fastest type")),
       [] { return std::make_unique<MaxTotalThroughput>(); }},
      {sharing(needs("fifo", "Σ throughput / fastest · (jobs − arrival index)")), [] { return std::make_unique<Fifo>(); }},
      {sharing(needs("shortest_job_first", "Σ throughput / fastest · (jobs − rank by time left)")),
       [] { return std::make_unique<Fifo>(true); }},
      {needs("min_cost", "Σ time · throughput per dollar against the job's most cost-efficient type", /*prices=*/true),
       [] { return std::make_unique<MinCost>(false); }},
      {needs("min_cost_slo", "the same, every job's SLO met", /*prices=*/true),
       [] { return std::make_unique<MinCost>(true); }},
      {needs("min_makespan_budget", "seconds until the last job finishes, its cost within --budget", /*prices=*/true,
             /*budget=*/true),
       [] { return std::make_unique<MinMakespanBudget>(); }},
  };
  return entries;
}

}  // namespace

std::vector<PolicyInfo> policyList() {
  std::vector<PolicyInfo> out;
  for (const Entry& e : registry()) out.push_back(e.info);
  for (const Entry& e : registry()) {
    PolicyInfo agnostic = e.info;
    agnostic.name += "_agnostic";
    agnostic.pairs = true;  // it drops them
    out.push_back(agnostic);
  }
  return out;
}

Result<std::unique_ptr<Policy>> makePolicy(const std::string& name) {
  const std::string suffix = "_agnostic";
  const bool agnostic = name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  const std::string base = agnostic ? name.substr(0, name.size() - suffix.size()) : name;
  for (const Entry& e : registry()) {
    if (base != e.info.name) continue;
    std::unique_ptr<Policy> p = e.make();
    if (agnostic) return std::unique_ptr<Policy>(std::make_unique<Agnostic>(std::move(p)));
    return p;
  }
  std::string known;
  for (const PolicyInfo& i : policyList()) known += (known.empty() ? "" : ", ") + i.name;
  return invalidArgument(fmt::format("unknown policy \"{}\"; known: {}", name, known));
}

}  // namespace hydrozoa::sched
