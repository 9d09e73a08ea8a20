#include "server/runtime.h"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/log.h"
#include "core/explain/explain.h"

namespace grove::server {
namespace {

DropReason ReasonFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kCancelled: return DropReason::kCancelled;
    case absl::StatusCode::kDeadlineExceeded: return DropReason::kDeadline;
    case absl::StatusCode::kResourceExhausted: return DropReason::kQueueFull;
    default: return DropReason::kShutdown;
  }
}

// Runs the engine of `op` on `rows` into `out`.
absl::Status RunEngine(const ComputeTask& t, RowsView rows, MatrixView<float> out, RunInfo* info) {
  if (t.op == Operation::kPredict) {
    PredictOptions o;
    o.kind = t.kind;
    o.iteration_begin = t.iteration_begin;
    o.iteration_end = t.iteration_end;
    return t.model->predict->Predict(rows, o, out, info);
  }
  if (t.model->explain == nullptr) {
    return t.model->explain_status.ok()
               ? absl::FailedPreconditionError("the model has no explanation engine")
               : t.model->explain_status;
  }
  ExplainOptions o;
  o.interactions = t.op == Operation::kInteractions;
  o.iteration_begin = t.iteration_begin;
  o.iteration_end = t.iteration_end;
  return t.model->explain->Explain(rows, o, out, info);
}

}  // namespace

Runtime::Runtime(RuntimeOptions options, Metrics* metrics)
    : options_(std::move(options)),
      metrics_(metrics),
      clock_(options_.clock != nullptr ? options_.clock : batching::RealClock::Get()) {
  strict_readiness_ = options_.strict_readiness;
  pool_ = std::make_unique<ThreadPool>(options_.compute_threads);
  executor_ = std::make_unique<batching::BatchExecutor>(
      options_.batch_threads > 0 ? options_.batch_threads : 2, clock_);
  control_thread_ = std::thread([this] { ControlLoop(); });
}

Runtime::~Runtime() {
  Shutdown();
  // The registry's listener is this object: stop the watcher before members go away.
  if (registry_ != nullptr) registry_->StopWatching();
}

absl::Status Runtime::Init() {
  PredictEngineOptions p;
  p.use_gpu = options_.use_gpu;
  p.calibration_cache_dir = options_.calibration_cache_dir;
  ExplainEngineOptions e;
  e.use_gpu = options_.use_gpu;
  registry::RegistryOptions r;
  r.repository = options_.model_repository;
  r.default_config = options_.default_config;
  r.engine_factory = registry::DefaultEngineFactory(p, e, pool_.get());
  r.listener = this;
  absl::StatusOr<std::unique_ptr<registry::ModelRegistry>> created =
      registry::ModelRegistry::Create(std::move(r));
  if (!created.ok()) return created.status();
  registry_ = std::move(*created);
  return absl::OkStatus();
}

Runtime::ModelQueues* Runtime::QueuesFor(const std::string& model,
                                          const registry::ModelConfig& config) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<ModelQueues>& slot = queues_[model];
  if (slot != nullptr) return slot.get();
  slot = std::make_unique<ModelQueues>();
  slot->metrics = metrics_->Model(model);
  for (int i = 0; i < kNumOperations; ++i) {
    const Operation op = static_cast<Operation>(i);
    Metrics::ModelMetrics* m = slot->metrics;
    auto queue = std::make_shared<Queue>(
        config.Batching(op), clock_, executor_.get(),
        [this, m, op](batching::Batch<ComputeTask>&& batch) { Process(m, op, std::move(batch)); },
        [this, m, op](batching::Dropped<ComputeTask>&& d) { Drop(m, op, std::move(d)); });
    if (draining_.load()) queue->Flush();
    if (stopped_.load()) queue->Close();
    executor_->Add(queue);
    slot->queues[i] = std::move(queue);
  }
  return slot.get();
}

