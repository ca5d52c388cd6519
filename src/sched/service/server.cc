#include "sched/service/server.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/secret.h"
#include "report/svg_chart.h"  // escapeHtml
#include "sched/service/scheduler.h"

namespace hydrozoa::sched {
namespace {

using report::escapeHtml;

// The service's token: made once (128 random bits), private to its owner.
Result<std::string> serviceToken(const std::string& stateDir) {
  const std::string path = stateDir + "/token";
  if (std::filesystem::exists(path)) {
    HZ_ASSIGN_OR_RETURN(std::string token, readTextFile(path));
    token.erase(token.find_last_not_of(" \n") + 1);
    if (token.size() >= 32) return token;
  }
  const std::string token = newToken();
  HZ_RETURN_IF_ERROR(writeFileAtomically(path, token + "\n"));
  ::chmod(path.c_str(), 0600);
  return token;
}

std::string duration(double s) {
  if (s < 120) return fmt::format("{:.0f} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.1f} h", s / 3600);
}

void reply(httplib::Response& res, int code, const Json& body) {
  res.status = code;
  res.set_content(body.dump(1) + "\n", "application/json");
}

}  // namespace

std::string statusPage(const Json& s) {
  static const char* kColours[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1"};
  std::map<std::string, std::string> colour;
  for (size_t t = 0; t < s["types"].size(); ++t) colour[s["types"][t]["name"]] = kColours[t % 7];
  std::string html = fmt::format(
      "<!doctype html><html><head><meta charset=utf-8><meta http-equiv=refresh content=5>"
      "<title>hydrozoa cluster {0}</title><style>body{{font:14px sans-serif;margin:20px}}"
      "table{{border-collapse:collapse;margin:8px 0 20px}}td,th{{border:1px solid #ccc;padding:3px 8px}}"
      "td.n{{text-align:right}}.tl td{{width:14px;height:16px;padding:0;border:1px solid #eee}}"
      ".err{{color:#b00}}</style></head><body><h1>hydrozoa cluster {0}</h1>"
      "<p>Policy <b>{1}</b>, rounds of {2}; round {3}, the next in {4}. Cost so far <b>${5:.4f}</b>.</p>",
      escapeHtml(s["cluster"]), escapeHtml(s["policy"]), duration(s["round_seconds"]), s["round"].get<int>(),
      duration(s["round_ends_in"]), s["cost_usd"].get<double>());
  if (!s["error"].get<std::string>().empty()) html += "<p class=err>" + escapeHtml(s["error"]) + "</p>";
  html += "<h2>Worker types</h2><table><tr><th>type<th>workers<th>free<th>launcher<th>vCPUs each<th>$/worker-hour";
  for (const Json& t : s["types"]) {
    html += fmt::format("<tr><td style='color:{}'>&#9632; {}<td class=n>{}<td class=n>{}<td>{}<td class=n>{}<td class=n>{}",
                        colour[t["name"]], escapeHtml(t["name"]), t["count"].get<int>(), t["free"].get<int>(),
                        escapeHtml(t["launcher"]), t["cpu_limit"].is_null() ? "-" : fmt::format("{}", t["cpu_limit"].get<double>()),
                        t["price"].get<double>());
  }
  html += "</table><h2>Jobs and the allocation</h2><table><tr><th>id<th>name<th>status<th>on<th>workers";
  for (const Json& t : s["types"]) html += "<th>X " + escapeHtml(t["name"]);
  html += "<th>rounds<th>preempted<th>progress<th>cost<th>ETA";
  for (const Json& j : s["jobs"]) {
    html += fmt::format("<tr><td class=n>{}<td>{}<td title='{}'>{}<td>{}<td class=n>{}", j["id"].get<int>(), escapeHtml(j["name"]),
                        escapeHtml(j["reason"]), escapeHtml(j["status"]), escapeHtml(j["type_name"]), j["scale"].get<int>());
    for (const Json& t : s["types"]) {
      const Json& a = j["allocation"];
      html += a.contains(t["name"].get<std::string>())
                  ? fmt::format("<td class=n>{:.2f}", a[t["name"].get<std::string>()].get<double>())
                  : std::string("<td class=n>-");
    }
    const auto total = j["total_steps"].get<std::int64_t>();
    html += fmt::format("<td class=n>{}<td class=n>{}<td class=n>{}<td class=n>${:.4f}<td class=n>{}",
                        j["rounds"].get<int>(), j["preemptions"].get<int>(),
                        total > 0 ? fmt::format("{}/{} steps", j["steps"].get<std::int64_t>(), total) : "-",
                        j["cost"].get<double>(), j["eta_seconds"].is_null() ? "-" : duration(j["eta_seconds"]));
  }
  html += "</table><h2>Rounds</h2><table class=tl><tr><th>job";
  const Json& rounds = s["rounds"];
  const size_t first = rounds.size() > 60 ? rounds.size() - 60 : 0;
  for (size_t r = first; r < rounds.size(); ++r) html += fmt::format("<th title='round {0}'>", rounds[r]["round"].get<int>());
  for (const Json& j : s["jobs"]) {
    const std::string id = std::to_string(j["id"].get<int>());
    html += "<tr><td>" + id;
    for (size_t r = first; r < rounds.size(); ++r) {
      const Json& placed = rounds[r]["placed"];
      html += placed.contains(id) ? fmt::format("<td style='background:{}' title='{}'>", colour[placed[id]],
                                                escapeHtml(placed[id]))
                                  : std::string("<td>");
    }
  }
  html += "</table><p>Each column a round, each cell the worker type the job ran on. The page refreshes every 5 s.</p>"
          "</body></html>\n";
  return html;
}

Status serve(ClusterConfig config, const std::string& binary, const std::atomic<int>* stop) {
  HZ_ASSIGN_OR_RETURN(std::unique_ptr<Scheduler> scheduler, Scheduler::open(std::move(config), binary, wallSeconds()));
  const std::string dir = scheduler->stateDir();
  const int lock = ::open((dir + "/serve.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0 || ::flock(lock, LOCK_EX | LOCK_NB) != 0) {
    auto other = readJsonFile(dir + "/service.json");
    return unavailable(fmt::format("another scheduler serves {} (pid {}); stop it first, or give this one another "
                                   "state_dir",
                                   dir, other.ok() ? other->value("pid", -1) : -1));
  }
  HZ_ASSIGN_OR_RETURN(const std::string token, serviceToken(dir));
  std::mutex mu;
  httplib::Server http;
  http.set_payload_max_length(1 << 20);
  http.set_read_timeout(5, 0);
  auto authorized = [&](const httplib::Request& req, httplib::Response& res) {
    std::string given = req.get_param_value("token");
    const std::string header = req.get_header_value("Authorization");
    if (header.rfind("Bearer ", 0) == 0) given = header.substr(7);
    if (sameSecret(given, token)) return true;
    spdlog::warn("refused a request for {} without the service's token", req.path);
    reply(res, 401, {{"error", "this scheduler needs its token (the token file in its state directory)"}});
    return false;
  };
  http.Get("/", [&](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    std::lock_guard<std::mutex> g(mu);
    res.set_content(statusPage(scheduler->toJson(wallSeconds())), "text/html; charset=utf-8");
  });
  http.Get("/api/state", [&](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    std::lock_guard<std::mutex> g(mu);
    reply(res, 200, scheduler->toJson(wallSeconds()));
  });
  http.Post("/api/jobs", [&](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    const Json body = parseJsonOrDiscarded(req.body);
    if (!body.is_object() || !body.contains("spec")) return reply(res, 400, {{"error", "expected {\"spec\": {...}}"}});
    auto number = [&](const char* key) {
      const Json& v = body.value(key, Json(-1.0));
      return v.is_number() ? v.get<double>() : std::nan("");
    };
    std::lock_guard<std::mutex> g(mu);
    const Json& entity = body.value("entity", Json(""));
    if (!entity.is_string()) return reply(res, 400, {{"error", "entity: expected a string"}});
    auto id = scheduler->submit(body["spec"], body.contains("weight") ? number("weight") : 1.0, number("slo_hours"),
                                number("budget"), wallSeconds(), entity.get<std::string>());
    if (!id.ok()) return reply(res, 400, {{"error", id.status().message()}});
    reply(res, 200, {{"id", *id}});
  });
  http.Post(R"(/api/jobs/(\d{1,9})/cancel)", [&](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    std::lock_guard<std::mutex> g(mu);
    const Status s = scheduler->cancel(std::stoi(req.matches[1].str()), wallSeconds());
    if (!s.ok()) return reply(res, s.code() == ErrorCode::kNotFound ? 404 : 400, {{"error", s.message()}});
    reply(res, 200, {{"ok", true}});
  });
  const int configured = scheduler->config().port;
  const int port = configured > 0 ? (http.bind_to_port("127.0.0.1", configured) ? configured : -1)
                                  : http.bind_to_any_port("127.0.0.1");
  if (port <= 0) {
    return unavailable(fmt::format("cannot listen on 127.0.0.1:{}: in use? (port in the cluster config; 0: any free)",
                                   configured));
  }
  const std::string url = fmt::format("http://127.0.0.1:{}", port);
  HZ_RETURN_IF_ERROR(writeFileAtomically(dir + "/service.json",
                                         Json({{"url", url}, {"pid", ::getpid()}}).dump() + "\n"));
  ::chmod((dir + "/service.json").c_str(), 0600);
  std::thread listener([&] { http.listen_after_bind(); });
  spdlog::info("the scheduler of {} serves {} (state in {}; policy {}, rounds of {} s); status page: {}/?token=... "
               "(the token is in {}/token)",
               scheduler->config().name, url, dir, scheduler->config().policy, scheduler->config().round, url, dir);
  while (!stop->load()) {
    {
      std::lock_guard<std::mutex> g(mu);
      scheduler->tick(wallSeconds());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  spdlog::info("stopping: the running jobs checkpoint and stop; the next start resumes them");
  {
    std::lock_guard<std::mutex> g(mu);
    scheduler->shutdown(90);
  }
  http.stop();
  listener.join();
  std::filesystem::remove(dir + "/service.json");
  ::close(lock);
  return Status();
}

Result<ServiceClient> ServiceClient::connect(const std::string& stateDir) {
  ServiceClient c;
  c.stateDir_ = stateDir;
  auto service = readJsonFile(stateDir + "/service.json");
  if (!service.ok()) {
    return unavailable(fmt::format("no scheduler serves {}: start one with hydrozoa cluster serve --config "
                                   "cluster.yaml (or give --cluster its state directory)",
                                   stateDir));
  }
  c.url_ = service->value("url", "");
  c.pid_ = service->value("pid", -1);
  HZ_ASSIGN_OR_RETURN(c.token_, readTextFile(stateDir + "/token"));
  c.token_.erase(c.token_.find_last_not_of(" \n") + 1);
  return c;
}

namespace {

Result<Json> answer(const httplib::Result& r, const std::string& url, int pid) {
  if (!r) {
    return unavailable(fmt::format("the scheduler at {} does not answer ({}); is it still running (pid {})?", url,
                                   httplib::to_string(r.error()), pid));
  }
  const Json body = parseJsonOrDiscarded(r->body);
  if (r->status != 200) {
    const std::string error = body.is_object() ? body.value("error", r->body) : r->body;
    return Status(r->status == 404 ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument, error);
  }
  if (body.is_discarded()) return parseError(fmt::format("the scheduler at {} answered what is not JSON", url));
  return body;
}

}  // namespace

Result<Json> ServiceClient::get(const std::string& path) const {
  httplib::Client http(url_);
  http.set_bearer_token_auth(token_);
  http.set_connection_timeout(5, 0);
  http.set_read_timeout(30, 0);
  return answer(http.Get(path), url_, pid_);
}

Result<Json> ServiceClient::post(const std::string& path, const Json& body) const {
  httplib::Client http(url_);
  http.set_bearer_token_auth(token_);
  http.set_connection_timeout(5, 0);
  http.set_read_timeout(30, 0);
  return answer(http.Post(path, body.dump(), "application/json"), url_, pid_);
}

}  // namespace hydrozoa::sched
