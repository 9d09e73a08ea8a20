// Executor: what runs the batches of many queues (one per model and operation). BatchExecutor is a
// fixed set of threads; ManualExecutor (manual_executor.h) runs work only when a test says so.
// BatchQueue<Task> is a Batcher wired to an executor and to the functions that compute a batch and
// answer dropped tasks.
//
// Workers poll every registered source round-robin; a source hands out work (a closure) or the time
// at which it wants to be polled again. Because a batch is formed only when a worker is free and the
// source has fewer than max_concurrent_batches computing, work that arrives while the engines are
// busy accumulates into larger batches.
//
// Thread-safe. Waiting uses the real time remaining until a source's next poll as measured by the
// injected clock.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/batching/batcher.h"
#include "core/batching/clock.h"
#include "core/common/thread_priority.h"

namespace grove::batching {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Work to run now (empty when none), and in *next_poll when to ask again if nothing is notified
  // (InfiniteFuture: only after Notify). Called by executor threads under the executor's lock: it
  // must be quick and must not call back into the executor.
  virtual absl::AnyInvocable<void() &&> TakeWork(absl::Time* next_poll) = 0;
};

// The sources of an executor and a round-robin poll over them. Not thread-safe: the executor's
// lock guards it.
class SourceRing {
 public:
  void Add(std::shared_ptr<BatchSource> source);
  void Remove(const BatchSource* source);
  void Clear() { sources_.clear(); }
  // Asks the sources, starting after the last one that gave work, until one hands out work; that
  // source is returned in *owner (keep it alive while the work runs). *earliest: the earliest next
  // poll of the sources asked (InfiniteFuture when none asked for one).
  absl::AnyInvocable<void() &&> Take(std::shared_ptr<BatchSource>* owner, absl::Time* earliest);

 private:
  std::vector<std::shared_ptr<BatchSource>> sources_;
  size_t next_ = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual void Add(std::shared_ptr<BatchSource> source) = 0;
  // After Remove returns, the executor holds no reference to `source` for new work (work already
  // handed out may still be running).
  virtual void Remove(const BatchSource* source) = 0;
  // Something changed (a task was queued, a batch finished): poll the sources again.
  virtual void Notify() = 0;
  // The caller's thread may compute one batch now instead of handing it to an executor thread:
  // true when no batch is computing on the executor and no other caller holds this slot (the
  // engines are idle, so the caller cannot wait behind another batch, e.g. for a GPU's staging
  // lock). After true the caller computes and then calls EndInline. Never waits. An executor
  // that runs work only on its own threads answers false.
  virtual bool TryBeginInline() { return false; }
  virtual void EndInline() {}
  // Finishes running work; no work runs afterwards. Sources' queued work is not run.
  virtual void Stop() = 0;
};

class BatchExecutor final : public Executor {
 public:
  // `clock` is not owned and outlives the executor. Threads run at `priority`: batches compute on
  // them.
  BatchExecutor(int num_threads, const Clock* clock,
                ThreadPriority priority = ThreadPriority::kNormal);
  ~BatchExecutor() override;  // Stop()
  BatchExecutor(const BatchExecutor&) = delete;
  BatchExecutor& operator=(const BatchExecutor&) = delete;

  void Add(std::shared_ptr<BatchSource> source) override;
  void Remove(const BatchSource* source) override;
  void Notify() override;
  bool TryBeginInline() override;
  void EndInline() override;
  // Finishes running work, then joins the threads.
  void Stop() override;
  int num_threads() const { return static_cast<int>(threads_.size()); }

 private:
  void WorkerLoop();

  const Clock* const clock_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  SourceRing sources_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Batches computing: on the threads, plus one on a caller's thread (TryBeginInline). Atomic so
  // that the inline check takes no lock that the workers hold while polling.
  std::atomic<int> busy_{0};
  std::atomic<bool> stopped_{false};  // stop_, readable without the lock
  std::vector<std::thread> threads_;
};

// What computing a batch returns: the rows it already reported with Batcher::Progress (0 if none),
// and optionally what is left to do once the batch's slot is free (`then`, e.g. answering its
// callers): run on the same thread after BatchDone, so that the next batch of the queue can start
// meanwhile.
struct Processed {
  Processed(int64_t rows = 0) : reported_rows(rows) {}  // NOLINT: a plain row count converts
  Processed(int64_t rows, absl::AnyInvocable<void() &&> after)
      : reported_rows(rows), then(std::move(after)) {}
  int64_t reported_rows;
  absl::AnyInvocable<void() &&> then;
};

