// Where hydrozoa finds its data files (pricing catalogs, device specs).
#pragma once

#include <string>

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

}  // namespace hydrozoa
