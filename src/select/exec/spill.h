// Where SHARP's models live between units (docs/select.md): a spill
// directory, /dev/shm/hydrozoa-<run>-<hash> by default, holding a file
// `run` that names the selection it belongs to.
#pragma once

#include <string>
#include <vector>

namespace hydrozoa::select {

// `hydrozoa cleanup`: the spill directories in /dev/shm (each names its run
// in a file `run`) whose run directory is gone, or whose run spills
// elsewhere now, are removed (*removed); those of runs that may go on are
// kept (*kept, with the command that goes on).
void cleanupSpills(std::vector<std::string>* removed, std::vector<std::string>* kept,
                   const std::string& root = "/dev/shm");

}  // namespace hydrozoa::select
