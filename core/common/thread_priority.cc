#include "core/common/thread_priority.h"

#if defined(__linux__)
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace grove {
namespace {

constexpr const char* kNames[] = {"normal", "low", "idle"};

}  // namespace

const char* ThreadPriorityName(ThreadPriority priority) {
  return kNames[static_cast<int>(priority)];
}

std::optional<ThreadPriority> ParseThreadPriority(std::string_view name) {
  for (int i = 0; i < 3; ++i) {
    if (name == kNames[i]) return static_cast<ThreadPriority>(i);
  }
  return std::nullopt;
}

void SetCurrentThreadPriority(ThreadPriority priority) {
#if defined(__linux__)
  // On Linux both settings belong to a thread (a task): pid 0 / the thread id name the caller.
  if (priority == ThreadPriority::kLow) {
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  } else if (priority == ThreadPriority::kIdle) {
    sched_param param{};
    sched_setscheduler(0, SCHED_IDLE, &param);
  }
#endif
}

}  // namespace grove
