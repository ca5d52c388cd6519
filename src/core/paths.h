// Where hydrozoa finds its data files (pricing catalogs, device specs).
#pragma once

#include <string>

#include "core/status.h"

namespace hydrozoa {

// The data directory: $HYDROZOA_DATA_DIR when set, else data/ beside the
// binary's parent (an installed or build-tree layout), else the source tree's
// data/ recorded at build time.
std::string dataDir();

// The running executable's path ("/…/build/hydrozoa"); "" when unknown.
std::string executablePath();
// Directory that holds the running executable ("/…/build").
std::string executableDir();

// `name` resolved inside dataDir()/`sub`/ when it is a bare name without
// an extension; otherwise `name` itself (a user's own file).
std::string dataFile(const std::string& sub, const std::string& name, const std::string& extension);

// A directory to write a run's or a service's files into, named for
// messages by `what` ("--out", "output.checkpoint_dir"). One it makes (and
// its parents) is the user's alone (0700). One that exists keeps its mode —
// `--out /tmp` must not lock everyone out of /tmp — and is used only when it
// is a real directory (not a link) of this user that no one else can write:
// secrets live in private files inside, but a directory others can write
// lets them replace those. Errors name the path, the mode and the fix.
Status privateDirectory(const std::string& path, const std::string& what);

}  // namespace hydrozoa
