// Batcher<Task>: one bounded queue of work that merges tasks into batches of up to a row limit,
// waiting at most a configured delay for more rows (dynamic batching, as TF Serving's batching
// library and Triton's dynamic batcher do).
//
// A Task is any type with `int64_t size() const` (its rows). Optionally it has
// `absl::Time deadline() const` (expired tasks are dropped with DEADLINE_EXCEEDED before compute) and
// `bool cancelled() const` (cancelled tasks are dropped with CANCELLED).
//
// The batcher is passive: Schedule() adds work and never waits (a full queue, or an admission
// check that refuses, answers RESOURCE_EXHAUSTED at once); Poll() is called by whoever executes
// batches (BatchExecutor, ManualExecutor in tests) and hands out the next ready batch plus the tasks
// dropped since the last poll; Purge() takes out expired and cancelled tasks at once. Time comes
// only from the injected Clock.
//
// A task that finds the queue empty and a batch slot free may also be handed back by Schedule to
// run at once on the scheduling thread (see Schedule's `run_now`): no hand-off to an executor
// thread for a call that finds the engine idle.
//
// Batch rule, evaluated at Poll(now) over the FIFO queue, when fewer than max_concurrent_batches of
// this batcher are computing:
//   * ready when the queued rows reach max_batch_rows, or the oldest task waited max_delay, or the
//     batcher is closed or flushing (draining);
//   * a batch takes tasks from the head while the sum stays <= max_batch_rows (always at least one
//     task: a task larger than max_batch_rows is a batch of its own). Tasks are never split.
//
// Thread-safe: every method may be called from any thread; critical sections are short and never
// wait for compute.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/batching/clock.h"

namespace grove::batching {

struct BatcherOptions {
  int64_t max_batch_rows = 4096;                   // rows merged into one batch
  absl::Duration max_delay = absl::ZeroDuration();  // longest wait of a batch's first task
  int64_t max_queue_rows = int64_t{1} << 20;       // bound on queued rows
  int64_t max_queue_tasks = 4096;                  // bound on queued tasks
  int max_concurrent_batches = 2;                  // batches of this queue computing at once
};

// INVALID_ARGUMENT when a limit is not positive or the delay is negative.
absl::Status ValidateBatcherOptions(const BatcherOptions& options);

template <typename T>
concept BatchTask = requires(const T& t) {
  { t.size() } -> std::convertible_to<int64_t>;
};
template <typename T>
concept TaskWithDeadline = requires(const T& t) {
  { t.deadline() } -> std::convertible_to<absl::Time>;
};
template <typename T>
concept CancellableTask = requires(const T& t) {
  { t.cancelled() } -> std::convertible_to<bool>;
};

template <BatchTask Task>
struct Batch {
  std::vector<std::unique_ptr<Task>> tasks;
  std::vector<absl::Time> enqueue_times;  // parallel to tasks
  int64_t rows = 0;
  absl::Time formed;  // when Poll handed it out
  bool empty() const { return tasks.empty(); }
};

// A task answered without compute.
template <BatchTask Task>
struct Dropped {
  std::unique_ptr<Task> task;
  absl::Status status;  // CANCELLED, DEADLINE_EXCEEDED or (DrainAll) the given status
  absl::Time enqueued;
};

template <BatchTask Task>
class Batcher {
 public:
  struct PollResult {
    Batch<Task> batch;                   // empty when no batch is ready
    std::vector<Dropped<Task>> dropped;  // to be answered by the caller
    // When to poll again if nothing else happens; InfiniteFuture when only Schedule or BatchDone
    // can make a batch ready.
    absl::Time next_poll = absl::InfiniteFuture();
  };
  struct Stats {
    int64_t queued_tasks = 0;
    int64_t queued_rows = 0;
    int inflight_batches = 0;
    int64_t inflight_rows = 0;  // rows of computing batches not yet reported by Progress
  };
  // Decides, under the batcher's lock and from the work ahead of a task, whether to queue it: OK,
  // or the error Schedule returns (RESOURCE_EXHAUSTED). Must be quick and must not call back.
  using AdmitFn = absl::FunctionRef<absl::Status(const Stats& ahead, int64_t rows)>;

