// The environment a child process starts with.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace hydrozoa {

// This process's environment with `set` added, replacing variables of the
// same names, as "NAME=value" strings for execve()/posix_spawn()'s envp
// (build it before fork(): it allocates).
std::vector<std::string> environmentWith(const std::map<std::string, std::string>& set);

}  // namespace hydrozoa
