// CallState: what the compute tasks of one call (or one stream message) share. `done` runs exactly
// once, on the thread that answers the last task (an executor thread, or the caller when
// scheduling fails), with OK or the first error.
//
// Cancel() marks the call and runs its cancel hooks, through which the serving core takes the
// call's queued tasks out of their queues at once. The call also holds its memory reservation,
// released when the last reference goes (after the response was handed back).
//
// Thread-safe.
#pragma once

#include <atomic>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/serving/memory_budget.h"

namespace grove::serving {

class CallState {
 public:
  CallState(int tasks, absl::Time deadline, absl::AnyInvocable<void(absl::Status) &&> done)
      : deadline_(deadline), pending_(tasks), done_(std::move(done)) {}

  // One task was answered with `status`; the last one runs `done`.
  void TaskDone(const absl::Status& status);
  // Marks the call cancelled and runs the cancel hooks (outside any lock). Idempotent.
  void Cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  absl::Time deadline() const { return deadline_; }
  // Nobody waits for the answer any more: cancelled, or the deadline passed at `now`.
  bool Abandoned(absl::Time now) const { return cancelled() || deadline_ <= now; }

  // Runs `hook` on Cancel (at once when already cancelled). Hooks must not block.
  void OnCancel(absl::AnyInvocable<void()> hook);
  // Keeps `reservation` until the call is destroyed.
  void Hold(MemoryReservation reservation);

 private:
  const absl::Time deadline_;
  std::atomic<bool> cancelled_{false};
  std::atomic<int> pending_;
  absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::AnyInvocable<void()>> hooks_ ABSL_GUARDED_BY(mu_);
  MemoryReservation memory_ ABSL_GUARDED_BY(mu_);
  absl::AnyInvocable<void(absl::Status) &&> done_;
};

}  // namespace grove::serving
