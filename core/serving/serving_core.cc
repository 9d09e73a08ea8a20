#include "core/serving/serving_core.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/serving/serving_queue.h"

namespace grove::serving {

struct ServingCore::ModelQueues {
  std::shared_ptr<ServingQueue> queues[kNumOperations];
};

absl::Status ValidateServingOptions(const ServingOptions& o) {
  if (o.max_queue_wait < absl::Milliseconds(1) || o.max_queue_wait > kMaxQueueWaitBound) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_queue_wait (--max_queue_wait_ms) must be between 1 ms and 1 h, got ",
                     absl::FormatDuration(o.max_queue_wait)));
  }
  if (o.chunk_target < absl::Milliseconds(1) || o.chunk_target > kMaxChunkTarget) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_target (--compute_chunk_ms) must be between 1 ms and 10 s, got ",
                     absl::FormatDuration(o.chunk_target)));
  }
  if (o.inline_compute < absl::ZeroDuration() || o.inline_compute > kMaxInlineCompute) {
    return absl::InvalidArgumentError(
        absl::StrCat("inline_compute (--inline_compute_us) must be between 0 and 10 ms, got ",
                     absl::FormatDuration(o.inline_compute)));
  }
  if (o.memory_budget_bytes < (int64_t{1} << 20) || o.memory_budget_bytes > kMaxMemoryBudgetBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request memory budget (--max_request_memory_mb) must be between 1 MiB and 1 PiB, got ",
        o.memory_budget_bytes, " bytes"));
  }
  if (o.batch_threads < 1 || o.batch_threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_threads (--batch_threads) must be between 1 and 1024, got ",
                     o.batch_threads));
  }
  return absl::OkStatus();
}

ServingCore::ServingCore(const ServingOptions& options, EngineRunner* engine,
                         ServingObserver* observer, batching::Executor* executor)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : batching::RealClock::Get()),
      engine_(engine),
      observer_(observer),
      owned_executor_(executor == nullptr
                          ? std::make_unique<batching::BatchExecutor>(options.batch_threads, clock_,
                                                                   options.compute_priority)
                          : nullptr),
      executor_(executor != nullptr ? executor : owned_executor_.get()),
      memory_(options.memory_budget_bytes) {}

ServingCore::~ServingCore() { Shutdown(); }

ServingCore::ModelQueues* ServingCore::QueuesFor(const std::string& model,
                                                 const registry::ModelConfig& config) {
  if (ModelQueues* found = queues_.Find(model)) return found;
  absl::MutexLock lock(&mu_);
  return queues_.FindOrCreate(model, [&] {
    auto created = std::make_unique<ModelQueues>();
    const ServingQueueOptions queue_options{options_.max_queue_wait, options_.chunk_target,
                                            options_.inline_compute, options_.host_buffers,
                                            options_.copy_pool};
    for (int i = 0; i < kNumOperations; ++i) {
      const Operation op = static_cast<Operation>(i);
      auto queue = std::make_shared<ServingQueue>(config.Batching(op), queue_options, clock_,
                                                  executor_, engine_,
                                                  observer_->ForQueue(model, op));
      if (draining_) queue->Flush();
      if (closed_) queue->Close();
      executor_->Add(queue->source());
      created->queues[i] = std::move(queue);
    }
    return created;
  });
}

// After Close every queue is closed (and QueuesFor closes new ones), so the queue itself answers
// UNAVAILABLE.
absl::Status ServingCore::Submit(std::unique_ptr<ComputeTask> task) {
  ModelQueues* q = QueuesFor(task->model->name, *task->model->config);
  return q->queues[static_cast<int>(task->op)]->Submit(std::move(task));
}

absl::StatusOr<MemoryReservation> ServingCore::Reserve(const registry::ModelVersion& model,
                                                       Operation op, int64_t rows,
                                                       int64_t bytes) {
  absl::StatusOr<MemoryReservation> r = memory_.Reserve(bytes);
  if (!r.ok()) {
    QueuesFor(model.name, *model.config)->queues[static_cast<int>(op)]->observer().Refused(
        DropReason::kMemory, rows);
  }
  return r;
}

void ServingCore::Configure(const std::string& model, const registry::ModelConfig& config) {
  ModelQueues* q = QueuesFor(model, config);
  for (int i = 0; i < kNumOperations; ++i) {
    q->queues[i]->batcher().SetOptions(config.Batching(static_cast<Operation>(i)));
  }
}

// Under mu_, so that a model's queues created meanwhile (under mu_ too) are either seen here or see
// the flag.
void ServingCore::Drain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  queues_.ForEach([](const std::string&, ModelQueues& q) {
    for (auto& queue : q.queues) queue->Flush();
  });
}

void ServingCore::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  queues_.ForEach([](const std::string&, ModelQueues& q) {
    for (auto& queue : q.queues) queue->Close();
  });
}

void ServingCore::Shutdown() {
  Close();
  std::vector<std::shared_ptr<ServingQueue>> queues;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    queues_.ForEach([&](const std::string&, ModelQueues& q) {
      for (auto& queue : q.queues) queues.push_back(queue);
    });
  }
  // Closed queues hand out their work without waiting for the delay; let all of it run.
  while (owned_executor_ != nullptr) {
    bool idle = true;
    for (auto& q : queues) idle = idle && q->batcher().Idle();
    if (idle) break;
    absl::SleepFor(absl::Milliseconds(2));
  }
  executor_->Stop();
  for (auto& q : queues) q->DropAll(absl::UnavailableError("the server is shutting down"));
}

ServingCore::Stats ServingCore::QueueStats(const std::string& model, Operation op) {
  ModelQueues* q = queues_.Find(model);
  if (q == nullptr) return {};
  return q->queues[static_cast<int>(op)]->batcher().stats();
}

}  // namespace grove::serving
