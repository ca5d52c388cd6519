#include "select/exec/sharp_state.h"

#include <fmt/format.h>

namespace hydrozoa::select {

Json shardToJson(const Shard& s) {
  return {{"first", s.first}, {"last", s.last},       {"need", s.need},
          {"load", s.load},   {"forward", s.forward}, {"backward", s.backward}};
}

Json taskToJson(const TaskState& t) {
  Json shards = Json::array();
  for (const Shard& s : t.shards) shards.push_back(shardToJson(s));
  return {{"index", t.index},   {"label", t.label},           {"job", t.job},
          {"dir", t.dir},       {"shards", shards},           {"steps", t.steps},
          {"test_batches", t.test_batches}, {"batch_bytes", t.batch_bytes}, {"next", t.next}, {"states", t.states},
          {"losses", t.losses}, {"eval_loss", t.eval_loss},   {"eval_accuracy", t.eval_accuracy},
          {"status", t.status}, {"reason", t.reason},         {"seconds", t.seconds}};
}

Result<TaskState> taskFromJson(const Json& j, const std::string& origin) {
  TaskState t;
  try {
    t.index = j.at("index").get<int>();
    t.label = j.at("label").get<std::string>();
    t.job = j.at("job").get<std::string>();
    t.dir = j.at("dir").get<std::string>();
    for (const Json& s : j.at("shards")) {
      t.shards.push_back({s.at("first").get<int>(), s.at("last").get<int>(), s.at("need").get<Bytes>(),
                          s.at("load").get<double>(), s.at("forward").get<double>(), s.at("backward").get<double>()});
    }
    t.steps = j.at("steps").get<std::int64_t>();
    t.test_batches = j.at("test_batches").get<std::int64_t>();
    t.batch_bytes = j.at("batch_bytes").get<Bytes>();
    t.next = j.at("next").get<std::int64_t>();
    t.states = j.at("states").get<std::vector<std::string>>();
    t.losses = j.at("losses").get<std::vector<double>>();
    t.eval_loss = j.at("eval_loss").get<double>();
    t.eval_accuracy = j.at("eval_accuracy").get<double>();
    t.status = j.at("status").get<std::string>();
    t.reason = j.at("reason").get<std::string>();
    t.seconds = j.at("seconds").get<double>();
  } catch (const Json::exception& e) {
    return parseError(fmt::format("{}: a task: {}", origin, e.what()));
  }
  if (t.shards.empty() || t.states.size() != t.shards.size() || t.steps < 1 || t.next < 0 ||
      t.next > t.units()) {
    return parseError(fmt::format("{}: task {}: its shards, states or next unit do not agree", origin, t.index));
  }
  return t;
}

ModelWork workOf(const TaskState& t) {
  ModelWork w;
  w.name = t.label;
  w.minibatches = t.steps;
  const int n = t.n();
  for (int s = 0; s + 1 < n; ++s) w.units.push_back({t.shards[static_cast<size_t>(s)].load, t.shards[static_cast<size_t>(s)].forward});
  w.units.push_back({t.shards.back().load, t.shards.back().forward});
  for (int s = n - 2; s >= 0; --s) w.units.push_back({t.shards[static_cast<size_t>(s)].load, t.shards[static_cast<size_t>(s)].backward});
  for (const Shard& s : t.shards) {  // a forward a test batch, no backward
    if (t.test_batches == 0) break;
    const double passes = static_cast<double>(t.test_batches);
    w.tail.push_back({s.load, (s.backward > 0 ? s.forward : s.forward / 3) * passes});
  }
  return w;
}

}  // namespace hydrozoa::select
