#include "cluster/channel.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cluster/launch/records.h"
#include "core/process.h"
#include "runtime/comm/redis/redis_files.h"
#include "wire/control.h"
#include "wire/file_transfer.h"

namespace hydrozoa::cluster {

using runtime::redis::Connection;

std::string channelRecordDir() { return launcherStateDir() + "/redis"; }

namespace {

bool isLoopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0; }

Result<std::string> readPassword(const std::string& path) {
  auto text = readTextFile(path);
  if (!text.ok()) {
    return notFound(fmt::format("cluster.channel_password_file: {} (a file holding the Redis server's password)",
                                text.status().message()));
  }
  std::string p = *text;
  while (!p.empty() && (p.back() == '\n' || p.back() == '\r' || p.back() == ' ')) p.pop_back();
  if (p.empty() || p.find('\n') != std::string::npos) {
    return invalidArgument(fmt::format("cluster.channel_password_file: {} should hold the password on one line", path));
  }
  return p;
}

}  // namespace

Result<std::unique_ptr<JobChannel>> JobChannel::open(const JobSpec& spec, const std::string& dir,
                                                     const std::string& host, const std::string& job) {
  auto c = std::unique_ptr<JobChannel>(new JobChannel());
  c->job_ = job;
  c->sync_ = spec.channel_sync;
  c->timeout_ = spec.channel_timeout;
  if (spec.channel == "redis") {
    runtime::redis::ServerOptions so;
    so.dir = dir;
    so.bind = host;
    so.password = wire::newToken() + wire::newToken();
    // The workers' password runs what the channel sends and nothing else;
    // the coordinator's checks and cleanup use the admin user.
    so.commands = runtime::redis::kChannelCommands;
    // At most half this machine's memory: past it a write fails (noeviction)
    // and the worker says the store is full, where the host would swap.
    so.maxmemory = static_cast<Bytes>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE) / 2;
    HZ_ASSIGN_OR_RETURN(c->server_, runtime::redis::LocalServer::start(so));
    c->address_ = c->server_->address();
    c->password_ = c->server_->password();
  } else {
    HZ_ASSIGN_OR_RETURN(c->address_, runtime::redis::parseUrl(spec.channel, "cluster.channel"));
    if (!spec.channel_password_file.empty()) {
      HZ_ASSIGN_OR_RETURN(c->password_, readPassword(spec.channel_password_file));
    }
  }
  HZ_ASSIGN_OR_RETURN(Connection admin,
                      c->server_ ? Connection::open(c->address_, c->server_->adminPassword(), 10, "admin")
                                 : Connection::open(c->address_, c->password_, 10));
  HZ_RETURN_IF_ERROR(runtime::redis::checkStore(admin));
  c->admin_.emplace(std::move(admin));
  c->workers_ = c->address_;
  if (isLoopback(c->address_.host) && !isLoopback(host)) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    HZ_ASSIGN_OR_RETURN(c->workers_.port, runtime::redis::freePort(host));
    c->workers_.host = host;
    HZ_ASSIGN_OR_RETURN(c->relay_, spawnOwned({"socat", fmt::format("TCP-LISTEN:{},bind={},fork,reuseaddr",
                                                                    c->workers_.port, host),
                                               fmt::format("TCP:{}:{}", c->address_.host, c->address_.port)},
                                              dir + "/relay.log"));
    // Ready once it answers through the relay.
    Status reached = unavailable("socat did not start");
    for (int i = 0; i < 200 && !reached.ok(); ++i) {
      reached = Connection::open(c->workers_, c->password_, 1).status();
      if (!reached.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!reached.ok()) {
      return unavailable(fmt::format("cannot relay the Redis channel at {} to the workers' network at {}:{} with "
                                     "socat (scripts/setup installs it): {}",
                                     c->address_.url(), host, c->workers_.port, reached.message()));
    }
  }
  if (!c->server_) {
    // Keys a killed coordinator leaves in the user's server: `hydrozoa cleanup`.
    const std::string recordDir = channelRecordDir();
    if (ensureDir(launcherStateDir()).ok() && ensureDir(recordDir).ok()) {
      Json record = recordOwner(job);
      record["url"] = c->address_.url();
      record["prefix"] = c->prefix();
      record["password_file"] = spec.channel_password_file;
      c->record_ = recordDir + "/" + job + ".json";
      if (Status s = writeFileAtomically(c->record_, record.dump(2)); !s.ok()) {
        spdlog::warn("no cleanup record for the channel's keys: {}", s.message());
        c->record_.clear();
      }
    }
  }
  return c;
}

