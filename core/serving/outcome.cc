#include "core/serving/outcome.h"

namespace grove::serving {

const char* DropReasonName(DropReason reason) {
  static constexpr const char* kNames[kNumDropReasons] = {
      "queue_full", "deadline_exceeded", "cancelled", "shutdown", "expected_wait", "memory"};
  const int i = static_cast<int>(reason);
  return i >= 0 && i < kNumDropReasons ? kNames[i] : "unknown";
}

DropReason DropReasonFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kCancelled: return DropReason::kCancelled;
    case absl::StatusCode::kDeadlineExceeded: return DropReason::kDeadline;
    case absl::StatusCode::kResourceExhausted: return DropReason::kQueueFull;
    default: return DropReason::kShutdown;
  }
}

}  // namespace grove::serving
