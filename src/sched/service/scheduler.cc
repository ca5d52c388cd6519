#include "sched/service/scheduler.h"

#include <signal.h>
#include <sys/stat.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "cluster/job_spec.h"
#include "core/paths.h"
#include "sched/problem.h"

namespace hydrozoa::sched {
namespace fs = std::filesystem;

double wallSeconds() {
  return static_cast<double>(
             std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count()) /
         1e6;
}

Result<std::unique_ptr<Scheduler>> Scheduler::open(ClusterConfig config, std::string binary, double now) {
  std::unique_ptr<Scheduler> s(new Scheduler());
  if (config.state_dir.empty()) config.state_dir = defaultStateDir();
  config.state_dir = fs::absolute(config.state_dir).lexically_normal().string();
  HZ_RETURN_IF_ERROR(privateDirectory(config.state_dir, "state_dir"));
  HZ_RETURN_IF_ERROR(privateDirectory(config.state_dir + "/jobs", "state_dir"));
  s->config_ = std::move(config);
  s->binary_ = std::move(binary);
  HZ_ASSIGN_OR_RETURN(s->policy_, makePolicy(s->config_.policy));
  HZ_ASSIGN_OR_RETURN(s->fallback_, makePolicy("max_min_fairness"));
  s->mechanism_.fillIdle(s->config_.fill_idle);
  HZ_RETURN_IF_ERROR(s->load(now));
  s->roundEnd_ = now;  // a round at the first tick
  return s;
}

std::string Scheduler::jobDir(int id) const { return fmt::format("{}/jobs/{}", config_.state_dir, id); }

ServiceJob* Scheduler::find(int id) {
  for (auto& j : jobs_) {
    if (j.id == id) return &j;
  }
  return nullptr;
}

bool Scheduler::active(const ServiceJob& j) const { return !j.ended() && !j.cancel && !j.over_budget; }

Result<int> Scheduler::submit(const Json& spec, double weight, double sloHours, double budget, double now,
                              const std::string& entity) {
  if (!(weight > 0 && weight <= 1e6)) {
    return invalidArgument(fmt::format("--weight: {} is not in (0, 1e6]", weight));
  }
  if (sloHours != -1 && !(sloHours > 0 && sloHours <= 1e5)) {
    return invalidArgument(fmt::format("--slo: {} hours is not in (0, 100000]", sloHours));
  }
  if (budget != -1 && !(budget > 0 && budget <= 1e9)) {
    return invalidArgument(fmt::format("--budget: {} USD is not in (0, 1e9]", budget));
  }
  if (config_.entities.empty() && !entity.empty()) {
    return invalidArgument(fmt::format("--entity {}: the pool's policy {} shares by job, not by entity; submit "
                                       "without --entity",
                                       entity, config_.policy));
  }
  if (!config_.entities.empty() && entityIndex(entity) < 0) {
    std::vector<std::string> known;
    for (const Problem::Entity& e : config_.entities) known.push_back(e.name);
    return invalidArgument(fmt::format("{}: the pool shares by entity (policy {}): give the job one with --entity "
                                       "(known: {})",
                                       entity.empty() ? "no --entity" : fmt::format("--entity {}", entity),
                                       config_.policy, fmt::join(known, ", ")));
  }
  HZ_ASSIGN_OR_RETURN(cluster::JobSpec js, cluster::parseJobSpec(spec, "the submitted job"));
  HZ_RETURN_IF_ERROR(cluster::validateJobSpec(js, "the submitted job"));
  ServiceJob j;
  j.id = nextId_;
  j.name = js.name;
  j.weight = weight;
  j.entity = entity;
  j.slo_hours = sloHours;
  j.budget = budget;
  j.submitted = now;
  j.scale = js.data_parallel && js.stages ? *js.data_parallel * *js.stages : js.workers;
  j.measured.assign(config_.types.size(), 0.0);
  int largest = 0;
  for (const PoolType& t : config_.types) largest = std::max(largest, t.count);
  if (j.scale > largest) {
    return invalidArgument(fmt::format("the job needs {} workers at once but the largest worker type of {} has {}; "
                                       "lower cluster.workers (or plan.data_parallel × plan.stages)",
                                       j.scale, config_.name, largest));
  }
  const std::string dir = jobDir(j.id);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return ioError(fmt::format("{}: cannot create it: {}", dir, ec.message()));
  HZ_RETURN_IF_ERROR(writeFileAtomically(dir + "/job.yaml", toYaml(cluster::jobSpecToJson(js))));
  ++nextId_;
  jobs_.push_back(std::move(j));
  changed_ = reallocate_ = dirty_ = true;
  HZ_RETURN_IF_ERROR(save());
  spdlog::info("job {} ({}) submitted: {} workers, weight {}{}", jobs_.back().id, jobs_.back().name, jobs_.back().scale,
               weight, entity.empty() ? "" : ", entity " + entity);
  return jobs_.back().id;
}

Status Scheduler::cancel(int id, double now) {
  ServiceJob* j = find(id);
  if (!j) return notFound(fmt::format("no job {} (hydrozoa jobs lists them)", id));
  if (j->ended()) {
    return invalidArgument(fmt::format("job {} has ended already ({})", id, j->status));
  }
  j->cancel = true;
  auto p = processes_.find(id);
  if (p != processes_.end() && p->second.running()) {
    p->second.signal(SIGINT);  // a clean stop: checkpointed, its workers removed
    j->stop_sent = true;
  } else {
    j->status = "cancelled";
    j->finished = now;
  }
  changed_ = reallocate_ = dirty_ = true;
  return save();
}

// NOTE [Throughput estimates]
// A policy needs each job's steps/s on each worker type (Gavel §5.6). The
// service measures them: over each run of a job on a type, the steps since
// its first step event over the time they took (the events' training
// clock), the latest run's figure replacing the one before. A type the job
// has not run on yet is estimated from a type it has: the measured figure
// scaled by the types' speed hints (their CPU quotas); a job not measured
// anywhere gets the hints themselves, the same for every new job. The
// allocation is solved again whenever a job gets its first figure on a
// type, so a new job is explored on the types it has not run on, as Gavel
// does for job types it has no measurement of.
double estimateThroughput(const std::vector<double>& measured, const std::vector<PoolType>& types, size_t type) {
  if (measured[type] > 0) return measured[type];
  double best = 0, scaled = 0;
  for (size_t t = 0; t < types.size(); ++t) {
    if (measured[t] > best) {
      best = measured[t];
      scaled = measured[t] * types[type].speedHint() / types[t].speedHint();
    }
  }
  return best > 0 ? scaled : types[type].speedHint();
}

int Scheduler::entityIndex(const std::string& name) const {
  for (size_t e = 0; e < config_.entities.size(); ++e) {
    if (config_.entities[e].name == name) return static_cast<int>(e);
  }
  return -1;
}

double Scheduler::estimate(const ServiceJob& j, size_t type) const {
  return estimateThroughput(j.measured, config_.types, type);
}

void Scheduler::onEvent(ServiceJob& j, const Json& e) {
  const std::string kind = e.value("event", "");
  if (kind == "running") {
    if (j.status == "starting") j.status = "running";
    j.scale = e.value("workers", j.scale);
    j.total_steps = e.value("total_steps", j.total_steps);
    j.steps = e.value("step", j.steps);
    j.first_t = -1;
  } else if (kind == "step") {
    if (j.placed_at >= 0) {
      j.start_seconds += lastTick_ - j.placed_at;
      ++j.starts_measured;
      j.placed_at = -1;
    }
    j.steps = std::max(j.steps, e.value("step", std::int64_t{0}));
    const double t = e.value("t", 0.0);
    if (j.first_t < 0) {
      j.first_t = t;
      j.first_step = j.steps;
    } else if (j.type >= 0 && j.steps - j.first_step >= 3 && t > j.first_t) {
      const bool first = j.measured[static_cast<size_t>(j.type)] <= 0;
      j.measured[static_cast<size_t>(j.type)] = static_cast<double>(j.steps - j.first_step) / (t - j.first_t);
      if (first) reallocate_ = true;
    }
  } else if (kind == "worker_lost") {
    // NOTE [A worker lost in a round]: the job recovers it as any run does
    // (its checkpoint or a live replica); the scheduler measures the job's
    // throughput again from its first step after the recovery, so that the
    // stall does not pass for the type's speed, and decides the allocation
    // again at the next round with what it then knows.
    ++j.workers_lost;
    j.first_t = -1;
    reallocate_ = dirty_ = true;
    spdlog::info("job {} ({}) lost worker {} ({}): it recovers; the next round is decided again", j.id, j.name,
                 e.value("worker", -1), e.value("why", std::string("no reason given")));
  } else if (kind == "recovered") {
    j.first_t = -1;
  } else if (kind == "epoch") {
    j.accuracy = e.value("test_accuracy", -1.0);
  } else if (kind == "finished") {
    j.outcome = e.value("status", "");
    j.reason = e.value("reason", "");
    j.steps = e.value("step", j.steps);
    j.total_steps = e.value("total_steps", j.total_steps);
  }
}

void Scheduler::onExit(ServiceJob& j, double now) {
  // Told to stop and gone without its "finished" (killed by the signal
  // before it could say): stopped as asked; its checkpoint resumes it.
  const std::string outcome = j.outcome.empty() && j.stop_sent ? "preempted" : j.outcome;
  j.outcome.clear();
  j.stop_sent = false;
  if (j.placed_at >= 0) {  // a start that never reached a step: all of it lost
    j.start_seconds += now - j.placed_at;
    ++j.starts_measured;
    j.placed_at = -1;
  }
  processes_.erase(j.id);
  j.pid = -1;
  j.type = -1;
  j.first_t = -1;
  changed_ = dirty_ = true;
  if (outcome == "preempted" || outcome == "interrupted") {
    if (j.cancel) {
      j.status = "cancelled";
    } else if (j.over_budget) {
      j.status = "stopped";
      j.reason = fmt::format("its budget of ${:.2f} is spent", j.budget);
    } else {
      j.status = "paused";
      j.reason.clear();
      ++j.preemptions;
      return;
    }
  } else if (outcome == "completed" || outcome == "stopped") {
    j.status = "completed";
    j.reason.clear();
  } else if (j.cancel) {
    j.status = "cancelled";
  } else if (outcome.empty() && j.crashes < kCrashRestarts) {
    // Killed (the OOM killer, a kill -9, a lost machine) before it could
    // say: back in the queue, to resume from its last checkpoint on
    // whatever the next round gives it.
    ++j.crashes;
    j.status = "paused";
    j.reason = fmt::format("its hydrozoa train ended without saying how (restart {} of {}; see {}/log)", j.crashes,
                           kCrashRestarts, jobDir(j.id));
    spdlog::warn("job {} ({}): {}", j.id, j.name, j.reason);
    return;
  } else {
    j.status = "failed";
    if (outcome.empty()) {
      j.reason = fmt::format("its hydrozoa train ended without saying how; see {}/log", jobDir(j.id));
    }
  }
  j.finished = now;
  reallocate_ = true;
  spdlog::info("job {} ({}) {}{}", j.id, j.name, j.status, j.reason.empty() ? "" : ": " + j.reason);
}

void Scheduler::drainEvents(ServiceJob& j, JobProcess& p) {
  for (const Json& e : p.newEvents()) onEvent(j, e);
  j.events_offset = p.offset();
}

void Scheduler::readEvents(ServiceJob& j, double dt, double now) {
  auto p = processes_.find(j.id);
  if (p == processes_.end()) return;
  drainEvents(j, p->second);
  if (j.type >= 0) {
    const double usd = dt * j.scale / 3600 * config_.types[static_cast<size_t>(j.type)].price;
    j.cost += usd;
    cost_ += usd;
    j.held_seconds += dt;
    if (j.round_type == j.type) j.round_seconds += dt;
  }
  if (j.budget > 0 && j.cost >= j.budget && !j.over_budget && !j.cancel) {
    j.over_budget = true;
    j.stop_sent = true;
    p->second.signal(SIGINT);
    spdlog::info("job {} ({}) has spent its budget of ${:.2f}: stopping it", j.id, j.name, j.budget);
  }
  if (!p->second.running()) {
    drainEvents(j, p->second);  // what it wrote last
    onExit(j, now);
  }
  dirty_ = true;
}

int Scheduler::freeWorkers(size_t type) const {
  int used = 0;
  for (const auto& j : jobs_) {
    if (j.type == static_cast<int>(type)) used += j.scale;
  }
  return config_.types[type].count - used;
}

bool Scheduler::idle() const {
  return std::none_of(jobs_.begin(), jobs_.end(), [](const ServiceJob& j) { return j.holdsWorkers(); });
}

bool Scheduler::waitingJobFits() const {
  for (const auto& j : jobs_) {
    if (!active(j) || j.holdsWorkers()) continue;
    for (size_t t = 0; t < config_.types.size(); ++t) {
      if (freeWorkers(t) >= j.scale) return true;
    }
  }
  return false;
}

void Scheduler::tick(double now) {
  const double dt = lastTick_ > 0 ? std::max(0.0, now - lastTick_) : 0;
  lastTick_ = now;
  for (auto& j : jobs_) readEvents(j, dt, now);
  // Rounds at their boundaries (Gavel's mechanism: a job that arrives waits
  // for the next, one that ends leaves its workers idle until then), but at
  // once when jobs come to a pool where none runs.
  if (now >= roundEnd_ || (changed_ && idle() && waitingJobFits())) beginRound(now);
  startPlaced(now);
  if (dirty_ && now - lastSave_ >= 1) {
    if (Status s = save(); !s.ok()) spdlog::error("{}", s.message());
  }
}

void Scheduler::beginRound(double now) {
  std::vector<int> ids;
  for (const auto& j : jobs_) {
    if (active(j)) ids.push_back(j.id);
  }
  // The round that ends: what each job ran, for the mechanism's shares.
  if (ids == allocated_ && !reallocate_) {
    for (size_t m = 0; m < allocated_.size(); ++m) {
      ServiceJob& j = *find(allocated_[m]);
      if (j.round_type >= 0 && j.round_seconds > 0) mechanism_.record(static_cast<int>(m), j.round_type, j.round_seconds);
    }
  }
  for (auto& j : jobs_) {
    j.round_seconds = 0;
    j.round_type = j.type;
  }
  changed_ = false;
  roundStart_ = now;
  roundEnd_ = now + config_.round;
  ++round_;
  if (ids.empty()) {
    allocated_.clear();
    allocation_ = {};
    return;
  }
  Problem problem;
  for (const PoolType& t : config_.types) problem.types.push_back({t.name, t.count});
  if (std::all_of(config_.types.begin(), config_.types.end(), [](const PoolType& t) { return t.price > 0; })) {
    for (const PoolType& t : config_.types) problem.price.push_back(t.price);
  }
  problem.budget = config_.budget < 0 ? -1 : std::max(0.0, config_.budget - cost_);
  problem.entities = config_.entities;
  std::int64_t longest = 0;
  for (const auto& j : jobs_) longest = std::max(longest, j.total_steps - j.steps);
  for (int id : ids) {
    const ServiceJob& j = *find(id);
    JobDemand d;
    d.type = fmt::format("job {}", id);
    d.scale_factor = j.scale;
    d.weight = j.weight;
    d.entity = entityIndex(j.entity);
    // Until its first start says, a job's length is unknown: as long as the longest known.
    d.steps_remaining = static_cast<double>(j.total_steps > 0 ? j.total_steps - j.steps : std::max<std::int64_t>(longest, 1000));
    d.steps_remaining = std::max(1.0, d.steps_remaining);
    d.elapsed = now - j.submitted;
    d.slo_left = j.slo_hours > 0 && j.submitted + j.slo_hours * 3600 > now ? j.submitted + j.slo_hours * 3600 - now : -1;
    for (size_t t = 0; t < config_.types.size(); ++t) {
      d.throughput.push_back(j.scale <= config_.types[t].count ? estimate(j, t) : 0.0);
    }
    problem.jobs.push_back(std::move(d));
  }
  for (size_t k = 0; k < ids.size(); ++k) {
    const double iso = isolatedThroughput(problem, static_cast<int>(k));
    problem.jobs[k].isolated_elapsed = iso > 0 ? static_cast<double>(find(ids[k])->steps) / iso : 0;
  }
  if (ids != allocated_ || reallocate_ || allocation_.x.empty()) {
    auto a = policy_->allocate(problem);
    if (a.ok()) {
      error_.clear();
    } else {
      // One clear line, and the pool goes on: fairness until the policy can decide.
      const std::string why = fmt::format("{}: {}; allocating by max_min_fairness meanwhile", config_.policy,
                                          a.status().message());
      if (why != error_) spdlog::error("{}", why);
      error_ = why;
      a = fallback_->allocate(problem);
    }
    if (!a.ok()) {
      error_ = a.status().message();
      spdlog::error("{}", error_);
      return;
    }
    allocation_ = std::move(*a);
    allocated_ = ids;
    reallocate_ = false;
    mechanism_.reset(ids.size(), config_.types.size());
  }
  std::vector<int> previous;
  for (int id : ids) previous.push_back(find(id)->type);
  const std::vector<int> placed = mechanism_.place(problem, allocation_, previous);
  Json round = {{"round", round_}, {"start", now}, {"placed", Json::object()}, {"preempted", Json::array()}};
  for (size_t k = 0; k < ids.size(); ++k) {
    ServiceJob& j = *find(ids[k]);
    const int t = placed[k];
    j.target = t;
    if (t >= 0) {
      ++j.rounds;
      round["placed"][std::to_string(j.id)] = config_.types[static_cast<size_t>(t)].name;
    }
    auto p = processes_.find(j.id);
    const bool running = p != processes_.end() && p->second.running();
    if (running && j.type == t) {
      ++j.lease_extensions;  // it keeps its workers: no preemption
    } else if (running && j.status != "preempting") {
      p->second.signal(SIGUSR2);
      j.status = "preempting";
      j.stop_sent = true;
      round["preempted"].push_back(j.id);
    }
  }
  timeline_.push_back(std::move(round));
  if (timeline_.size() > 500) timeline_.erase(timeline_.begin());
  dirty_ = true;
}

void Scheduler::startPlaced(double now) {
  for (auto& j : jobs_) {
    if (!active(j) || j.target < 0 || j.holdsWorkers()) continue;
    const auto t = static_cast<size_t>(j.target);
    if (freeWorkers(t) < j.scale) continue;  // the jobs it replaces are still stopping
    const std::string dir = jobDir(j.id);
    std::vector<std::string> argv = {binary_, "train"};
    if (fs::exists(dir + "/run/plan.json")) {
      argv.insert(argv.end(), {"--resume", dir + "/run"});
    } else {
      std::error_code ec;
      fs::remove_all(dir + "/run", ec);  // a start that ended before it trained
      argv.insert(argv.end(), {dir + "/job.yaml", "--out", dir + "/run"});
    }
    argv.insert(argv.end(), {"--no-progress", "--events", dir + "/events.jsonl"});
    const auto flags = config_.types[t].trainFlags();
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto p = JobProcess::spawn(argv, dir, dir + "/log", dir + "/events.jsonl");
    if (!p.ok()) {
      j.status = "failed";
      j.reason = p.status().message();
      j.finished = now;
      continue;
    }
    j.pid = p->pid();
    j.events_offset = p->offset();
    processes_[j.id] = std::move(*p);
    j.type = j.target;
    j.round_type = j.type;
    j.placed_at = roundStart_;
    j.status = "starting";
    j.outcome.clear();
    ++j.starts;
    dirty_ = true;
    spdlog::info("job {} ({}) {} on {} ({} workers)", j.id, j.name, j.starts == 1 ? "starts" : "resumes",
                 config_.types[t].name, j.scale);
  }
}

void Scheduler::shutdown(double grace) {
  for (auto& j : jobs_) {
    auto p = processes_.find(j.id);
    if (p != processes_.end() && p->second.running() && j.status != "preempting") {
      p->second.signal(SIGUSR2);
      j.status = "preempting";
      j.stop_sent = true;
    }
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace);
  while (!processes_.empty() && std::chrono::steady_clock::now() < until) {
    for (auto& j : jobs_) readEvents(j, 0, wallSeconds());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (auto& j : jobs_) j.target = -1;
  dirty_ = true;
  if (Status s = save(); !s.ok()) spdlog::error("{}", s.message());
}

Json Scheduler::toJson(double now) const {
  Json types = Json::array();
  for (size_t t = 0; t < config_.types.size(); ++t) {
    const PoolType& p = config_.types[t];
    types.push_back({{"name", p.name},
                     {"count", p.count},
                     {"free", freeWorkers(t)},
                     {"launcher", p.launcher},
                     {"cpu_limit", p.cpu_limit ? Json(*p.cpu_limit) : Json(nullptr)},
                     {"price", p.price}});
  }
  Json jobs = Json::array();
  for (const auto& j : jobs_) {
    Json o = jobToJson(j);
    if (j.holdsWorkers() && (j.cancel || j.over_budget)) o["status"] = j.cancel ? "cancelling" : "stopping";
    o["type_name"] = j.type >= 0 ? config_.types[static_cast<size_t>(j.type)].name : "";
    Json alloc = Json::object();
    double rate = 0;
    for (size_t m = 0; m < allocated_.size(); ++m) {
      if (allocated_[m] != j.id) continue;
      for (size_t t = 0; t < config_.types.size(); ++t) {
        alloc[config_.types[t].name] = allocation_.x[m][t];
        rate += allocation_.x[m][t] * estimate(j, t);
      }
    }
    o["allocation"] = alloc;
    o["estimated"] = Json::array();
    for (size_t t = 0; t < config_.types.size(); ++t) o["estimated"].push_back(estimate(j, t));
    const std::int64_t left = j.total_steps - j.steps;
    o["eta_seconds"] = active(j) && j.total_steps > 0 && rate > 0 ? Json(static_cast<double>(left) / rate) : Json(nullptr);
    o["age_seconds"] = (j.finished >= 0 ? j.finished : now) - j.submitted;
    jobs.push_back(std::move(o));
  }
  return {{"cluster", config_.name},
          {"policy", config_.policy},
          {"round_seconds", config_.round},
          {"round", round_},
          {"round_ends_in", std::max(0.0, roundEnd_ - now)},
          {"types", types},
          {"jobs", jobs},
          {"rounds", timeline_},
          {"cost_usd", cost_},
          {"error", error_},
          {"state_dir", config_.state_dir}};
}

}  // namespace hydrozoa::sched