// A Batcher whose batches run on an Executor.
//   process(Batch<Task>&&)  computes a batch and answers its tasks, now or in the returned
//                           Processed::then (on an executor thread, or the caller's for RunNow);
//   drop(Dropped<Task>&&)   answers a task dropped before compute (expired, cancelled, drained).
// Create with std::make_shared and Add it to the executor; Remove it before destroying it.
template <BatchTask Task>
class BatchQueue final : public BatchSource {
 public:
  using ProcessFn = absl::AnyInvocable<Processed(Batch<Task>&&)>;
  using DropFn = absl::AnyInvocable<void(Dropped<Task>&&)>;

  BatchQueue(const BatcherOptions& options, const Clock* clock, Executor* executor,
             ProcessFn process, DropFn drop)
      : batcher_(options, clock),
        executor_(executor),
        process_(std::move(process)),
        drop_(std::move(drop)) {}

  // Batcher::Schedule (tasks found expired or cancelled meanwhile are answered here), then wakes
  // the executor when a poll may now find work sooner (Batcher::Schedule's `poll_sooner`): not
  // when this queue's batch slots are all computing, since the thread finishing one of them polls
  // again (and wakes another when more is ready), so that idle threads are not woken only to find
  // nothing.
  // `run_now` (optional): when the executor's engines are idle (Executor::TryBeginInline) and the
  // batcher hands the task out at once (Batcher::Schedule's `run_now`), *run_now is that batch and
  // the caller must pass it to RunNow on this thread; the executor is not woken. Otherwise the
  // task is queued as without it.
  absl::Status Schedule(std::unique_ptr<Task>& task,
                        const typename Batcher<Task>::AdmitFn* admit = nullptr,
                        Batch<Task>* run_now = nullptr) {
    std::vector<Dropped<Task>> dropped;
    const bool slot = run_now != nullptr && executor_->TryBeginInline();
    bool poll_sooner = false;
    absl::Status status =
        batcher_.Schedule(task, &dropped, admit, slot ? run_now : nullptr, &poll_sooner);
    if (slot && run_now->empty()) executor_->EndInline();
    for (Dropped<Task>& d : dropped) drop_(std::move(d));
    if (poll_sooner) executor_->Notify();
    return status;
  }
  // Computes a batch Schedule handed out in `run_now`, on the calling thread, then releases the
  // executor's slot; wakes the executor only when tasks queued meanwhile wait for it; then runs
  // what the batch left for after (Processed::then).
  void RunNow(Batch<Task>&& batch) {
    const int64_t rows = batch.rows;
    Processed processed = process_(std::move(batch));
    batcher_.BatchDone(rows - processed.reported_rows);
    executor_->EndInline();
    if (batcher_.stats().queued_tasks > 0) executor_->Notify();
    if (processed.then) std::move(processed.then)();
  }
  // Answers expired and cancelled tasks now instead of at the next poll.
  void Purge() {
    for (Dropped<Task>& d : batcher_.Purge()) drop_(std::move(d));
  }

  absl::AnyInvocable<void() &&> TakeWork(absl::Time* next_poll) override {
    typename Batcher<Task>::PollResult polled = batcher_.Poll();
    *next_poll = polled.next_poll;
    if (polled.batch.empty() && polled.dropped.empty()) return nullptr;
    return [this, polled = std::move(polled)]() mutable {
      for (Dropped<Task>& d : polled.dropped) drop_(std::move(d));
      Processed processed;
      if (!polled.batch.empty()) {
        const int64_t rows = polled.batch.rows;
        processed = process_(std::move(polled.batch));
        batcher_.BatchDone(rows - processed.reported_rows);
      }
      // The finished batch freed a slot of this queue: another thread may now start a batch of
      // its waiting tasks (while this one runs what the batch left for after). Nothing waiting,
      // nothing to wake (this thread polls again anyway).
      if (batcher_.stats().queued_tasks > 0) executor_->Notify();
      if (processed.then) std::move(processed.then)();
    };
  }

  // Batcher::Flush, then wakes the executor.
  void Flush() {
    batcher_.Flush();
    executor_->Notify();
  }
  // Stop accepting; queued tasks still run (draining).
  void Close() {
    batcher_.Close();
    executor_->Notify();
  }
  // Answers every queued task with `status` without compute.
  void DropAll(const absl::Status& status) {
    for (Dropped<Task>& d : batcher_.DrainAll(status)) drop_(std::move(d));
  }
  Batcher<Task>& batcher() { return batcher_; }
  const Batcher<Task>& batcher() const { return batcher_; }

 private:
  Batcher<Task> batcher_;
  Executor* const executor_;
  ProcessFn process_;
  DropFn drop_;
};

}  // namespace grove::batching
