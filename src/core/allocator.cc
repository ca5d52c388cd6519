#include "core/allocator.h"

#include <malloc.h>

namespace hydrozoa {

void configureAllocatorForTraining() {
  // 32 MB is glibc's largest allowed mmap threshold on 64-bit systems.
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMmapThreshold));
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
}

}  // namespace hydrozoa