  // `clock` is not owned and outlives the batcher. `options` must be valid.
  Batcher(const BatcherOptions& options, const Clock* clock) : options_(options), clock_(clock) {}
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues `task`, taking it (task becomes null) on success. Never waits: RESOURCE_EXHAUSTED when
  // the queue bounds would be exceeded, UNAVAILABLE after Close(), INVALID_ARGUMENT for a task of
  // size <= 0; on error the caller keeps the task.
  // `admit` (optional) is asked after expired and cancelled tasks left the queue, so that they do
  // not count as work ahead; those are returned in *dropped (may be null when the task type has no
  // deadline and cannot be cancelled) for the caller to answer.
  // `run_now` (optional): when the task can start at once -- nothing is queued, fewer than
  // max_concurrent_batches of this batcher are computing, and no batching delay is configured
  // (a positive max_delay asks for company) -- it is admitted as above but not queued: it comes
  // back in *run_now as a batch of its own, counted as computing like a batch Poll hands out
  // (BatchDone must follow), for the caller to compute on its own thread. Otherwise *run_now
  // stays empty and the task is queued.
  // `poll_sooner` (optional) is set to whether the queued task may have made the batcher's next
  // Poll hand out work or want an earlier poll than before: true when fewer than
  // max_concurrent_batches are computing, or when its deadline is the queue's earliest; false
  // when the batches computing hold every slot and the task's deadline is no earlier than one
  // already queued -- the next BatchDone is the first moment a poll can find something new, so an
  // executor that polls after each batch need not be woken (false also when not queued).
  absl::Status Schedule(std::unique_ptr<Task>& task) { return Schedule(task, nullptr, nullptr); }
  absl::Status Schedule(std::unique_ptr<Task>& task, std::vector<Dropped<Task>>* dropped,
                        const AdmitFn* admit, Batch<Task>* run_now = nullptr,
                        bool* poll_sooner = nullptr) {
    if (poll_sooner != nullptr) *poll_sooner = false;
    const int64_t rows = task->size();
    if (rows <= 0) return absl::InvalidArgumentError("a batch task must have at least one row");
    const absl::Time now = clock_->Now();
    absl::MutexLock lock(&mu_);
    if (closed_) return absl::UnavailableError("the queue is closed (server shutting down)");
    if (dropped != nullptr && now >= earliest_deadline_) PurgeLocked(now, dropped);
    if (static_cast<int64_t>(queue_.size()) + 1 > options_.max_queue_tasks) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "queue full: ", queue_.size(), " requests waiting (limit ", options_.max_queue_tasks,
          "); retry later"));
    }
    if (queued_rows_ + rows > options_.max_queue_rows) {
      return absl::ResourceExhaustedError(
          absl::StrCat("queue full: ", queued_rows_, " rows waiting, request has ", rows,
                       " (limit ", options_.max_queue_rows, "); retry later"));
    }
    if (admit != nullptr) {
      absl::Status admitted = (*admit)(StatsLocked(), rows);
      if (!admitted.ok()) return admitted;
    }
    if (run_now != nullptr && queue_.empty() && !closed_ &&
        inflight_batches_ < options_.max_concurrent_batches &&
        options_.max_delay == absl::ZeroDuration()) {
      run_now->formed = now;
      run_now->rows = rows;
      run_now->tasks.push_back(std::move(task));
      run_now->enqueue_times.push_back(now);
      ++inflight_batches_;
      inflight_rows_ += rows;
      return absl::OkStatus();
    }
    bool sooner = inflight_batches_ < options_.max_concurrent_batches;
    if constexpr (TaskWithDeadline<Task>) {
      sooner = sooner || task->deadline() < earliest_deadline_;
      earliest_deadline_ = std::min(earliest_deadline_, task->deadline());
    }
    if (poll_sooner != nullptr) *poll_sooner = sooner;
    queue_.push_back(Entry{std::move(task), now, rows});
    queued_rows_ += rows;
    return absl::OkStatus();
  }

  // Takes every expired or cancelled task out of the queue now (a call was cancelled, or the
  // caller wants stale work gone before judging the queue), for the caller to answer.
  std::vector<Dropped<Task>> Purge() {
    std::vector<Dropped<Task>> dropped;
    const absl::Time now = clock_->Now();
    absl::MutexLock lock(&mu_);
    PurgeLocked(now, &dropped);
    return dropped;
  }

  // Drops expired and cancelled tasks and hands out the next ready batch, if any (see the rule
  // above). A returned non-empty batch must be followed by BatchDone(batch.rows).
  PollResult Poll() {
    const absl::Time now = clock_->Now();
    PollResult result;
    absl::MutexLock lock(&mu_);
    PurgeLocked(now, &result.dropped);
    if (queue_.empty()) return result;
    if (inflight_batches_ >= options_.max_concurrent_batches) {
      // BatchDone makes the next batch possible; deadlines still need a look.
      result.next_poll = EarliestDeadline();
      return result;
    }
    if (!ReadyLocked(now)) {
      result.next_poll = std::min(queue_.front().enqueued + options_.max_delay, EarliestDeadline());
      return result;
    }
    Batch<Task>& batch = result.batch;
    batch.formed = now;
    do {
      Entry& e = queue_.front();
      batch.rows += e.rows;
      batch.tasks.push_back(std::move(e.task));
      batch.enqueue_times.push_back(e.enqueued);
      queued_rows_ -= e.rows;
      queue_.pop_front();
    } while (!queue_.empty() && batch.rows + queue_.front().rows <= options_.max_batch_rows);
    ++inflight_batches_;
    inflight_rows_ += batch.rows;
    if (!queue_.empty()) {
      if (inflight_batches_ >= options_.max_concurrent_batches) {
        result.next_poll = EarliestDeadline();
      } else if (ReadyLocked(now)) {
        result.next_poll = now;
      } else {
        result.next_poll =
            std::min(queue_.front().enqueued + options_.max_delay, EarliestDeadline());
      }
    }
    return result;
  }

  // `rows` of a computing batch were computed or abandoned (its chunked execution reports as it
  // goes, so that the work ahead of new tasks shrinks).
  void Progress(int64_t rows) {
    absl::MutexLock lock(&mu_);
    inflight_rows_ -= rows;
  }
  // A batch handed out by Poll finished computing; `remaining_rows` are its rows not reported by
  // Progress (all of them when it never reported).
  void BatchDone(int64_t remaining_rows) {
    absl::MutexLock lock(&mu_);
    --inflight_batches_;
    inflight_rows_ -= remaining_rows;
  }

  // New limits apply to the next Schedule/Poll; queued tasks stay.
  void SetOptions(const BatcherOptions& options) {
    absl::MutexLock lock(&mu_);
    options_ = options;
  }
  BatcherOptions options() const {
    absl::MutexLock lock(&mu_);
    return options_;
  }

  // Stops accepting tasks (Schedule answers UNAVAILABLE). Queued tasks are still batched, now
  // without waiting for the delay.
  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }
  bool closed() const {
    absl::MutexLock lock(&mu_);
    return closed_;
  }
  // Keeps accepting tasks but no longer waits for the delay: every queued task is ready at once
  // (the server is draining before shutdown).
  void Flush() {
    absl::MutexLock lock(&mu_);
    flush_ = true;
  }
  // Nothing queued and nothing computing.
  bool Idle() const {
    absl::MutexLock lock(&mu_);
    return queue_.empty() && inflight_batches_ == 0;
  }

  // Removes every queued task, answered with `status` by the caller (shutdown past its grace).
  std::vector<Dropped<Task>> DrainAll(const absl::Status& status) {
    std::vector<Dropped<Task>> out;
    absl::MutexLock lock(&mu_);
    for (Entry& e : queue_) out.push_back(Dropped<Task>{std::move(e.task), status, e.enqueued});
    queue_.clear();
    queued_rows_ = 0;
    earliest_deadline_ = absl::InfiniteFuture();
    return out;
  }

  Stats stats() const {
    absl::MutexLock lock(&mu_);
    return StatsLocked();
  }

 private:
  struct Entry {
    std::unique_ptr<Task> task;
    absl::Time enqueued;
    int64_t rows;
  };

  // The deadline first: gRPC also cancels a call whose deadline passed, and that is an expiry.
  static absl::Status DropStatus(const Task& task, absl::Time now) {
    if constexpr (TaskWithDeadline<Task>) {
      if (task.deadline() <= now) {
        return absl::DeadlineExceededError("deadline exceeded while queued");
      }
    }
    if constexpr (CancellableTask<Task>) {
      if (task.cancelled()) return absl::CancelledError("the call was cancelled");
    }
    return absl::OkStatus();
  }

  Stats StatsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return Stats{static_cast<int64_t>(queue_.size()), queued_rows_, inflight_batches_,
                 inflight_rows_};
  }

  // Moves expired and cancelled tasks to *dropped; recomputes the earliest deadline.
  void PurgeLocked(absl::Time now, std::vector<Dropped<Task>>* dropped)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if constexpr (TaskWithDeadline<Task> || CancellableTask<Task>) {
      absl::Time earliest = absl::InfiniteFuture();
      for (auto it = queue_.begin(); it != queue_.end();) {
        absl::Status drop = DropStatus(*it->task, now);
        if (drop.ok()) {
          if constexpr (TaskWithDeadline<Task>) earliest = std::min(earliest, it->task->deadline());
          ++it;
          continue;
        }
        queued_rows_ -= it->rows;
        dropped->push_back(Dropped<Task>{std::move(it->task), std::move(drop), it->enqueued});
        it = queue_.erase(it);
      }
      earliest_deadline_ = earliest;
    }
  }

  bool ReadyLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || flush_ || queued_rows_ >= options_.max_batch_rows ||
           now >= queue_.front().enqueued + options_.max_delay;
  }

  // A lower bound of the queued tasks' deadlines (exact after a purge): an early wake-up only
  // costs a poll.
  absl::Time EarliestDeadline() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return earliest_deadline_;
  }

  mutable absl::Mutex mu_;
  BatcherOptions options_ ABSL_GUARDED_BY(mu_);
  const Clock* const clock_;
  std::deque<Entry> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_rows_ ABSL_GUARDED_BY(mu_) = 0;
  int inflight_batches_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t inflight_rows_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool flush_ ABSL_GUARDED_BY(mu_) = false;
  // No queued task expires before this (Schedule purges only once it passed).
  absl::Time earliest_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

}  // namespace grove::batching
