#include "core/common/mutex_mode.h"

#include "absl/synchronization/mutex.h"

namespace grove {

void DisableMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace grove
