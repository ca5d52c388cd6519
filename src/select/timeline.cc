#include "select/timeline.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace hydrozoa::select {

std::string timelineHeader() { return "worker,task,unit,kind,shard,step,load_begin,compute_begin,end\n"; }

std::string timelineLine(const TimelineUnit& u) {
  return fmt::format("{},{},{},{},{},{},{:.4f},{:.4f},{:.4f}\n", u.worker, u.task, u.unit, u.kind, u.shard, u.step,
                     u.load_begin, u.compute_begin, u.end);
}

std::vector<TimelineUnit> readTimeline(const std::string& path) {
  std::vector<TimelineUnit> units;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; std::getline(fields, x, ',');) f.push_back(x);
    if (f.size() != 9) continue;
    try {
      units.push_back({std::stoi(f[0]), std::stoi(f[1]), std::stoi(f[4]), std::stoll(f[2]), std::stoll(f[5]), f[3],
                       std::stod(f[6]), std::stod(f[7]), std::stod(f[8])});
    } catch (const std::exception&) {
      // a line cut short (a run killed while writing it)
    }
  }
  return units;
}

}  // namespace hydrozoa::select
