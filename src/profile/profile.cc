#include "profile/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/limits.h"
#include "profile/field_checks.h"
#include "profile/pipedream.h"

namespace hydrozoa::profile {

const Measurement* Profile::at(std::int64_t microbatch_size) const {
  for (const auto& m : measurements) {
    if (m.microbatch_size == microbatch_size) return &m;
  }
  return nullptr;
}

std::vector<std::int64_t> Profile::microbatchSizes() const {
  std::vector<std::int64_t> sizes;
  for (const auto& m : measurements) sizes.push_back(m.microbatch_size);
  return sizes;
}

Result<double> optimizerStateFactor(const std::string& optimizer) {
  if (optimizer == "sgd") return 0.0;
  if (optimizer == "sgd_momentum" || optimizer == "momentum") return 1.0;
  if (optimizer == "adam" || optimizer == "adamw") return 2.0;
  return invalidArgument(
      fmt::format("unknown optimizer \"{}\"; use sgd, sgd_momentum or adam", printable(optimizer)));
}

Json profileToJson(const Profile& p) {
  Json options = Json::object();
  for (const auto& [k, v] : p.options) options[k] = v;
  Json device = {{"name", p.device}};
  if (!p.device_kind.empty()) device["kind"] = p.device_kind;
  if (p.device_memory) device["memory_bytes"] = *p.device_memory;
  if (p.threads > 0) device["threads"] = p.threads;
  Json layers = Json::array();
  for (const auto& l : p.layers) {
    layers.push_back({{"name", l.name},
                      {"kind", l.kind},
                      {"parameter_bytes", l.parameter_bytes},
                      {"optimizer_state_bytes", l.optimizer_state_bytes},
                      {"optimizer_ms", l.optimizer_ms},
                      {"snapshot_ms", l.snapshot_ms}});
  }
  Json measurements = Json::array();
  for (const auto& m : p.measurements) {
    Json costs = Json::array();
    for (const auto& c : m.layers) {
      Json cost = {{"forward_ms", c.forward_ms},
                   {"backward_ms", c.backward_ms},
                   {"output_bytes", c.output_bytes},
                   {"stashed_bytes", c.stashed_bytes},
                   {"workspace_bytes", c.workspace_bytes}};
      if (c.cold_forward_ms > 0 || c.cold_backward_ms > 0) {
        cost["cold_forward_ms"] = c.cold_forward_ms;
        cost["cold_backward_ms"] = c.cold_backward_ms;
      }
      costs.push_back(std::move(cost));
    }
    measurements.push_back({{"microbatch_size", m.microbatch_size},
                            {"input_bytes", m.input_bytes},
                            {"heap_bytes", m.heap_bytes},
                            {"layers", costs}});
  }
  Json j = {{"schema", kProfileSchema},
            {"model", {{"name", p.model}, {"options", options}}},
            {"source", p.source},
            {"device", device},
            {"optimizer", p.optimizer},
            {"runtime_bytes", p.runtime_bytes},
            {"layers", layers},
            {"measurements", measurements}};
  if (p.network) {
    const auto& n = *p.network;
    j["network"] = {{"bandwidth_bytes_per_s", n.bandwidth},
                    {"latency_s", n.latency},
                    {"allreduce",
                     {{"alpha_s_per_byte", n.alpha}, {"beta_s", n.beta}, {"workers", n.allreduce_workers}, {"r2", n.fit_r2}}}};
    if (n.shared_memory) {
      j["network"]["shared_memory_allreduce"] = {{"s_per_byte", n.shared_memory->seconds_per_byte},
                                                 {"s_per_allreduce", n.shared_memory->seconds_per_allreduce},
                                                 {"r2", n.shared_memory->r2}};
    }
  }
  if (p.network && p.network->messages) {
    Json rows = Json::array();
    for (const MessageCpu& m : p.network->messages->rows) {
      rows.push_back({{"bytes", m.bytes},
                      {"send_s", m.send},
                      {"send_threads_s", m.send_threads},
                      {"post_s", m.post},
                      {"receive_s", m.receive}});
    }
    j["network"]["messages"] = rows;
  }
  if (p.network && p.network->delivery) {
    const MessageDelivery& d = *p.network->delivery;
    j["network"]["delivery"] = {{"bytes", d.bytes},      {"mean_s", d.mean},
                                {"median_s", d.median}, {"p90_s", d.p90},
                                {"helper_cpu_s", d.helper_cpu}};
  }
  if (p.corun) {
    j["corun"] = {{"cores", p.corun->cores},
                  {"microbatch_size", p.corun->microbatch_size},
                  {"slowdown", p.corun->slowdown}};
  }
  return j;
}

MessageCpu MessageCpuTable::at(Bytes n) const {
  HZ_CHECK(!rows.empty());
  if (n <= rows.front().bytes || rows.size() == 1) {
    MessageCpu m = n <= rows.front().bytes ? rows.front() : rows.back();
    m.bytes = n;
    return m;
  }
  size_t hi = 1;
  while (hi + 1 < rows.size() && rows[hi].bytes < n) ++hi;
  const MessageCpu& a = rows[hi - 1];
  const MessageCpu& b = rows[hi];
  const double t = static_cast<double>(n - a.bytes) / static_cast<double>(b.bytes - a.bytes);
  auto line = [&](Seconds MessageCpu::*f) {
    const Seconds v = a.*f + t * (b.*f - a.*f);
    return n > b.bytes ? std::max(b.*f, v) : v;
  };
  return {n, line(&MessageCpu::send), line(&MessageCpu::send_threads), line(&MessageCpu::post),
          line(&MessageCpu::receive)};
}

namespace {

// The allreduce fit (profile/network.h): alpha may come out slightly negative
// (the fit's slope below 1/bandwidth); a second per byte is beyond any network.
constexpr NumberRange kAlphaRange{-1, 1, "seconds per byte"};
constexpr NumberRange kR2Range{-1, 1, "a goodness of fit"};
constexpr Range kAllreduceWorkersRange{2, kWorkersRange.max};
constexpr Range kCorunCoresRange{2, kThreadsRange.max};

}  // namespace

Result<Profile> profileFromJson(const Json& j, const std::string& origin) {
  Profile p;
  ObjectReader top(j, origin);
  const std::string schema = top.string("schema");
  if (top.ok() && schema.rfind("hydrozoa.plan/", 0) == 0) {
    // A plan where a profile was expected is the wrong file, not an old one.
    return parseError(fmt::format("{}: this is a plan (plan.json, schema \"{}\"), not a profile; a profile comes "
                                  "from `hydrozoa profile --model NAME -o p.json` (a run directory has one as "
                                  "profile.json), and `hydrozoa show {}` prints this plan",
                                  origin, printable(schema), origin));
  }
  if (top.ok() && schema != kProfileSchema) {
    top.fail("schema", fmt::format("is \"{}\", this hydrozoa reads \"{}\" (re-run `hydrozoa profile`)",
                                   printable(schema), kProfileSchema));
  }
  HZ_RETURN_IF_ERROR(top.status());

  {
    ObjectReader model(top.object("model"), top.child("model"));
    p.model = model.string("name");
    if (const Json* options = model.raw("options")) {
      if (!options->is_object()) {
        model.fail("options", "expected an object of \"key\": \"value\"");
      } else {
        for (const auto& item : options->items()) {
          p.options.emplace_back(item.key(), item.value().is_string() ? item.value().get<std::string>()
                                                                      : item.value().dump());
        }
      }
    }
    HZ_RETURN_IF_ERROR(model.status());
  }
  p.source = top.string("source");
  {
    ObjectReader device(top.object("device"), top.child("device"));
    p.device = device.string("name");
    p.device_kind = device.optString("kind").value_or("");
    if (!p.device_kind.empty() && p.device_kind != "cpu" && p.device_kind != "gpu") {
      device.fail("kind", "must be cpu or gpu");
    }
    p.device_memory = optBytesIn(device, "memory_bytes", /*min=*/1);
    p.threads = static_cast<int>(device.optCount("threads", kThreadsRange).value_or(0));
    HZ_RETURN_IF_ERROR(device.status());
  }
  p.optimizer = top.string("optimizer");
  p.runtime_bytes = bytesIn(top, "runtime_bytes");
  HZ_RETURN_IF_ERROR(top.status());
  if (auto f = optimizerStateFactor(p.optimizer); !f.ok()) top.fail("optimizer", f.status().message());

  const Json& layers = top.array("layers", /*nonEmpty=*/true);
  for (size_t i = 0; i < layers.size() && top.ok(); ++i) {
    ObjectReader r(layers[i], top.element("layers", i));
    LayerInfo l;
    l.name = r.string("name");
    l.kind = r.optString("kind").value_or("");
    l.parameter_bytes = bytesIn(r, "parameter_bytes");
    l.optimizer_state_bytes = bytesIn(r, "optimizer_state_bytes");
    l.optimizer_ms = optNumberIn(r, "optimizer_ms", kMillisecondsRange).value_or(0);
    l.snapshot_ms = optNumberIn(r, "snapshot_ms", kMillisecondsRange).value_or(0);
    HZ_RETURN_IF_ERROR(r.status());
    p.layers.push_back(std::move(l));
  }
  const Json& measurements = top.array("measurements", /*nonEmpty=*/true);
  for (size_t i = 0; i < measurements.size() && top.ok(); ++i) {
    const std::string where = top.element("measurements", i);
    ObjectReader r(measurements[i], where);
    Measurement m;
    m.microbatch_size = r.count("microbatch_size", kSamplesRange);
    m.input_bytes = bytesIn(r, "input_bytes");
    m.heap_bytes = optBytesIn(r, "heap_bytes").value_or(0);
    const Json& costs = r.array("layers");
    HZ_RETURN_IF_ERROR(r.status());
    if (costs.size() != p.layers.size()) {
      return parseError(fmt::format("{}.layers: has {} entries but the profile has {} layers (is the file truncated "
                                    "or edited?)",
                                    where, costs.size(), p.layers.size()));
    }
    for (size_t k = 0; k < costs.size(); ++k) {
      ObjectReader c(costs[k], r.element("layers", k));
      LayerCost cost;
      cost.forward_ms = numberIn(c, "forward_ms", kMillisecondsRange);
      cost.backward_ms = numberIn(c, "backward_ms", kMillisecondsRange);
      cost.cold_forward_ms = optNumberIn(c, "cold_forward_ms", kMillisecondsRange).value_or(0);
      cost.cold_backward_ms = optNumberIn(c, "cold_backward_ms", kMillisecondsRange).value_or(0);
      cost.output_bytes = bytesIn(c, "output_bytes");
      cost.stashed_bytes = bytesIn(c, "stashed_bytes");
      cost.workspace_bytes = bytesIn(c, "workspace_bytes");
      HZ_RETURN_IF_ERROR(c.status());
      m.layers.push_back(cost);
    }
    p.measurements.push_back(std::move(m));
  }
  HZ_RETURN_IF_ERROR(top.status());

  if (const Json* network = top.raw("network")) {
    ObjectReader n(*network, top.child("network"));
    NetworkProfile net;
    net.bandwidth = numberIn(n, "bandwidth_bytes_per_s", kBandwidthRange);
    net.latency = numberIn(n, "latency_s", kSecondsRange);
    ObjectReader a(n.object("allreduce"), n.child("allreduce"));
    net.alpha = numberIn(a, "alpha_s_per_byte", kAlphaRange);
    net.beta = numberIn(a, "beta_s", kSecondsRange);
    net.allreduce_workers = static_cast<int>(a.count("workers", kAllreduceWorkersRange));
    net.fit_r2 = optNumberIn(a, "r2", kR2Range).value_or(0);
    HZ_RETURN_IF_ERROR(n.status());
    HZ_RETURN_IF_ERROR(a.status());
    if (const Json* shm = n.raw("shared_memory_allreduce")) {
      ObjectReader m(*shm, n.child("shared_memory_allreduce"));
      NetworkProfile::SharedMemoryFit fit;
      fit.seconds_per_byte = numberIn(m, "s_per_byte", kSecondsPerByteRange);
      fit.seconds_per_allreduce = numberIn(m, "s_per_allreduce", kSecondsRange);
      fit.r2 = optNumberIn(m, "r2", kR2Range).value_or(0);
      HZ_RETURN_IF_ERROR(m.status());
      net.shared_memory = fit;
    }
    if (n.raw("messages")) {
      const Json& rows = n.array("messages", /*nonEmpty=*/true);
      HZ_RETURN_IF_ERROR(n.status());
      if (rows.size() > kMaxMessageSizes) {
        n.fail("messages", fmt::format("has {} rows; at most {} message sizes", rows.size(), kMaxMessageSizes));
      }
      HZ_RETURN_IF_ERROR(n.status());
      MessageCpuTable table;
      for (size_t i = 0; i < rows.size(); ++i) {
        ObjectReader r(rows[i], n.element("messages", i));
        MessageCpu m;
        m.bytes = r.count("bytes", kMessageBytesRange);
        m.send = numberIn(r, "send_s", kSecondsRange);
        m.send_threads = numberIn(r, "send_threads_s", kSecondsRange);
        m.post = numberIn(r, "post_s", kSecondsRange);
        m.receive = numberIn(r, "receive_s", kSecondsRange);
        if (r.ok() && !table.rows.empty() && m.bytes <= table.rows.back().bytes) {
          r.fail("bytes", fmt::format("{} is not above the row before's {}: sizes ascend", m.bytes,
                                      table.rows.back().bytes));
        }
        HZ_RETURN_IF_ERROR(r.status());
        table.rows.push_back(m);
      }
      net.messages = table;
    }
    if (const Json* delivery = n.raw("delivery")) {
      ObjectReader d(*delivery, n.child("delivery"));
      MessageDelivery md;
      md.bytes = d.count("bytes", kMessageBytesRange);
      md.mean = numberIn(d, "mean_s", kSecondsRange);
      md.median = numberIn(d, "median_s", kSecondsRange);
      md.p90 = numberIn(d, "p90_s", kSecondsRange);
      md.helper_cpu = numberIn(d, "helper_cpu_s", kSecondsRange);
      HZ_RETURN_IF_ERROR(d.status());
      net.delivery = md;
    }
    p.network = net;
  }
  if (const Json* corun = top.raw("corun")) {
    ObjectReader c(*corun, top.child("corun"));
    CorunProfile cr;
    cr.cores = static_cast<int>(c.count("cores", kCorunCoresRange));
    cr.microbatch_size = c.count("microbatch_size", kSamplesRange);
    cr.slowdown = numberIn(c, "slowdown", kBusySlowdownRange);
    HZ_RETURN_IF_ERROR(c.status());
    p.corun = cr;
  }
  HZ_RETURN_IF_ERROR(validateProfile(p, origin));
  return p;
}

Status validateProfile(const Profile& p, const std::string& origin) {
  if (p.layers.empty()) return parseError(origin + ": the profile has no layers");
  if (p.corun && (!inRange(p.corun->cores, kCorunCoresRange) || !inRange(p.corun->microbatch_size, kSamplesRange) ||
                  !inNumberRange(p.corun->slowdown, kBusySlowdownRange))) {
    return parseError(fmt::format("{}: corun: {} cores at microbatch size {} with a slowdown of {} is out of range; "
                                  "expected {} cores, {} samples and {}",
                                  origin, p.corun->cores, p.corun->microbatch_size, p.corun->slowdown,
                                  describeRange(kCorunCoresRange), describeRange(kSamplesRange),
                                  describeNumberRange(kBusySlowdownRange)));
  }
  if (p.measurements.empty()) return parseError(origin + ": the profile has no measurements");
  if (!inRange(static_cast<std::int64_t>(p.layers.size()), kLayersRange)) {
    return parseError(fmt::format("{}: layers: {} layers is out of range; expected {}", origin, p.layers.size(),
                                  describeRange(kLayersRange)));
  }
  // Each size is below kMaxBytes; so are the model's totals, which keeps the
  // planner's sums of them over layers far from overflowing.
  Bytes modelBytes = 0;
  for (size_t i = 0; i < p.layers.size(); ++i) {
    const auto& l = p.layers[i];
    modelBytes = saturatingAdd(modelBytes, saturatingAdd(l.parameter_bytes, l.optimizer_state_bytes));
    for (auto [name, ms] : {std::pair{"optimizer_ms", l.optimizer_ms}, {"snapshot_ms", l.snapshot_ms}}) {
      if (!inNumberRange(ms, kMillisecondsRange)) {
        return parseError(fmt::format("{}: layers[{}].{}: {} is out of range; expected {}", origin, i, name, ms,
                                      describeNumberRange(kMillisecondsRange)));
      }
    }
  }
  if (modelBytes > kMaxBytes) {
    return parseError(fmt::format("{}: layers: the parameters and optimizer state add up to {} bytes, more than the "
                                  "{} bytes accepted",
                                  origin, modelBytes, kMaxBytes));
  }
  for (size_t i = 0; i < p.measurements.size(); ++i) {
    const auto& m = p.measurements[i];
    if (!inRange(m.microbatch_size, kSamplesRange)) {
      return parseError(fmt::format("{}: measurements[{}].microbatch_size: {} is out of range; expected {}", origin, i,
                                    m.microbatch_size, describeRange(kSamplesRange)));
    }
    if (i > 0 && m.microbatch_size <= p.measurements[i - 1].microbatch_size) {
      return parseError(fmt::format("{}: measurements must have unique microbatch sizes in ascending order ({} after {})",
                                    origin, m.microbatch_size, p.measurements[i - 1].microbatch_size));
    }
    if (m.layers.size() != p.layers.size()) {
      return parseError(fmt::format("{}: measurements[{}] has {} layers, expected {}", origin, i, m.layers.size(),
                                    p.layers.size()));
    }
    if (m.heap_bytes < 0 || m.heap_bytes > kMaxBytes) {
      return parseError(fmt::format("{}: measurements[{}].heap_bytes: {} is out of range; expected {}", origin, i,
                                    m.heap_bytes, describeRange({0, kMaxBytes})));
    }
    Bytes activationBytes = m.input_bytes;
    for (size_t k = 0; k < m.layers.size(); ++k) {
      const auto& c = m.layers[k];
      if (!inNumberRange(c.forward_ms, kMillisecondsRange) || !inNumberRange(c.backward_ms, kMillisecondsRange) ||
          !inNumberRange(c.cold_forward_ms, kMillisecondsRange) ||
          !inNumberRange(c.cold_backward_ms, kMillisecondsRange)) {
        return parseError(fmt::format("{}: measurements[{}].layers[{}]: forward_ms {}, backward_ms {}, "
                                      "cold_forward_ms {} and cold_backward_ms {} must be {}",
                                      origin, i, k, c.forward_ms, c.backward_ms, c.cold_forward_ms,
                                      c.cold_backward_ms, describeNumberRange(kMillisecondsRange)));
      }
      for (auto [name, bytes] : {std::pair{"output_bytes", c.output_bytes}, {"stashed_bytes", c.stashed_bytes},
                                 {"workspace_bytes", c.workspace_bytes}}) {
        if (bytes < 0 || bytes > kMaxBytes) {
          return parseError(fmt::format("{}: measurements[{}].layers[{}].{}: {} is out of range; expected {}", origin,
                                        i, k, name, bytes, describeRange({0, kMaxBytes})));
        }
      }
      if (c.stashed_bytes < c.output_bytes) {
        return parseError(fmt::format("{}: measurements[{}].layers[{}]: stashed_bytes {} does not include the output; "
                                      "expected at least output_bytes {}",
                                      origin, i, k, c.stashed_bytes, c.output_bytes));
      }
      activationBytes = saturatingAdd(activationBytes, saturatingAdd(c.stashed_bytes, c.workspace_bytes));
    }
    if (activationBytes > kMaxBytes) {
      return parseError(fmt::format("{}: measurements[{}]: the layers' stashed and workspace bytes add up to {}, more "
                                    "than the {} bytes accepted",
                                    origin, i, activationBytes, kMaxBytes));
    }
  }
  return Status();
}

Result<Profile> parseProfile(const std::string& text, const std::string& origin, std::int64_t graphBatchSize) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return parseError(origin + ": the file is empty");
  if (text[first] != '{') {
    // Not JSON: PipeDream's graph.txt starts with a node line "node1 -- ...".
    if (looksLikePipeDreamGraph(text)) return importPipeDreamGraph(text, origin, graphBatchSize);
    // Never suggest writing over the file the user gave: it may be their job spec.
    const bool jobSpec = text.find("model:") != std::string::npos;
    return parseError(fmt::format("{}: {}neither a hydrozoa profile (JSON) nor a PipeDream graph.txt; {}make a "
                                  "profile with `hydrozoa profile --model NAME -o p.json`",
                                  origin, jobSpec ? "a job spec (YAML), " : "",
                                  jobSpec ? "train it with `hydrozoa train " + origin + "`, or " : ""));
  }
  HZ_ASSIGN_OR_RETURN(Json j, parseJson(text, origin));
  return profileFromJson(j, origin);
}

Result<Profile> loadProfile(const std::string& path, std::int64_t graphBatchSize) {
  HZ_ASSIGN_OR_RETURN(std::string text, readTextFile(path));
  return parseProfile(text, path, graphBatchSize);
}

Status saveProfile(const Profile& profile, const std::string& path) {
  // Names from YAML files (a device's) may hold bytes that are not UTF-8.
  return writeFileAtomically(path, profileToJson(profile).dump(1, ' ', false, Json::error_handler_t::replace) + "\n");
}

}  // namespace hydrozoa::profile
