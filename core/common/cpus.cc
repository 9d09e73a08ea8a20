#include "core/common/cpus.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace grove {

int UsableCpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    if (const int n = CPU_COUNT(&allowed); n > 0) return n;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace grove
