// ManualExecutor: an Executor with no threads. Work runs only when the test calls RunOne or
// RunUntilIdle, on the test's thread, so that tests drive batching step by step with a FakeClock
// (the puppet scheduler of TF Serving's batching tests).
//
// Thread-safe: sources may be added and notified from any thread; Run* run work on the caller.
#pragma once

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/batching/batch_executor.h"

namespace grove::batching {

class ManualExecutor final : public Executor {
 public:
  void Add(std::shared_ptr<BatchSource> source) override;
  void Remove(const BatchSource* source) override;
  void Notify() override {}
  // As BatchExecutor: the caller may compute now when no work is running (no RunOne is running
  // work, no other caller holds the slot) and the test has not closed the slot (SetInlineAllowed).
  bool TryBeginInline() override;
  void EndInline() override;
  void Stop() override;
  // Whether TryBeginInline may succeed (default true).
  void SetInlineAllowed(bool allowed);

  // Polls the sources round-robin and runs the first work one hands out. False when none had any
  // (the clock may have to move: see next_poll()).
  bool RunOne();
  // RunOne until it returns false; the number of work items run.
  int RunUntilIdle();
  // The earliest time a source asked to be polled again at the last RunOne that found nothing.
  absl::Time next_poll() const;

 private:
  mutable absl::Mutex mu_;
  SourceRing sources_ ABSL_GUARDED_BY(mu_);
  absl::Time next_poll_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int running_ ABSL_GUARDED_BY(mu_) = 0;  // RunOne work in progress
  bool inline_busy_ ABSL_GUARDED_BY(mu_) = false;
  bool inline_allowed_ ABSL_GUARDED_BY(mu_) = true;
};

}  // namespace grove::batching
