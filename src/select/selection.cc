#include "select/selection.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/table.h"
#include "core/units.h"

namespace hydrozoa::select {

Selection newSelection(const Grid& grid, const std::vector<GridTask>& tasks) {
  Selection s;
  Json axes = Json::object();
  for (const auto& [path, values] : grid.axes) axes[path] = values;
  s.grid = {{"job", grid.base}, {"grid", axes}, {"metric", grid.metric}, {"name", grid.name}};
  s.metric = grid.metric;
  for (const GridTask& t : tasks) {
    TaskRecord r;
    r.index = t.index;
    r.label = t.label;
    r.point = t.point;
    s.tasks.push_back(std::move(r));
  }
  return s;
}

Status saveSelection(const std::string& runDir, const Selection& s) {
  Json tasks = Json::array();
  for (const TaskRecord& t : s.tasks) {
    tasks.push_back({{"index", t.index},
                     {"label", t.label},
                     {"point", t.point},
                     {"status", t.status},
                     {"reason", t.reason},
                     {"run_dir", t.dir()},
                     {"test_accuracy", t.test_accuracy >= 0 ? Json(t.test_accuracy) : Json(nullptr)},
                     {"loss", t.loss >= 0 ? Json(t.loss) : Json(nullptr)},
                     {"seconds", t.seconds},
                     {"cost_usd", t.cost}});
  }
  Json j = {{"grid", s.grid}, {"metric", s.metric}, {"tasks", tasks}};
  if (!s.sharp.is_null()) j["sharp"] = s.sharp;
  return writeFileAtomically(runDir + "/select.json", j.dump(2) + "\n");
}

Result<Selection> loadSelection(const std::string& runDir) {
  const std::string path = runDir + "/select.json";
  auto j = readJsonFile(path);
  if (!j.ok()) {
    return invalidArgument(fmt::format("{} is not a model-selection run (no readable select.json: {})", runDir,
                                       j.status().message()));
  }
  ObjectReader r(*j, path);
  Selection s;
  s.grid = j->value("grid", Json());
  s.sharp = j->value("sharp", Json());
  s.metric = r.string("metric");
  const Json& tasks = r.array("tasks", /*nonEmpty=*/true);
  for (size_t i = 0; i < tasks.size() && r.ok(); ++i) {
    ObjectReader t(tasks[i], r.element("tasks", i));
    TaskRecord rec;
    rec.index = static_cast<int>(i);
    rec.label = t.string("label");
    rec.point = tasks[i].value("point", Json::object());
    rec.status = t.string("status");
    rec.reason = tasks[i].value("reason", "");
    const Json& acc = tasks[i].value("test_accuracy", Json());
    const Json& loss = tasks[i].value("loss", Json());
    rec.test_accuracy = acc.is_number() ? acc.get<double>() : -1;
    rec.loss = loss.is_number() ? loss.get<double>() : -1;
    rec.seconds = tasks[i].value("seconds", 0.0);
    rec.cost = tasks[i].value("cost_usd", 0.0);
    s.tasks.push_back(std::move(rec));
  }
  HZ_RETURN_IF_ERROR(r.status());
  if (!s.grid.is_object()) return parseError(path + ": grid: expected the grid it expands");
  return s;
}

void readTaskSummary(TaskRecord* t, const Json& summary) {
  const Json& acc = summary.value("final_test_accuracy", Json());
  const Json& loss = summary.value("final_loss", Json());
  if (acc.is_number()) t->test_accuracy = acc.get<double>();
  if (loss.is_number() && loss.get<double>() > 0) t->loss = loss.get<double>();  // 0: a run that took no step
  t->seconds += summary.value("wall_seconds", 0.0);
  t->cost += summary.value("cost_usd", 0.0);
}

std::string rankedTable(const Selection& s) {
  const bool accuracy = s.metric == "test_accuracy";
  const auto value = [&](const TaskRecord& t) { return accuracy ? t.test_accuracy : t.loss; };
  std::vector<const TaskRecord*> order;
  for (const TaskRecord& t : s.tasks) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [&](const TaskRecord* a, const TaskRecord* b) {
    const bool ha = value(*a) >= 0, hb = value(*b) >= 0;
    if (ha != hb) return ha;
    if (!ha) return false;
    return accuracy ? value(*a) > value(*b) : value(*a) < value(*b);
  });
  TextTable table({"rank", "task", "point", "status", "test accuracy", "loss", "time", "cost"},
                  {true, true, false, false, true, true, true, true});
  int rank = 0;
  for (const TaskRecord* t : order) {
    table.addRow({value(*t) >= 0 ? std::to_string(++rank) : "-", std::to_string(t->index), t->label, t->status,
                  t->test_accuracy >= 0 ? fmt::format("{:.2f}%", 100 * t->test_accuracy) : "-",
                  t->loss >= 0 ? fmt::format("{:.4f}", t->loss) : "-", formatSeconds(t->seconds),
                  formatUsd(t->cost)});
  }
  return table.render();
}

}  // namespace hydrozoa::select
