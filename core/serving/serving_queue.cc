#include "core/serving/serving_queue.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/host_copy.h"
#include "core/common/log.h"

namespace grove::serving {

thread_local std::vector<float> ServingQueue::in_buffer_;
thread_local std::vector<float> ServingQueue::out_buffer_;
thread_local std::vector<CopyPiece> ServingQueue::pieces_;

namespace {

double Millis(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// The deadline first: gRPC also cancels a call whose deadline passed, and that is an expiry.
absl::Status AbandonedStatus(const CallState& call, absl::Time now, DropReason* reason) {
  if (call.deadline() <= now) {
    *reason = DropReason::kDeadline;
    return absl::DeadlineExceededError("the call's deadline passed while its rows were computed");
  }
  *reason = DropReason::kCancelled;
  return absl::CancelledError("the call was cancelled");
}

RowsView SubRows(RowsView rows, int64_t begin, int64_t n) {
  return RowsView{rows.Row(begin), n, rows.cols, rows.stride};
}

MatrixView<float> SubOut(MatrixView<float> out, int64_t begin, int64_t n) {
  return MatrixView<float>{out.Row(begin), n, out.cols, out.stride};
}

// Appends the pieces that copy `rows` rows of `cols` floats from `src` (rows `src_stride` floats
// apart) to `dst` (`dst_stride` apart): one piece when both are dense, one per row otherwise.
void AddRowPieces(float* dst, int64_t dst_stride, const float* src, int64_t src_stride,
                  int64_t rows, int64_t cols, std::vector<CopyPiece>* pieces) {
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(cols);
  if (dst_stride == cols && src_stride == cols) {
    pieces->push_back(CopyPiece{reinterpret_cast<char*>(dst), reinterpret_cast<const char*>(src),
                                row_bytes * static_cast<size_t>(rows)});
    return;
  }
  for (int64_t k = 0; k < rows; ++k) {
    pieces->push_back(CopyPiece{reinterpret_cast<char*>(dst + k * dst_stride),
                                reinterpret_cast<const char*>(src + k * src_stride), row_bytes});
  }
}

}  // namespace

ServingQueue::ServingQueue(const batching::BatcherOptions& batching,
                           const ServingQueueOptions& options, const batching::Clock* clock,
                           batching::Executor* executor, EngineRunner* engine,
                           std::unique_ptr<QueueObserver> observer)
    : options_(options), clock_(clock), engine_(engine), observer_(std::move(observer)) {
  batch_queue_ = std::make_shared<batching::BatchQueue<ComputeTask>>(
      batching, clock, executor,
      [this](batching::Batch<ComputeTask>&& batch) { return Process(std::move(batch)); },
      [this](batching::Dropped<ComputeTask>&& d) { Drop(std::move(d)); });
}

absl::Status ServingQueue::Admit(const batching::Batcher<ComputeTask>::Stats& ahead,
                                 int64_t rows, absl::Time deadline, absl::Time now,
                                 DropReason* reason, absl::Duration* expected) const {
  if (!rate_.known()) return absl::OkStatus();
  const absl::Duration wait = rate_.QueueTime(ahead.queued_rows + ahead.inflight_rows);
  if (wait > options_.max_queue_wait) {
    *reason = DropReason::kExpectedWait;
    return absl::ResourceExhaustedError(absl::StrFormat(
        "overloaded: the work ahead would take about %.0f ms, above the server's bound of %.0f ms "
        "(--max_queue_wait_ms); retry later or elsewhere",
        Millis(wait), Millis(options_.max_queue_wait)));
  }
  const absl::Duration finish = wait + rate_.QueueTime(rows);
  *expected = finish;
  if (deadline != absl::InfiniteFuture() && now + finish > deadline) {
    *reason = DropReason::kExpectedWait;
    return absl::ResourceExhaustedError(absl::StrFormat(
        "overloaded: the call would finish in about %.1f ms (%.1f ms of work ahead), after its "
        "deadline in %.1f ms; retry later, elsewhere or with a longer deadline",
        Millis(finish), Millis(wait), Millis(deadline - now)));
  }
  return absl::OkStatus();
}

absl::Status ServingQueue::Submit(std::unique_ptr<ComputeTask> task) {
  const int64_t rows = task->rows.rows;
  const absl::Time now = clock_->Now();
  if (task->call->deadline() <= now) {
    observer_->Refused(DropReason::kDeadline, rows);
    return absl::DeadlineExceededError("the call's deadline expired before it was queued");
  }
  std::shared_ptr<CallState> call = task->call;
  DropReason reason = DropReason::kQueueFull;
  const absl::Time deadline = call->deadline();
  task->admitted = now;
  auto admit = [&](const batching::Batcher<ComputeTask>::Stats& ahead, int64_t n) {
    return Admit(ahead, n, deadline, now, &reason, &task->expected);
  };
  const batching::Batcher<ComputeTask>::AdmitFn admit_fn(admit);
  // Short enough to compute on this thread if the engines turn out to be idle?
  const bool may_run_now = options_.inline_compute > absl::ZeroDuration() &&
                           rate_.CallTime(rows) <= options_.inline_compute;
  batching::Batch<ComputeTask> run_now;
  absl::Status status = batch_queue_->Schedule(task, &admit_fn, may_run_now ? &run_now : nullptr);
  if (!status.ok()) {
    if (status.code() == absl::StatusCode::kUnavailable) reason = DropReason::kShutdown;
    observer_->Refused(reason, rows);
    return status;
  }
  observer_->Admitted(rows);
  if (!run_now.empty()) {
    // Computed and answered here; a cancellation meanwhile is seen between chunks as for any
    // running batch.
    batch_queue_->RunNow(std::move(run_now));
    return absl::OkStatus();
  }
  ReportDepth();
  // A cancelled call's queued tasks leave at once (the hook runs now if it was cancelled already).
  call->OnCancel([weak = std::weak_ptr<ServingQueue>(shared_from_this())] {
    if (std::shared_ptr<ServingQueue> q = weak.lock()) q->batch_queue_->Purge();
  });
  return absl::OkStatus();
}

void ServingQueue::ReportDepth() {
  const auto stats = batch_queue_->batcher().stats();
  observer_->QueueDepth(stats.queued_tasks, stats.queued_rows);
}

void ServingQueue::LearnFrom(const ComputeTask& task, absl::Time end) {
  if (task.expected > absl::ZeroDuration()) rate_.ObserveOutcome(task.expected, end - task.admitted);
}

void ServingQueue::Drop(batching::Dropped<ComputeTask>&& dropped) {
  const int64_t rows = dropped.task->rows.rows;
  if (dropped.status.code() == absl::StatusCode::kDeadlineExceeded) {
    LearnFrom(*dropped.task, dropped.task->deadline());
  }
  observer_->Dropped(DropReasonFor(dropped.status), rows, 0);
  ReportDepth();
  dropped.task->call->TaskDone(dropped.status);
}

batching::Processed ServingQueue::Process(batching::Batch<ComputeTask>&& batch) {
  const absl::Time start = clock_->Now();
  observer_->BatchStarted(batch.rows, static_cast<int64_t>(batch.tasks.size()));
  for (size_t i = 0; i < batch.tasks.size(); ++i) {
    observer_->QueueWait(batch.tasks[i]->model->version, start - batch.enqueue_times[i]);
  }
  ReportDepth();

  // Tasks that can share one engine call: same model copy, output kind (space), iteration
  // range and feature groups (the same object: the model's, or one request's).
  std::vector<std::unique_ptr<ComputeTask>>& tasks = batch.tasks;
  auto key = [](const ComputeTask& t) {
    return std::make_tuple(t.model.get(), static_cast<int>(t.params.kind),
                           static_cast<int>(t.params.output_space), t.params.iteration_begin,
                           t.params.iteration_end, t.params.groups.get());
  };
  std::stable_sort(tasks.begin(), tasks.end(),
                   [&](const auto& a, const auto& b) { return key(*a) < key(*b); });
  int64_t reported = 0;
  std::vector<Answer> answers;
  answers.reserve(tasks.size());
  for (size_t i = 0; i < tasks.size();) {
    std::vector<Part> parts;
    size_t j = i;
    for (; j < tasks.size() && key(*tasks[j]) == key(*tasks[i]); ++j) {
      parts.push_back(Part{tasks[j].get()});
    }
    reported += RunGroup(parts, &answers);
    i = j;
  }
  if (answers.empty()) return batching::Processed(reported);
  return batching::Processed(reported,
                             [answers = std::move(answers)]() mutable { Deliver(&answers); });
}

void ServingQueue::Deliver(std::vector<Answer>* answers) {
  for (Answer& a : *answers) a.call->TaskDone(a.status);
  answers->clear();
}

int64_t ServingQueue::LeaveAbandoned(std::vector<Part>& parts, std::vector<Answer>* answers) {
  const absl::Time now = clock_->Now();
  int64_t left = 0;
  for (Part& p : parts) {
    if (!p.open || !p.task->call->Abandoned(now)) continue;
    DropReason reason;
    absl::Status status = AbandonedStatus(*p.task->call, now, &reason);
    const int64_t remaining = p.task->rows.rows - p.done;
    if (reason == DropReason::kDeadline) LearnFrom(*p.task, p.task->deadline());
    observer_->Dropped(reason, p.task->rows.rows, p.done);
    p.open = false;
    left += remaining;
    answers->push_back(Answer{p.task->call, std::move(status)});
  }
  return left;
}

std::vector<ServingQueue::Segment> ServingQueue::NextChunk(std::vector<Part>& parts) const {
  const int64_t limit =
      rate_.RowsFor(options_.chunk_target, batch_queue_->batcher().options().max_batch_rows);
  std::vector<Segment> segments;
  int64_t rows = 0;
  for (Part& p : parts) {
    if (!p.open) continue;
    const int64_t n = std::min(p.task->rows.rows - p.done, limit - rows);
    if (n <= 0) break;
    segments.push_back(Segment{&p, p.done, n});
    rows += n;
  }
  return segments;
}

absl::Status ServingQueue::RunChunk(const std::vector<Segment>& segments, int64_t rows,
                                    RunInfo* info) {
  const ComputeTask& first = *segments.front().part->task;
  if (segments.size() == 1) {
    const Segment& s = segments.front();
    return engine_->Run(first, SubRows(first.rows, s.begin, s.rows),
                        SubOut(first.out, s.begin, s.rows), info);
  }
  // Several requests in one engine call: their rows gathered into one matrix and the results
  // scattered back. For batches of at least kMinPooledBatchBytes of rows, with a host buffer pool,
  // both matrices are its buffers, page-locked with a GPU, so the gather replaces the engine's
  // staging copy instead of adding to it, and the copies are shared by the copy pool; smaller
  // batches (merged single rows, say) keep this thread's buffers and take no pool lock.
  const int64_t cols = first.rows.cols;
  const int64_t width = first.out.cols;
  HostBufferPool::Buffer in_kept, out_kept;
  float* in_data = nullptr;
  float* out_data = nullptr;
  if (options_.host_buffers != nullptr && rows * cols * 4 >= kMinPooledBatchBytes) {
    in_kept = options_.host_buffers->Acquire(rows * cols * 4);
    out_kept = options_.host_buffers->Acquire(rows * width * 4);
  }
  if (in_kept && out_kept) {
    in_data = in_kept.floats();
    out_data = out_kept.floats();
  } else {  // no pool, or it is at its bound
    in_buffer_.resize(static_cast<size_t>(rows * cols));
    out_buffer_.resize(static_cast<size_t>(rows * width));
    in_data = in_buffer_.data();
    out_data = out_buffer_.data();
  }
  std::vector<CopyPiece>& pieces = pieces_;
  pieces.clear();
  int64_t r = 0;
  for (const Segment& s : segments) {
    const RowsView in = s.part->task->rows;
    AddRowPieces(in_data + r * cols, cols, in.Row(s.begin), in.stride, s.rows, cols, &pieces);
    r += s.rows;
  }
  CopyPieces(options_.copy_pool, pieces);
  absl::Status status = engine_->Run(first, MakeRowsView(in_data, rows, cols),
                                     MakeMatrixView(out_data, rows, width), info);
  if (!status.ok()) return status;
  pieces.clear();
  r = 0;
  for (const Segment& s : segments) {
    const MatrixView<float> out = s.part->task->out;
    AddRowPieces(out.Row(s.begin), out.stride, out_data + r * width, width, s.rows, width, &pieces);
    r += s.rows;
  }
  CopyPieces(options_.copy_pool, pieces);
  return absl::OkStatus();
}

int64_t ServingQueue::RunGroup(std::vector<Part>& parts, std::vector<Answer>* answers) {
  batching::Batcher<ComputeTask>& batcher = batch_queue_->batcher();
  int64_t reported = 0;
  auto report = [&](int64_t rows) {
    if (rows <= 0) return;
    batcher.Progress(rows);
    reported += rows;
  };
  while (true) {
    report(LeaveAbandoned(parts, answers));
    const std::vector<Segment> segments = NextChunk(parts);
    if (segments.empty()) break;
    int64_t rows = 0;
    for (const Segment& s : segments) rows += s.rows;
    // More engine work follows: the parts finished so far are answered now, not after it.
    Deliver(answers);
    RunInfo info;
    const absl::Time t0 = clock_->Now();
    const absl::Status status = RunChunk(segments, rows, &info);
    const absl::Duration elapsed = clock_->Now() - t0;
    rate_.Observe(rows, elapsed, std::max(1, batcher.stats().inflight_batches));
    const double seconds =
        info.compute_seconds > 0 ? info.compute_seconds : absl::ToDoubleSeconds(elapsed);
    observer_->Computed(segments.front().part->task->model->version, rows, seconds, info,
                        status.ok());
    report(rows);
    for (const Segment& s : segments) s.part->done += s.rows;
    if (!status.ok()) {
      GROVE_LOG(WARNING) << "engine call failed" << KV("model", parts.front().task->model->name)
                         << KV("operation", OperationName(parts.front().task->op))
                         << KV("rows", rows) << KV("error", status.message());
    }
    for (Part& p : parts) {
      if (!p.open) continue;
      if (status.ok() && p.done < p.task->rows.rows) continue;
      p.open = false;
      report(p.task->rows.rows - p.done);
      if (status.ok()) {
        LearnFrom(*p.task, clock_->Now());
        observer_->Delivered(p.task->rows.rows);
      } else {
        observer_->Failed(p.task->rows.rows);
      }
      answers->push_back(Answer{p.task->call, status});
    }
  }
  return reported;
}

}  // namespace grove::serving