void Runtime::UpdateQueueGauges(Metrics::OpMetrics& m, const Queue& queue) {
  const auto stats = queue.batcher().stats();
  m.queue_requests->Set(static_cast<double>(stats.queued_tasks));
  m.queue_rows->Set(static_cast<double>(stats.queued_rows));
}

absl::Status Runtime::Submit(std::unique_ptr<ComputeTask> task) {
  if (stopped_.load()) return absl::UnavailableError("the server is shutting down");
  ModelQueues* q = QueuesFor(task->model->name, *task->model->config);
  const int op = static_cast<int>(task->op);
  Metrics::OpMetrics& m = q->metrics->ops[op];
  Queue& queue = *q->queues[op];
  const int64_t rows = task->rows.rows;
  absl::Status status = queue.Schedule(task);
  if (!status.ok()) {
    const int reason = static_cast<int>(ReasonFor(status));
    m.dropped_tasks[reason]->Increment();
    m.dropped_rows[reason]->Increment(static_cast<double>(rows));
    return status;
  }
  m.inflight_rows->Increment(static_cast<double>(rows));
  UpdateQueueGauges(m, queue);
  return absl::OkStatus();
}

void Runtime::Process(Metrics::ModelMetrics* mm, Operation op,
                      batching::Batch<ComputeTask>&& batch) {
  Metrics::OpMetrics& m = mm->op(op);
  const absl::Time start = clock_->Now();
  for (const absl::Time& t : batch.enqueue_times) {
    m.queue_wait->Observe(std::max(0.0, absl::ToDoubleSeconds(start - t)));
  }
  m.batch_rows->Observe(static_cast<double>(batch.rows));
  m.batch_tasks->Observe(static_cast<double>(batch.tasks.size()));
  {
    absl::MutexLock lock(&mu_);
    auto it = queues_.find(mm->name);
    if (it != queues_.end()) UpdateQueueGauges(m, *it->second->queues[static_cast<int>(op)]);
  }

  // Tasks of calls that were cancelled or failed meanwhile (another part of the same call was
  // refused) are answered without compute.
  std::vector<size_t> live;
  for (size_t i = 0; i < batch.tasks.size(); ++i) {
    ComputeTask& t = *batch.tasks[i];
    if (!t.cancelled()) {
      live.push_back(i);
      continue;
    }
    const double rows = static_cast<double>(t.rows.rows);
    m.dropped_tasks[static_cast<int>(DropReason::kCancelled)]->Increment();
    m.dropped_rows[static_cast<int>(DropReason::kCancelled)]->Increment(rows);
    m.inflight_rows->Decrement(rows);
    t.call->TaskDone(absl::CancelledError("the call was cancelled"));
  }

  // Tasks that can share one engine call: same model copy, output kind and iteration range.
  std::vector<std::vector<size_t>> groups;
  {
    std::vector<size_t> order = live;
    auto key = [&](size_t i) {
      const ComputeTask& t = *batch.tasks[i];
      return std::make_tuple(t.model.get(), static_cast<int>(t.kind), t.iteration_begin,
                             t.iteration_end);
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return key(a) < key(b); });
    for (size_t i = 0; i < order.size(); ++i) {
      if (i == 0 || key(order[i]) != key(order[i - 1])) groups.emplace_back();
      groups.back().push_back(order[i]);
    }
  }

  std::vector<float> in_buffer;
  std::vector<float> out_buffer;
  for (const std::vector<size_t>& group : groups) {
    const ComputeTask& first = *batch.tasks[group.front()];
    RunInfo info;
    absl::Status status;
    int64_t rows = 0;
    const absl::Time t0 = absl::Now();
    if (group.size() == 1) {
      rows = first.rows.rows;
      status = RunEngine(first, first.rows, first.out, &info);
    } else {
      const int64_t cols = first.rows.cols;
      const int64_t width = first.out.cols;
      for (size_t i : group) rows += batch.tasks[i]->rows.rows;
      in_buffer.resize(static_cast<size_t>(rows * cols));
      out_buffer.resize(static_cast<size_t>(rows * width));
      int64_t r = 0;
      for (size_t i : group) {
        const ComputeTask& t = *batch.tasks[i];
        for (int64_t k = 0; k < t.rows.rows; ++k, ++r) {
          std::memcpy(in_buffer.data() + r * cols, t.rows.Row(k), sizeof(float) * cols);
        }
      }
      status = RunEngine(first, MakeRowsView(in_buffer.data(), rows, cols),
                         MakeMatrixView(out_buffer.data(), rows, width), &info);
      if (status.ok()) {
        r = 0;
        for (size_t i : group) {
          const ComputeTask& t = *batch.tasks[i];
          for (int64_t k = 0; k < t.rows.rows; ++k, ++r) {
            std::memcpy(t.out.Row(k), out_buffer.data() + r * width, sizeof(float) * width);
          }
        }
      }
    }
    const double seconds =
        info.compute_seconds > 0 ? info.compute_seconds : absl::ToDoubleSeconds(absl::Now() - t0);
    m.compute->Observe(seconds);
    metrics_->CountBatch(mm->name, op, info.device.empty() ? "cpu" : info.device,
                         info.strategy.empty() ? "unknown" : info.strategy);
    if (status.ok()) {
      m.rows->Increment(static_cast<double>(rows));
    } else {
      GROVE_LOG(WARNING) << "batch failed" << KV("model", mm->name)
                         << KV("operation", OperationName(op)) << KV("rows", rows)
                         << KV("error", status.message());
    }
    for (size_t i : group) {
      ComputeTask& t = *batch.tasks[i];
      m.inflight_rows->Decrement(static_cast<double>(t.rows.rows));
      t.call->TaskDone(status);
    }
  }
}

