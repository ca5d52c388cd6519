#include "core/memory.h"

#include <unistd.h>

#include <fstream>
#include <string>

namespace hydrozoa {

Bytes residentBytes() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<Bytes>(resident) * ::sysconf(_SC_PAGESIZE);
}

Bytes peakResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      long kb = 0;
      status >> kb;
      return static_cast<Bytes>(kb) * 1024;
    }
    status.ignore(4096, '\n');
  }
  return 0;
}

}  // namespace hydrozoa
