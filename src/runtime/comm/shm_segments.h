// What a shared-memory group (runtime/comm/shared_memory.h) may leave in
// /dev/shm, and its removal; without libtorch, for `hydrozoa cleanup`.
#pragma once

#include <string>
#include <vector>

namespace hydrozoa::runtime {

// The names of the group segments in `dir` ("hydrozoa-" and 32 hex digits)
// that no process holds: no rank has its byte locked. A segment's creator
// locks it from its creation to just before removing it.
std::vector<std::string> unheldSegments(const std::string& dir = "/dev/shm");

// Removes the segments in `dir` that no process holds (no rank's lock) and
// that are older than a minute: what a job's rank 0 leaves when it dies in
// the moment between making its group's segment and every rank opening it
// (after that the segment is unlinked and goes with its last process).
// Returns the paths removed. For `hydrozoa cleanup`.
std::vector<std::string> removeAbandonedSegments(const std::string& dir = "/dev/shm");

}  // namespace hydrozoa::runtime
