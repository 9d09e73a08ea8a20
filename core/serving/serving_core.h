// ServingCore: groved's serving core without gRPC or Prometheus. It owns one batching queue per
// (model, operation), admits or sheds tasks, merges them into batches, runs batches in chunks on
// the engines (gathering rows of several calls into one engine call and scattering the results),
// drops work nobody waits for, and shuts down in order. Everything it does is reported through a
// ServingObserver.
//
// Admission (Submit), in order, all answered at once, never waiting:
//   * the queue's task and row bounds (RESOURCE_EXHAUSTED, reason queue_full);
//   * expected wait: the rows ahead (queued plus not yet computed rows of running batches) at the
//     queue's measured rate (ServiceRate). Refused (RESOURCE_EXHAUSTED, reason expected_wait) when
//     that wait exceeds `max_queue_wait`, or when the wait plus the task's own rows would end after
//     the caller's deadline. Before the first batch of a queue the rate is unknown and only the
//     bounds apply.
// Memory (Reserve): a server-wide budget for the bytes requests hold, taken by the adapter before
// it converts a request.
//
// Running at once (`inline_compute`): a task that arrives while its queue is empty, no batching
// delay is configured and the engines are idle (no batch computing on the executor) runs on the
// submitting thread -- a gRPC callback thread in groved -- instead of being handed to an executor
// thread and its answer handed back: two thread hand-offs fewer for a call that finds the engine
// idle. Only a task whose expected engine time (its rows at the queue's measured time per row of
// an engine call) is at most `inline_compute`, so that the submitting thread is held no longer
// than a short CPU or GPU launch; before a queue's first batch the time is unknown and the task
// is queued. Admission, deadlines, cancellation and the observer's events are the same as for a
// queued task (a batch of one task with zero queue wait).
//
// Leaving early: a cancelled call's queued tasks leave their queues at once (CallState hooks), an
// expired task leaves at the next Submit or poll of its queue. A running batch computes in chunks
// of about `chunk_target` of engine time and, between chunks, answers the tasks whose callers are
// gone (cancelled, deadline passed) without computing the rest of their rows; a batch stops when
// none of its callers waits any more.
//
// Answers: a task is answered (its CallState's TaskDone, which may encode and send the response)
// on the thread that computed it: at once when more engine work of its batch follows, and after
// the batch has released its slot for the tasks its last engine call finished, so that answering
// does not hold back the queue's next batch.
//
// Determinism: results do not depend on batching or chunking (engines compute rows
// independently).
//
// Thread-safe: Submit, Reserve, Configure from any thread; batches run on the executor's threads.
#pragma once

#include <algorithm>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/batching/batch_executor.h"
#include "core/batching/batcher.h"
#include "core/batching/clock.h"
#include "core/common/snapshot_map.h"
#include "core/common/thread_priority.h"
#include "core/serving/compute_task.h"
#include "core/serving/engine_runner.h"
#include "core/serving/host_buffers.h"
#include "core/serving/memory_budget.h"
#include "core/serving/observer.h"

namespace grove {
class ThreadPool;
}  // namespace grove