void Runtime::Drop(Metrics::ModelMetrics* mm, Operation op,
                   batching::Dropped<ComputeTask>&& dropped) {
  Metrics::OpMetrics& m = mm->op(op);
  const int reason = static_cast<int>(ReasonFor(dropped.status));
  const double rows = static_cast<double>(dropped.task->rows.rows);
  m.dropped_tasks[reason]->Increment();
  m.dropped_rows[reason]->Increment(rows);
  m.inflight_rows->Decrement(rows);
  {
    absl::MutexLock lock(&mu_);
    auto it = queues_.find(mm->name);
    if (it != queues_.end()) UpdateQueueGauges(m, *it->second->queues[static_cast<int>(op)]);
  }
  dropped.task->call->TaskDone(dropped.status);
}

void Runtime::RunControl(absl::AnyInvocable<void() &&> fn) {
  {
    absl::MutexLock lock(&control_mu_);
    if (!control_stop_) {
      control_queue_.push_back(std::move(fn));
      return;
    }
  }
  std::move(fn)();
}

void Runtime::ControlLoop() {
  while (true) {
    absl::AnyInvocable<void() &&> fn;
    {
      absl::MutexLock lock(&control_mu_);
      control_mu_.Await(absl::Condition(
          +[](Runtime* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->control_mu_) {
            return r->control_stop_ || !r->control_queue_.empty();
          },
          this));
      if (control_queue_.empty()) return;
      fn = std::move(control_queue_.front());
      control_queue_.pop_front();
    }
    std::move(fn)();
  }
}

void Runtime::set_ready(bool ready) {
  ready_.store(ready);
  UpdateHealth();
}

void Runtime::BeginShutdown() {
  shutting_down_.store(true);
  UpdateHealth();
}

bool Runtime::ServerReady() const {
  if (!ready_.load() || shutting_down_.load()) return false;
  if (strict_readiness_.load() && registry_ != nullptr && !registry_->AllReady()) return false;
  return true;
}

bool Runtime::ModelServing(const std::string& name) const {
  if (shutting_down_.load() || registry_ == nullptr) return false;
  absl::StatusOr<registry::ModelStatus> s = registry_->GetStatus(name);
  return s.ok() && s->ready;
}

