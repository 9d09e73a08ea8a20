// BatchExecutor: a fixed set of threads that run the batches of many queues (one per model and
// operation), and BatchQueue<Task>, a Batcher wired to an executor and to the functions that compute
// a batch and answer dropped tasks.
//
// Workers poll every registered source round-robin; a source hands out work (a closure) or the time
// at which it wants to be polled again. Because a batch is formed only when a worker is free and the
// source has fewer than max_concurrent_batches computing, work that arrives while the engines are
// busy accumulates into larger batches.
//
// Thread-safe. Waiting uses the real time remaining until a source's next poll as measured by the
// injected clock.
#pragma once

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

namespace grove::batching {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Work to run now (empty when none), and in *next_poll when to ask again if nothing is notified
  // (InfiniteFuture: only after Notify). Called by executor threads under the executor's lock: it
  // must be quick and must not call back into the executor.
  virtual absl::AnyInvocable<void() &&> TakeWork(absl::Time* next_poll) = 0;
};

class BatchExecutor {
 public:
  // `clock` is not owned and outlives the executor.
  BatchExecutor(int num_threads, const Clock* clock);
  ~BatchExecutor();  // Stop()
  BatchExecutor(const BatchExecutor&) = delete;
  BatchExecutor& operator=(const BatchExecutor&) = delete;

  void Add(std::shared_ptr<BatchSource> source);
  // After Remove returns, the executor holds no reference to `source` for new work (work already
  // handed out may still be running).
  void Remove(const BatchSource* source);
  // Something changed (a task was queued, a batch finished): workers poll again.
  void Notify();
  // Finishes running work, then joins the threads. Sources' queued work is not run.
  void Stop();
  int num_threads() const { return static_cast<int>(threads_.size()); }

 private:
  void WorkerLoop();

  const Clock* const clock_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::vector<std::shared_ptr<BatchSource>> sources_ ABSL_GUARDED_BY(mu_);
  size_t next_source_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// A Batcher whose batches run on a BatchExecutor.
//   process(Batch<Task>&&)  computes a batch and answers its tasks (on an executor thread);
//   drop(Dropped<Task>&&)   answers a task dropped before compute (expired, cancelled, drained).
// Create with std::make_shared and Add it to the executor; Remove it before destroying it.
template <BatchTask Task>
class BatchQueue final : public BatchSource {
 public:
  using ProcessFn = absl::AnyInvocable<void(Batch<Task>&&)>;
  using DropFn = absl::AnyInvocable<void(Dropped<Task>&&)>;

  BatchQueue(const BatcherOptions& options, const Clock* clock, BatchExecutor* executor,
             ProcessFn process, DropFn drop)
      : batcher_(options, clock),
        executor_(executor),
        process_(std::move(process)),
        drop_(std::move(drop)) {}

  // Batcher::Schedule, then wakes the executor.
  absl::Status Schedule(std::unique_ptr<Task>& task) {
    absl::Status status = batcher_.Schedule(task);
    if (status.ok()) executor_->Notify();
    return status;
  }

  absl::AnyInvocable<void() &&> TakeWork(absl::Time* next_poll) override {
    typename Batcher<Task>::PollResult polled = batcher_.Poll();
    *next_poll = polled.next_poll;
    if (polled.batch.empty() && polled.dropped.empty()) return nullptr;
    return [this, polled = std::move(polled)]() mutable {
      for (Dropped<Task>& d : polled.dropped) drop_(std::move(d));
      if (!polled.batch.empty()) {
        const int64_t rows = polled.batch.rows;
        process_(std::move(polled.batch));
        batcher_.BatchDone(rows);
      }
      executor_->Notify();
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
  BatchExecutor* const executor_;
  ProcessFn process_;
  DropFn drop_;
};

}  // namespace grove::batching
