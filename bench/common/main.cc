#include "bench/common/main.h"

#include "core/common/mutex_mode.h"

namespace grove::bench {

int RunMain(int argc, char** argv, int (*program)(int argc, char** argv)) {
  DisableMutexDeadlockDetection();
  return program(argc, argv);
}

}  // namespace grove::bench
