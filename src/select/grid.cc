#include "select/grid.h"

#include <fmt/format.h>

#include <filesystem>
#include <set>
#include <sstream>

namespace hydrozoa::select {

namespace {

std::vector<std::string> split(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream in(path);
  for (std::string p; std::getline(in, p, '.');) parts.push_back(p);
  return parts;
}

// A value as a label shows it: strings bare; an object as {k=v ...}, one
// with a "name" as name(k=v ...) of its other fields (a model and its
// options: cnn(hidden=128 width=1)).
std::string shortValue(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_object()) return v.dump();
  std::string inner;
  for (const auto& [key, value] : v.items()) {
    if (key == "name" && value.is_string()) continue;
    const std::string text = shortValue(value);
    // {options: {...}} reads as its fields
    const bool nested = value.is_object() && !value.contains("name");
    inner += (inner.empty() ? "" : " ") +
             (nested ? text.substr(1, text.size() - 2) : fmt::format("{}={}", key, text));
  }
  const Json& name = v.contains("name") ? v.at("name") : Json();
  return name.is_string() ? fmt::format("{}({})", name.get<std::string>(), inner) : "{" + inner + "}";
}

}  // namespace

Status setPath(Json* json, const std::string& path, const Json& value) {
  const std::vector<std::string> parts = split(path);
  if (path.empty() || parts.empty() || path.back() == '.') {
    return invalidArgument(fmt::format("\"{}\" is not a dotted path of the job spec (e.g. training.optimizer.lr)",
                                       path));
  }
  Json* at = json;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty()) {
      return invalidArgument(fmt::format("\"{}\" is not a dotted path of the job spec (e.g. training.optimizer.lr)",
                                         path));
    }
    if (!at->is_object()) {
      return invalidArgument(fmt::format("{}: {} is not a section of the job spec (it holds {})", path,
                                         fmt::join(parts.begin(), parts.begin() + static_cast<long>(i), "."),
                                         describeJson(*at)));
    }
    if (i + 1 == parts.size()) {
      (*at)[parts[i]] = value;
    } else {
      at = &(*at)[parts[i]];  // a section the base leaves out is made; its keys are checked with the spec
      if (at->is_null()) *at = Json::object();
    }
  }
  return Status();
}

Result<Grid> parseGrid(const Json& j, const std::string& origin, const std::string& baseDir) {
  if (!j.is_object()) return parseError(fmt::format("{}: expected a mapping with base (or job) and grid", origin));
  Grid g;
  g.origin = origin;
  for (const auto& [key, _] : j.items()) {
    if (key != "base" && key != "job" && key != "grid" && key != "metric" && key != "name") {
      return parseError(fmt::format("{}: unknown key \"{}\" (expected base or job, grid, metric, name)", origin,
                                    key));
    }
  }
  if (j.contains("base") == j.contains("job")) {
    return parseError(fmt::format("{}: give the base job as base: FILE or job: {{...}}, one of the two", origin));
  }
  if (j.contains("base")) {
    if (!j["base"].is_string()) return parseError(fmt::format("{}: base: expected a job spec's file name", origin));
    std::filesystem::path file = j["base"].get<std::string>();
    if (file.is_relative()) file = std::filesystem::path(baseDir) / file;
    HZ_ASSIGN_OR_RETURN(g.base, readYamlFile(file.string()));
    if (!g.base.is_object()) return parseError(fmt::format("{}: base {} is not a job spec", origin, file.string()));
  } else {
    g.base = j["job"];
    if (!g.base.is_object()) return parseError(fmt::format("{}: job: expected a job spec", origin));
  }
  g.name = g.base.value("name", std::string("select"));
  if (j.contains("name")) {
    if (!j["name"].is_string() || j["name"].get<std::string>().empty()) {
      return parseError(fmt::format("{}: name: expected a word", origin));
    }
    g.name = j["name"].get<std::string>();
  }
  if (j.contains("metric")) {
    if (!j["metric"].is_string() || (j["metric"] != "test_accuracy" && j["metric"] != "loss")) {
      return parseError(fmt::format("{}: metric is {}; use test_accuracy (highest first) or loss (lowest first)",
                                    origin, describeJson(j["metric"])));
    }
    g.metric = j["metric"].get<std::string>();
  }
  if (!j.contains("grid") || !j["grid"].is_object() || j["grid"].empty()) {
    return parseError(fmt::format("{}: grid: expected the fields to vary and their values (e.g. "
                                  "training.optimizer.lr: [0.1, 0.01])",
                                  origin));
  }
  for (const auto& [path, values] : j["grid"].items()) {
    if (!values.is_array() || values.empty()) {
      return parseError(fmt::format("{}: grid: {} has {}; expected a list of the values to try", origin, path,
                                    values.is_array() ? "no values" : describeJson(values)));
    }
    Json probe = g.base;
    if (Status s = setPath(&probe, path, values[0]); !s.ok()) {
      return parseError(fmt::format("{}: grid: {}", origin, s.message()));
    }
    g.axes.emplace_back(path, std::vector<Json>(values.begin(), values.end()));
  }
  return g;
}

Result<Grid> loadGrid(const std::string& path) {
  HZ_ASSIGN_OR_RETURN(const Json j, readYamlFile(path));
  if (j.is_null()) return parseError(path + ": the file is empty");
  return parseGrid(j, path, std::filesystem::path(path).parent_path().string());
}

Result<std::vector<GridTask>> expandGrid(const Grid& g) {
  size_t points = 1;
  for (const auto& [path, values] : g.axes) {
    if (values.size() > kMaxGridPoints || points * values.size() > kMaxGridPoints) {
      return invalidArgument(fmt::format("{}: the grid has more than {} points; split it", g.origin, kMaxGridPoints));
    }
    points *= values.size();
  }
  // Labels: each field's last part, or its whole path where two end alike.
  std::set<std::string> seen, twice;
  for (const auto& [path, _] : g.axes) {
    const std::string last = split(path).back();
    if (!seen.insert(last).second) twice.insert(last);
  }
  std::vector<std::string> names;
  for (const auto& [path, _] : g.axes) {
    const std::string last = split(path).back();
    names.push_back(twice.count(last) ? path : last);
  }
  std::vector<GridTask> tasks;
  for (size_t p = 0; p < points; ++p) {
    GridTask t;
    t.index = static_cast<int>(p);
    t.point = Json::object();
    Json spec = g.base;
    size_t rest = p;
    std::vector<size_t> choice(g.axes.size());
    for (size_t a = g.axes.size(); a-- > 0;) {  // the last field varies fastest
      choice[a] = rest % g.axes[a].second.size();
      rest /= g.axes[a].second.size();
    }
    for (size_t a = 0; a < g.axes.size(); ++a) {
      const auto& [path, values] = g.axes[a];
      const Json& v = values[choice[a]];
      HZ_RETURN_IF_ERROR(setPath(&spec, path, v));
      t.point[path] = v;
      t.label += fmt::format("{}{}={}", t.label.empty() ? "" : " ", names[a], shortValue(v));
    }
    spec["name"] = fmt::format("{}-{}", g.name, p);
    auto parsed = cluster::parseJobSpec(spec, fmt::format("{} (point {}: {})", g.origin, p, t.label));
    if (!parsed.ok()) return parsed.status();
    t.spec = std::move(*parsed);
    tasks.push_back(std::move(t));
  }
  return tasks;
}

}  // namespace hydrozoa::select