JobChannel::~JobChannel() {
  if (admin_) {
    if (auto n = runtime::redis::deleteMatching(*admin_, prefix() + ":*"); !n.ok()) {
      spdlog::warn("the job's keys in the Redis channel were not all deleted: {}", n.status().message());
    } else if (!record_.empty()) {
      ::unlink(record_.c_str());
    }
  }
  admin_.reset();
  stopOwned(&relay_);
  if (server_) server_->stop();
}

Json JobChannel::assign(int generation, const std::string& checkpoint) const {
  Json a = {{"url", workers_.url()},
            {"password", password_},
            {"ns", fmt::format("{}:g{}", prefix(), generation)},
            {"sync", sync_},
            {"timeout", timeout_},
            {"state", statePrefix()}};
  if (heldStep_ >= 0 && !checkpoint.empty() && checkpoint == heldDir_) {
    a["restore"] = fmt::format("{}:{}", statePrefix(), heldStep_);
  }
  return a;
}

Status JobChannel::fetchState(std::int64_t step, const std::string& file, Bytes bytes, const std::string& dest) {
  if (!admin_) return unavailable("the coordinator has no connection to the Redis channel");
  stateSteps_.insert(step);
  return runtime::redis::getFile(*admin_, fmt::format("{}:{}:{}", statePrefix(), step, file), dest, bytes,
                                 wire::kMaxFileBytes);
}

void JobChannel::deleteState(std::int64_t step) {
  stateSteps_.erase(step);
  if (heldStep_ == step) heldStep_ = -1;
  if (!admin_) return;
  if (auto n = runtime::redis::deleteMatching(*admin_, fmt::format("{}:{}:*", statePrefix(), step)); !n.ok()) {
    spdlog::warn("step {}'s state in the Redis channel was not deleted: {}", step, n.status().message());
  }
}

void JobChannel::keepState(std::int64_t step, const std::string& dir) {
  const bool stored = stateSteps_.count(step) > 0;
  for (const std::int64_t s : std::set<std::int64_t>(stateSteps_)) {
    if (s != step) deleteState(s);
  }
  heldStep_ = stored ? step : -1;
  heldDir_ = stored ? dir : "";
}

void JobChannel::dropState(std::int64_t step) {
  if (stateSteps_.count(step)) deleteState(step);
}

void JobChannel::clearGeneration(int generation) {
  if (!admin_) return;
  if (auto n = runtime::redis::deleteMatching(*admin_, fmt::format("{}:g{}:*", prefix(), generation)); !n.ok()) {
    spdlog::warn("generation {}'s keys in the Redis channel were not deleted: {}", generation, n.status().message());
  }
}

std::string JobChannel::describe() const {
  if (relay_ > 0) return fmt::format("{} (relayed to the workers at {})", address_.url(), workers_.url());
  return address_.url() + (server_ ? " (the job's own redis-server)" : "");
}

std::int64_t JobChannel::keysLeft() {
  if (!admin_) return -1;
  auto n = runtime::redis::countMatching(*admin_, prefix() + ":g*");  // not the state it holds
  return n.ok() ? *n : -1;
}

Result<std::vector<std::string>> removeChannelKeys(const Json& record) {
  const std::string url = record.value("url", ""), prefix = record.value("prefix", "");
  const std::string passwordFile = record.value("password_file", "");
  if (prefix.rfind("hz:", 0) != 0 || prefix.size() < 4) return invalidArgument("the record names no job's keys");
  HZ_ASSIGN_OR_RETURN(auto address, runtime::redis::parseUrl(url, "the record's url"));
  std::string password;
  if (!passwordFile.empty()) {
    HZ_ASSIGN_OR_RETURN(password, readPassword(passwordFile));
  }
  HZ_ASSIGN_OR_RETURN(Connection c, Connection::open(address, password, 10));
  HZ_ASSIGN_OR_RETURN(std::int64_t n, runtime::redis::deleteMatching(c, prefix + ":*"));
  return std::vector<std::string>{fmt::format("{} keys in {}", n, url)};
}

}  // namespace hydrozoa::cluster
