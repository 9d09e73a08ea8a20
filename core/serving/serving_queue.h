// ServingQueue: one (model, operation) queue of the serving core (see serving_core.h for the
// rules): admission by expected wait, chunked execution of batches, and drops. Internal to
// core/serving.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/batching/batch_executor.h"
#include "core/common/host_copy.h"
#include "core/serving/compute_task.h"
#include "core/serving/engine_runner.h"
#include "core/serving/host_buffers.h"
#include "core/serving/observer.h"
#include "core/serving/service_rate.h"

namespace grove {
class ThreadPool;
}  // namespace grove

namespace grove::serving {

// A merged batch gathers its rows into host buffer pool buffers from this many bytes of rows (the
// pool's smallest size class); below, into the batch thread's own buffers.
inline constexpr int64_t kMinPooledBatchBytes = int64_t{64} << 10;

struct ServingQueueOptions {
  absl::Duration max_queue_wait;
  absl::Duration chunk_target;
  absl::Duration inline_compute;  // ServingOptions::inline_compute
  HostBufferPool* host_buffers = nullptr;  // ServingOptions::host_buffers
  ThreadPool* copy_pool = nullptr;         // ServingOptions::copy_pool
};

class ServingQueue final : public std::enable_shared_from_this<ServingQueue> {
 public:
  // `clock`, `executor` and `engine` are not owned and outlive the queue.
  ServingQueue(const batching::BatcherOptions& batching, const ServingQueueOptions& options,
               const batching::Clock* clock, batching::Executor* executor, EngineRunner* engine,
               std::unique_ptr<QueueObserver> observer);

  // The batch source to add to the executor.
  std::shared_ptr<batching::BatchSource> source() { return batch_queue_; }
  absl::Status Submit(std::unique_ptr<ComputeTask> task);
  QueueObserver& observer() { return *observer_; }
  batching::Batcher<ComputeTask>& batcher() { return batch_queue_->batcher(); }
  void Flush() { batch_queue_->Flush(); }
  void Close() { batch_queue_->Close(); }
  void DropAll(const absl::Status& status) { batch_queue_->DropAll(status); }

 private:
  // A task of a running batch and how many of its rows are computed.
  struct Part {
    ComputeTask* task;
    int64_t done = 0;
    bool open = true;
  };
  // Rows [begin, begin + rows) of one part, within one engine call.
  struct Segment {
    Part* part;
    int64_t begin;
    int64_t rows;
  };
  // A part's answer, given once the batch's slot is free (Process).
  struct Answer {
    std::shared_ptr<CallState> call;
    absl::Status status;
  };

  // OK, or RESOURCE_EXHAUSTED with *reason; *expected is the time to the task's answer.
  absl::Status Admit(const batching::Batcher<ComputeTask>::Stats& ahead, int64_t rows,
                     absl::Time deadline, absl::Time now, DropReason* reason,
                     absl::Duration* expected) const;
  // Feeds the rate's correction with how long `task` took (to `end`).
  void LearnFrom(const ComputeTask& task, absl::Time end);
  // Computes a batch. Parts finished before more engine work are answered at once; those finished
  // by the last engine call are answered in the returned Processed::then, after the batch's slot
  // was released, so that answering them (encoding and sending each response, on this thread)
  // does not hold the queue's next batch back.
  batching::Processed Process(batching::Batch<ComputeTask>&& batch);
  void Drop(batching::Dropped<ComputeTask>&& dropped);
  // Runs one group of tasks that share an engine call, chunk by chunk, adding the finished parts'
  // answers to *answers; returns the rows reported to the batcher.
  int64_t RunGroup(std::vector<Part>& parts, std::vector<Answer>* answers);
  // Closes open parts whose callers are gone (their answers to *answers); returns their
  // uncomputed rows.
  int64_t LeaveAbandoned(std::vector<Part>& parts, std::vector<Answer>* answers);
  // Gives the answers (CallState::TaskDone) and empties *answers.
  static void Deliver(std::vector<Answer>* answers);
  std::vector<Segment> NextChunk(std::vector<Part>& parts) const;
  absl::Status RunChunk(const std::vector<Segment>& segments, int64_t rows, RunInfo* info);
  void ReportDepth();

  const ServingQueueOptions options_;
  const batching::Clock* const clock_;
  EngineRunner* const engine_;
  const std::unique_ptr<QueueObserver> observer_;
  ServiceRate rate_;
  std::shared_ptr<batching::BatchQueue<ComputeTask>> batch_queue_;
  // Gather/scatter buffers of the batch being run when it does not use the host buffer pool, and
  // its copy list (one batch per thread at a time).
  static thread_local std::vector<float> in_buffer_;
  static thread_local std::vector<float> out_buffer_;
  static thread_local std::vector<CopyPiece> pieces_;
};

}  // namespace grove::serving
