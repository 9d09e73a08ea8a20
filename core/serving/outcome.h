// Why work left the serving core without its result reaching the caller. One enum and one name
// table (the metrics' `reason` label).
#pragma once

#include "absl/status/status.h"

namespace grove::serving {

enum class DropReason : int {
  kQueueFull = 0,     // RESOURCE_EXHAUSTED at admission: the queue's task or row bound
  kDeadline = 1,      // the caller's deadline passed (queued, or between chunks of its batch)
  kCancelled = 2,     // the caller cancelled (or another part of its call failed)
  kShutdown = 3,      // the server stopped before the work ran
  kExpectedWait = 4,  // RESOURCE_EXHAUSTED at admission: it would not finish within its deadline,
                      // or the work ahead exceeds the server's queue-wait bound
  kMemory = 5,        // RESOURCE_EXHAUSTED at admission: the request-memory budget is spent
};
inline constexpr int kNumDropReasons = 6;

// "queue_full", "deadline_exceeded", "cancelled", "shutdown", "expected_wait", "memory".
const char* DropReasonName(DropReason reason);

// Refusals at admission (the caller got RESOURCE_EXHAUSTED and may retry elsewhere).
inline bool IsShed(DropReason reason) {
  return reason == DropReason::kQueueFull || reason == DropReason::kExpectedWait ||
         reason == DropReason::kMemory;
}

// The reason of a task answered with `status` without compute (queue drops and drains).
DropReason DropReasonFor(const absl::Status& status);

}  // namespace grove::serving