namespace grove::serving {

class ServingQueue;

// Bounds of the options (inclusive).
inline constexpr absl::Duration kMaxQueueWaitBound = absl::Hours(1);
inline constexpr absl::Duration kMaxChunkTarget = absl::Seconds(10);
inline constexpr absl::Duration kMaxInlineCompute = absl::Milliseconds(10);
inline constexpr int64_t kMaxMemoryBudgetBytes = int64_t{1} << 50;

// Batch threads for a host with `hardware_threads` (groved's --batch_threads=0): half of them, 2
// to 8, so that a GPU's staging lanes (four concurrent predict batches) and the other queues'
// batches can run at once on a large host without crowding a small one.
inline int DefaultBatchThreads(int hardware_threads) {
  return std::clamp(hardware_threads / 2, 2, 8);
}

struct ServingOptions {
  const batching::Clock* clock = nullptr;  // null: the real clock
  int batch_threads = 2;                   // threads of the owned executor
  ThreadPriority compute_priority = ThreadPriority::kNormal;  // of those threads
  // Longest expected wait ahead of a task that is still admitted (1 ms .. 1 h).
  absl::Duration max_queue_wait = absl::Seconds(10);
  // Engine time of one chunk of a running batch (1 ms .. 10 s): how late a batch notices that its
  // callers left, against the cost of more engine calls.
  absl::Duration chunk_target = absl::Milliseconds(20);
  // Expected engine time up to which a task that finds its queue empty and the engines idle is
  // computed on the submitting thread (0 .. 10 ms; 0: never, every task goes to the executor;
  // groved: --inline_compute_us).
  absl::Duration inline_compute = absl::Microseconds(100);
  // Bytes admitted requests may hold together (1 MiB .. 1 PiB).
  int64_t memory_budget_bytes = int64_t{2} << 30;
  // Where a batch of several requests gathers their rows and its results before they are
  // scattered back (page-locked buffers let the GPU engines skip their staging copies); null:
  // buffers of each batch thread's own. Not owned; outlives the core.
  HostBufferPool* host_buffers = nullptr;
  // Threads that share those gathers and scatters when large (null: the batch thread alone). Not
  // owned; outlives the core.
  ThreadPool* copy_pool = nullptr;
};

// INVALID_ARGUMENT naming the option and its bounds.
absl::Status ValidateServingOptions(const ServingOptions& options);

class ServingCore {
 public:
  using Stats = batching::Batcher<ComputeTask>::Stats;

  // `engine` and `observer` are not owned and outlive the core. `executor` (not owned) runs the
  // batches; null: the core owns a BatchExecutor with options.batch_threads threads. `options`
  // must be valid.
  ServingCore(const ServingOptions& options, EngineRunner* engine, ServingObserver* observer,
              batching::Executor* executor = nullptr);
  ~ServingCore();  // Shutdown()
  ServingCore(const ServingCore&) = delete;
  ServingCore& operator=(const ServingCore&) = delete;

  // Queues `task` on its model's queue for its operation (admission above), or computes it before
  // returning when it may run at once (`inline_compute` above: its CallState may then be answered
  // on this thread, inside Submit). On error the task is not queued and the caller answers its
  // CallState: RESOURCE_EXHAUSTED (shed), UNAVAILABLE (shutting down), DEADLINE_EXCEEDED (the
  // deadline already passed).
  absl::Status Submit(std::unique_ptr<ComputeTask> task);

  // Takes `bytes` from the memory budget for a request of `rows` rows to `model` (a refusal is
  // reported as shed work of that operation).
  absl::StatusOr<MemoryReservation> Reserve(const registry::ModelVersion& model, Operation op,
                                            int64_t rows, int64_t bytes);

  // Takes `bytes` from the memory budget for what a request holds before its model is known (a
  // request body as it is received); a refusal is reported by the caller.
  absl::StatusOr<MemoryReservation> ReserveUnattributed(int64_t bytes) {
    return memory_.Reserve(bytes);
  }

  // New batching limits of `model` (its queues are created when missing).
  void Configure(const std::string& model, const registry::ModelConfig& config);

  // Queues stop waiting for their batching delay (work is still accepted).
  void Drain();
  // New work is UNAVAILABLE; queued work still runs.
  void Close();
  // Close, wait until queued and computing work finished (owned executor only), stop the
  // executor, answer anything left with UNAVAILABLE. Idempotent.
  void Shutdown();

  // Statistics of (model, op); zeros when the queue does not exist.
  Stats QueueStats(const std::string& model, Operation op);
  const MemoryBudget& memory() const { return memory_; }
  const ServingOptions& options() const { return options_; }

 private:
  struct ModelQueues;

  ModelQueues* QueuesFor(const std::string& model, const registry::ModelConfig& config);

  const ServingOptions options_;
  const batching::Clock* const clock_;
  EngineRunner* const engine_;
  ServingObserver* const observer_;
  std::unique_ptr<batching::BatchExecutor> owned_executor_;
  batching::Executor* const executor_;
  MemoryBudget memory_;

  // A model's queues, found without a lock by every Submit; created (under mu_, so that a new
  // model's queues see draining_ and closed_) when first needed, never removed.
  SnapshotMap<std::string, ModelQueues> queues_;
  absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace grove::serving
