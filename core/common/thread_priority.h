// Scheduling priority of compute threads. On a machine whose cores compute saturates, threads that
// answer RPCs (admission, refusals, metadata) should not queue behind compute for a time slice:
// compute threads may run at a lower priority, so cheap RPC work runs at once and compute still
// gets every otherwise idle cycle. Both lower classes starve compute against other busy processes
// of normal priority on the same cores: use them where groved owns its cores (a container with
// its own CPU quota, a dedicated host).
#pragma once

#include <optional>
#include <string_view>

namespace grove {

enum class ThreadPriority {
  kNormal,  // unchanged
  kLow,     // nice 19
  kIdle,    // SCHED_IDLE: runs only when no normal thread wants the core
};

// "normal", "low", "idle".
const char* ThreadPriorityName(ThreadPriority priority);
std::optional<ThreadPriority> ParseThreadPriority(std::string_view name);

// Sets the calling thread's priority (Linux: per thread). Best effort: where the system refuses,
// the thread keeps its priority; elsewhere a no-op.
void SetCurrentThreadPriority(ThreadPriority priority);

}  // namespace grove
