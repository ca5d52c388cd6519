// Helper processes a job owns (the Redis channel's server, its relay):
// started from argv (looked up in PATH) with standard input from /dev/null
// and output to a log, in a process group of their own (a terminal's
// Ctrl-C reaches the job, which stops them), and ended with their owner
// even when it is killed (PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"

namespace hydrozoa {

// The child's pid. Exit status 127: argv[0] was not found.
Result<pid_t> spawnOwned(const std::vector<std::string>& argv, const std::string& logPath);
// A child whose standard input and output are pipes to us (*toChild,
// *fromChild; close-on-exec here), its standard error appended to
// `logPath`; killed when we die. Exit status 127: argv[0] was not found.
Result<pid_t> spawnPiped(const std::vector<std::string>& argv, const std::string& logPath, int* toChild,
                         int* fromChild);

// SIGTERM, then SIGKILL after `grace`; reaps it and sets *pid to -1. A pid
// of -1 is left alone.
void stopOwned(pid_t* pid, Seconds grace = 5);

}  // namespace hydrozoa