void Runtime::SetHealthCallback(std::function<void(const std::string&, bool)> cb) {
  absl::MutexLock lock(&mu_);
  health_cb_ = std::move(cb);
}

void Runtime::UpdateModelHealth(const std::string& name) {
  std::function<void(const std::string&, bool)> cb;
  {
    absl::MutexLock lock(&mu_);
    cb = health_cb_;
  }
  const bool server = ServerReady();
  metrics_->SetServerReady(server);
  if (!cb) return;
  cb(absl::StrCat("model/", name), ModelServing(name));
  cb("", server);
}

void Runtime::UpdateHealth() {
  std::function<void(const std::string&, bool)> cb;
  {
    absl::MutexLock lock(&mu_);
    cb = health_cb_;
  }
  const bool server = ServerReady();
  metrics_->SetServerReady(server);
  if (!cb) return;
  if (registry_ != nullptr) {
    for (const registry::ModelStatus& s : registry_->List()) {
      cb(absl::StrCat("model/", s.name), s.ready && !shutting_down_.load());
    }
  }
  cb("", server);
}

void Runtime::Drain() {
  draining_.store(true);
  absl::MutexLock lock(&mu_);
  for (auto& [name, q] : queues_) {
    for (auto& queue : q->queues) queue->Flush();
  }
}

void Runtime::Shutdown() {
  if (stopped_.exchange(true)) return;
  shutting_down_.store(true);
  if (registry_ != nullptr) registry_->StopWatching();
  std::vector<std::shared_ptr<Queue>> queues;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [name, q] : queues_) {
      for (auto& queue : q->queues) queues.push_back(queue);
    }
  }
  for (auto& q : queues) q->Close();
  // Closed queues hand out their work without waiting for the delay; wait until all of it ran.
  while (true) {
    bool idle = true;
    for (auto& q : queues) idle = idle && q->batcher().Idle();
    if (idle) break;
    absl::SleepFor(absl::Milliseconds(2));
  }
  executor_->Stop();
  for (auto& q : queues) q->DropAll(absl::UnavailableError("the server is shutting down"));
  {
    absl::MutexLock lock(&control_mu_);
    control_stop_ = true;
  }
  if (control_thread_.joinable()) control_thread_.join();
}

absl::Status Runtime::CheckResponseBytes(int64_t bytes, int64_t rows) const {
  const int64_t limit = options_.max_message_bytes;
  if (limit <= 0 || bytes <= limit) return absl::OkStatus();
  const int64_t per_row = std::max<int64_t>(1, bytes / std::max<int64_t>(1, rows));
  return absl::InvalidArgumentError(absl::StrCat(
      "the response would be ", bytes, " bytes, above the message limit of ", limit,
      " bytes (--max_message_bytes); send at most ", std::max<int64_t>(1, limit / per_row),
      " rows per request"));
}

batching::Batcher<ComputeTask>::Stats Runtime::QueueStats(const std::string& model, Operation op) {
  absl::MutexLock lock(&mu_);
  auto it = queues_.find(model);
  if (it == queues_.end()) return {};
  return it->second->queues[static_cast<int>(op)]->batcher().stats();
}

void Runtime::OnVersionReady(const registry::ServablePtr& model) {
  metrics_->VersionReady(*model);
  ModelQueues* q = QueuesFor(model->name, *model->config);
  for (int i = 0; i < kNumOperations; ++i) {
    q->queues[i]->batcher().SetOptions(model->config->Batching(static_cast<Operation>(i)));
  }
}

void Runtime::OnVersionUnloaded(const std::string& name, int64_t version) {
  metrics_->VersionUnloaded(name, version);
}

void Runtime::OnLoadFailed(const std::string& name, int64_t version, const absl::Status& error) {
  metrics_->LoadFailed(name);
}

void Runtime::OnModelChanged(const std::string& name) { UpdateModelHealth(name); }

}  // namespace grove::server
