// PeriodicThread: runs a function every `interval` on a thread of its own until stopped (the file
// watchers of the model registry and of access control).
//
// Thread-safe; Stop() and the destructor wait for a run in progress to finish. `fn` must not call
// Start or Stop of the same object.
#pragma once

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace grove {

class PeriodicThread {
 public:
  PeriodicThread() = default;
  ~PeriodicThread() { Stop(); }
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  // Stops a previous run, then calls `fn` every `interval` (first after one interval).
  void Start(absl::Duration interval, std::function<void()> fn);
  // Idempotent.
  void Stop();

 private:
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace grove
