#include "sched/service/config.h"

#include <fmt/format.h>

#include <cstdlib>
#include <set>

#include "core/limits.h"
#include "sched/policy.h"

namespace hydrozoa::sched {

std::vector<std::string> PoolType::trainFlags() const {
  std::vector<std::string> flags = {"--launcher", launcher};
  if (cpu_limit) {
    flags.push_back("--cpu-limit");
    flags.push_back(fmt::format("{}", *cpu_limit));
  }
  if (memory_limit) {
    flags.push_back("--memory-limit");
    flags.push_back(std::to_string(*memory_limit));
  }
  flags.insert(flags.end(), args.begin(), args.end());
  return flags;
}

Result<ClusterConfig> parseClusterConfig(const Json& j, const std::string& origin) {
  ClusterConfig c;
  ObjectReader r(j, origin);
  c.name = r.optString("name").value_or(c.name);
  c.policy = r.optString("policy").value_or(c.policy);
  if (r.has("round")) {
    c.round = r.seconds("round");
    if (r.ok() && !(c.round >= 1 && c.round <= 86400)) {
      r.fail("round", fmt::format("{} s is outside 1 s .. 24 h (Gavel uses 6 minutes: round: 6min)", c.round));
    }
  }
  c.state_dir = r.optString("state_dir").value_or("");
  c.port = static_cast<int>(r.optInteger("port", 0, 65535).value_or(0));
  if (r.has("budget")) c.budget = r.positive("budget");
  if (r.has("fill_idle")) c.fill_idle = r.boolean("fill_idle");
  const Json& types = r.array("worker_types", /*nonEmpty=*/true);
  std::set<std::string> names;
  for (size_t i = 0; r.ok() && i < types.size(); ++i) {
    ObjectReader t(types[i], r.element("worker_types", i));
    PoolType p;
    p.name = t.string("name");
    p.count = static_cast<int>(t.count("count", kWorkersRange));
    p.launcher = t.optString("launcher").value_or(p.launcher);
    if (t.ok() && p.launcher != "local" && p.launcher != "container" && p.launcher != "slurm") {
      t.fail("launcher", fmt::format("\"{}\" is not one of local, container, slurm", p.launcher));
    }
    if (t.has("cpu_limit")) {
      p.cpu_limit = t.positive("cpu_limit");
      if (t.ok() && *p.cpu_limit > 4096) t.fail("cpu_limit", "more than 4096 vCPUs");
    }
    if (t.has("memory_limit")) {
      p.memory_limit = t.bytes("memory_limit");
      if (t.ok() && *p.memory_limit < 16 * kMB) t.fail("memory_limit", "less than 16MB");
    }
    if (t.has("price")) p.price = t.nonNegative("price");
    if (const Json* args = t.raw("args")) {
      if (!args->is_array()) {
        t.fail("args", "expected a list of `hydrozoa train` flags");
      } else {
        for (const Json& a : *args) {
          if (!a.is_string()) {
            t.fail("args", "expected strings");
            break;
          }
          p.args.push_back(a.get<std::string>());
        }
      }
    }
    t.rejectUnknownKeys();
    r.adopt(t.status());
    if (r.ok() && p.name.empty()) r.fail(r.element("worker_types", i) + ".name: empty");
    if (r.ok() && !names.insert(p.name).second) {
      r.fail(fmt::format("{}.name: \"{}\" is given twice", r.element("worker_types", i), p.name));
    }
    c.types.push_back(std::move(p));
  }
  if (const Json* entities = r.raw("entities")) {
    if (!entities->is_array() || entities->empty()) {
      r.fail("entities", "expected a list of {name, weight, policy: fairness|fifo}");
    }
    for (size_t i = 0; r.ok() && i < entities->size(); ++i) {
      ObjectReader e((*entities)[i], r.element("entities", i));
      Problem::Entity entity;
      entity.name = e.string("name");
      entity.weight = e.has("weight") ? e.positive("weight") : 1.0;
      if (e.ok() && entity.weight > 1e6) e.fail("weight", fmt::format("{} is more than 1e6", entity.weight));
      const std::string inside = e.optString("policy").value_or("fairness");
      if (e.ok() && inside != "fairness" && inside != "fifo") {
        e.fail("policy", fmt::format("\"{}\" is not fairness or fifo (how the entity shares among its jobs)", inside));
      }
      entity.fifo = inside == "fifo";
      e.rejectUnknownKeys();
      r.adopt(e.status());
      if (r.ok() && entity.name.empty()) r.fail(r.element("entities", i) + ".name: empty");
      for (const Problem::Entity& other : c.entities) {
        if (r.ok() && other.name == entity.name) {
          r.fail(fmt::format("{}.name: \"{}\" is given twice", r.element("entities", i), entity.name));
        }
      }
      c.entities.push_back(std::move(entity));
    }
  }
  r.rejectUnknownKeys();
  HZ_RETURN_IF_ERROR(r.status());
  auto policy = makePolicy(c.policy);
  if (!policy.ok()) return invalidArgument(fmt::format("{}: policy: {}", origin, policy.status().message()));
  for (const PolicyInfo& p : policyList()) {
    if (p.name != c.policy) continue;
    if (p.entities && c.entities.empty()) {
      return invalidArgument(fmt::format("{}: policy: {} needs entities: add entities: [{{name: product, weight: 2, "
                                         "policy: fairness}}, {{name: research, weight: 1, policy: fifo}}]",
                                         origin, c.policy));
    }
    if (!p.entities && !c.entities.empty()) {
      return invalidArgument(fmt::format("{}: entities: only policy hierarchical shares by entity; remove them or "
                                         "use policy: hierarchical",
                                         origin));
    }
    if (p.budget && c.budget < 0) {
      return invalidArgument(fmt::format("{}: policy: {} needs the pool's budget: add budget: USD", origin, c.policy));
    }
    if (p.prices) {
      for (const PoolType& t : c.types) {
        if (t.price <= 0) {
          return invalidArgument(fmt::format("{}: policy: {} needs every worker type's price; {} has none: add "
                                             "price: USD per worker-hour",
                                             origin, c.policy, t.name));
        }
      }
    }
  }
  return c;
}

Result<ClusterConfig> loadClusterConfig(const std::string& path) {
  HZ_ASSIGN_OR_RETURN(const Json j, readYamlFile(path));
  return parseClusterConfig(j, path);
}

std::string defaultStateDir() {
  if (const char* dir = std::getenv("HYDROZOA_CLUSTER"); dir && *dir) return dir;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.hydrozoa/cluster";
}

}  // namespace hydrozoa::sched
