// Scheduler: its state in <state>/state.json (scheduler.h): written as it
// changes, read back by the next scheduler, which re-attaches to the job
// processes still running.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>

#include "sched/service/scheduler.h"

namespace hydrozoa::sched {
namespace fs = std::filesystem;

Json jobToJson(const ServiceJob& j) {
  return {{"id", j.id},
          {"name", j.name},
          {"weight", j.weight},
          {"entity", j.entity},
          {"slo_hours", j.slo_hours},
          {"budget", j.budget},
          {"status", j.status},
          {"reason", j.reason},
          {"scale", j.scale},
          {"submitted", j.submitted},
          {"finished", j.finished},
          {"type", j.type},
          {"target", j.target},
          {"cancel", j.cancel},
          {"over_budget", j.over_budget},
          {"stop_sent", j.stop_sent},
          {"steps", j.steps},
          {"total_steps", j.total_steps},
          {"accuracy", j.accuracy},
          {"rounds", j.rounds},
          {"starts", j.starts},
          {"preemptions", j.preemptions},
          {"lease_extensions", j.lease_extensions},
          {"cost", j.cost},
          {"held_seconds", j.held_seconds},
          {"start_seconds", j.start_seconds},
          {"starts_measured", j.starts_measured},
          {"crashes", j.crashes},
          {"workers_lost", j.workers_lost},
          {"measured", j.measured},
          {"pid", j.pid},
          {"events_offset", j.events_offset},
          {"outcome", j.outcome}};
}

namespace {

Result<ServiceJob> jobFromJson(const Json& j, size_t types, const std::string& where) {
  ServiceJob s;
  ObjectReader r(j, where);
  s.id = static_cast<int>(r.integer("id", 1, 1 << 30));
  s.name = r.string("name");
  s.weight = r.number("weight");
  s.entity = r.optString("entity").value_or("");  // older states lack it
  s.slo_hours = r.number("slo_hours");
  s.budget = r.number("budget");
  s.status = r.string("status");
  s.reason = r.string("reason");
  s.scale = static_cast<int>(r.integer("scale", 1, 65536));
  s.submitted = r.number("submitted");
  s.finished = r.number("finished");
  s.type = static_cast<int>(r.integer("type", -1, static_cast<std::int64_t>(types) - 1));
  s.target = static_cast<int>(r.integer("target", -1, static_cast<std::int64_t>(types) - 1));
  s.cancel = r.boolean("cancel");
  s.over_budget = r.boolean("over_budget");
  s.stop_sent = r.boolean("stop_sent");
  s.steps = r.integer("steps", 0);
  s.total_steps = r.integer("total_steps", 0);
  s.accuracy = r.number("accuracy");
  s.rounds = static_cast<int>(r.integer("rounds", 0, INT32_MAX));
  s.starts = static_cast<int>(r.integer("starts", 0, INT32_MAX));
  s.preemptions = static_cast<int>(r.integer("preemptions", 0, INT32_MAX));
  s.lease_extensions = static_cast<int>(r.integer("lease_extensions", 0, INT32_MAX));
  s.cost = r.nonNegative("cost");
  s.held_seconds = r.nonNegative("held_seconds");
  s.start_seconds = r.nonNegative("start_seconds");
  s.starts_measured = static_cast<int>(r.integer("starts_measured", 0, INT32_MAX));
  s.crashes = static_cast<int>(r.integer("crashes", 0, INT32_MAX));
  s.workers_lost = static_cast<int>(r.optInteger("workers_lost", 0, INT32_MAX).value_or(0));  // older states lack it
  const Json& measured = r.array("measured");
  for (const Json& m : measured) s.measured.push_back(m.is_number() ? m.get<double>() : 0.0);
  s.measured.resize(types, 0.0);  // a type added to the pool since: not measured
  s.pid = static_cast<pid_t>(r.integer("pid", -1, INT32_MAX));
  s.events_offset = r.integer("events_offset", 0);
  s.outcome = r.string("outcome");
  r.rejectUnknownKeys();
  HZ_RETURN_IF_ERROR(r.status());
  return s;
}

}  // namespace

Status Scheduler::save() {
  Json jobs = Json::array();
  for (const auto& j : jobs_) jobs.push_back(jobToJson(j));
  Json types = Json::array();
  for (const auto& t : config_.types) types.push_back(t.name);
  const Json state = {{"version", 1}, {"next_id", nextId_}, {"round", round_}, {"cost_usd", cost_},
                      {"types", types},  {"jobs", jobs},       {"timeline", timeline_}};
  HZ_RETURN_IF_ERROR(writeFileAtomically(config_.state_dir + "/state.json", state.dump(1) + "\n"));
  dirty_ = false;
  lastSave_ = lastTick_;
  return Status();
}

Status Scheduler::load(double now) {
  const std::string path = config_.state_dir + "/state.json";
  if (!fs::exists(path)) return Status();
  HZ_ASSIGN_OR_RETURN(const Json state, readJsonFile(path));
  ObjectReader r(state, path);
  r.integer("version", 1, 1);
  nextId_ = static_cast<int>(r.integer("next_id", 1, 1 << 30));
  round_ = static_cast<int>(r.integer("round", 0, INT32_MAX));
  cost_ = r.nonNegative("cost_usd");
  const Json& types = r.array("types");
  const Json& jobs = r.array("jobs");
  timeline_ = r.array("timeline");
  r.rejectUnknownKeys();
  HZ_RETURN_IF_ERROR(r.status());
  // Jobs keep their type by name: a type the pool no longer has is none.
  std::vector<int> typeOf;
  for (const Json& t : types) {
    int found = -1;
    for (size_t k = 0; k < config_.types.size(); ++k) {
      if (t.is_string() && config_.types[k].name == t.get<std::string>()) found = static_cast<int>(k);
    }
    typeOf.push_back(found);
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    Json jj = jobs[i];
    const auto remap = [&](const char* key) {
      const std::int64_t v = jj.value(key, std::int64_t{-1});
      jj[key] = v >= 0 && v < static_cast<std::int64_t>(typeOf.size()) ? typeOf[static_cast<size_t>(v)] : -1;
    };
    remap("type");
    remap("target");
    if (jj.contains("measured") && jj["measured"].is_array()) {
      Json m = Json::array();
      for (size_t k = 0; k < config_.types.size(); ++k) {
        double v = 0;
        for (size_t o = 0; o < typeOf.size() && o < jj["measured"].size(); ++o) {
          if (typeOf[o] == static_cast<int>(k) && jj["measured"][o].is_number()) v = jj["measured"][o].get<double>();
        }
        m.push_back(v);
      }
      jj["measured"] = m;
    }
    HZ_ASSIGN_OR_RETURN(ServiceJob j, jobFromJson(jj, config_.types.size(), fmt::format("{}: jobs[{}]", path, i)));
    if (j.holdsWorkers()) {
      // A job process the scheduler before this one started: still running
      // (re-attached), or ended while none watched (its events say how).
      JobProcess p = JobProcess::attach(j.pid, jobDir(j.id) + "/", jobDir(j.id) + "/events.jsonl", j.events_offset);
      const bool running = p.running();
      processes_[j.id] = std::move(p);
      if (running) {
        spdlog::info("job {} ({}) still runs (pid {}): re-attached", j.id, j.name, j.pid);
      } else {
        drainEvents(j, processes_[j.id]);
        const bool said = !j.outcome.empty();
        onExit(j, now);
        if (!said && !j.cancel && j.status == "failed") {
          // Gone without a word (killed with the scheduler's machine, say):
          // its checkpoint resumes it.
          j.status = "paused";
          j.reason.clear();
          j.finished = -1;
        }
      }
    }
    j.first_t = -1;
    jobs_.push_back(std::move(j));
  }
  changed_ = reallocate_ = dirty_ = true;
  return Status();
}

}  // namespace hydrozoa::sched
