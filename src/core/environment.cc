#include "core/environment.h"

extern char** environ;

namespace hydrozoa {

std::vector<std::string> environmentWith(const std::map<std::string, std::string>& set) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    const std::string kv(*e);
    if (!set.count(kv.substr(0, kv.find('=')))) out.push_back(kv);
  }
  for (const auto& [k, v] : set) out.push_back(k + "=" + v);
  return out;
}

}  // namespace hydrozoa
