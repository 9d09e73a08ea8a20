#include "server/metrics.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/registry/device_memory.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "server/convert.h"
#include "server/grpc/status.h"

#ifndef GROVE_VERSION
#define GROVE_VERSION "0.1.0"
#endif

namespace grove::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

class GpuMemoryCollectable final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    const std::vector<registry::DeviceMemory> devices = registry::QueryDeviceMemory();
    if (devices.empty()) return {};
    prometheus::MetricFamily used{"grove_gpu_memory_used_bytes",
                                  "GPU memory in use (total - free) per device.",
                                  prometheus::MetricType::Gauge,
                                  {}};
    prometheus::MetricFamily total{"grove_gpu_memory_total_bytes", "GPU memory capacity per device.",
                                   prometheus::MetricType::Gauge, {}};
    for (const registry::DeviceMemory& d : devices) {
      prometheus::ClientMetric u;
      u.label.push_back({"device", d.device});
      u.gauge.value = static_cast<double>(d.used_bytes);
      used.metric.push_back(u);
      prometheus::ClientMetric t;
      t.label.push_back({"device", d.device});
      t.gauge.value = static_cast<double>(d.total_bytes);
      total.metric.push_back(t);
    }
    return {used, total};
  }
};

class HostBufferCollectable final : public prometheus::Collectable {
 public:
  explicit HostBufferCollectable(const serving::HostBufferPool* pool) : pool_(pool) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    const serving::HostBufferPool::Stats s = pool_->stats();
    prometheus::MetricFamily bytes{
        "grove_host_buffer_bytes",
        "Kept host buffers for large requests' rows and merged batches (--host_buffer_mb): all "
        "kept (state=kept) and held by calls now (state=in_use).",
        prometheus::MetricType::Gauge,
        {}};
    for (const auto& [state, value] : {std::pair<const char*, int64_t>{"kept", s.kept_bytes},
                                       {"in_use", s.in_use_bytes}}) {
      prometheus::ClientMetric m;
      m.label.push_back({"state", state});
      m.gauge.value = static_cast<double>(value);
      bytes.metric.push_back(m);
    }
    prometheus::MetricFamily misses{
        "grove_host_buffer_misses_total",
        "Times the host buffer pool had nothing to give (buffers in use filled --host_buffer_mb, "
        "or page-locking failed): that request or batch took the slower path through its own "
        "memory.",
        prometheus::MetricType::Counter,
        {}};
    prometheus::ClientMetric m;
    m.counter.value = static_cast<double>(s.misses);
    misses.metric.push_back(m);
    prometheus::MetricFamily locked{
        "grove_host_buffer_page_locked",
        "1 when new kept host buffers are page-locked for direct GPU copies, 0 without a GPU or "
        "once page-locking failed (the host's locked-memory limit; groved logs why).",
        prometheus::MetricType::Gauge,
        {}};
    prometheus::ClientMetric l;
    l.gauge.value = s.page_locked ? 1 : 0;
    locked.metric.push_back(l);
    return {bytes, misses, locked};
  }

 private:
  const serving::HostBufferPool* const pool_;
};

}  // namespace


const prometheus::Histogram::BucketBoundaries& Metrics::LatencyBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
      0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
  return *b;
}

const prometheus::Histogram::BucketBoundaries& Metrics::RowBuckets() {
  static const auto* b = [] {
    auto* v = new prometheus::Histogram::BucketBoundaries;
    for (double x = 1; x <= 65536; x *= 2) v->push_back(x);
    return v;
  }();
  return *b;
}

namespace {
const prometheus::Histogram::BucketBoundaries& TaskBuckets() {
  static const auto* b = [] {
    auto* v = new prometheus::Histogram::BucketBoundaries;
    for (double x = 1; x <= 1024; x *= 2) v->push_back(x);
    return v;
  }();
  return *b;
}
}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(BuildCounter()
                    .Name("grove_requests_total")
                    .Help("Finished RPCs by model, method and gRPC status code.")
                    .Register(*registry_)),
      request_duration_(BuildHistogram()
                            .Name("grove_request_duration_seconds")
                            .Help("End-to-end latency of successful calls in the server.")
                            .Register(*registry_)),
      request_rows_(BuildHistogram()
                        .Name("grove_request_rows")
                        .Help("Rows per request (per message for streams).")
                        .Register(*registry_)),
      inflight_requests_(BuildGauge()
                             .Name("grove_inflight_requests")
                             .Help("RPCs accepted and not yet finished.")
                             .Register(*registry_)),
      queue_wait_(BuildHistogram()
                      .Name("grove_queue_wait_seconds")
                      .Help("Time a task waited in its batching queue.")
                      .Register(*registry_)),
      compute_(BuildHistogram()
                   .Name("grove_compute_duration_seconds")
                   .Help("Engine time of one batch.")
                   .Register(*registry_)),
      batch_rows_(BuildHistogram()
                      .Name("grove_batch_size_rows")
                      .Help("Rows per executed batch.")
                      .Register(*registry_)),
      batch_tasks_(BuildHistogram()
                       .Name("grove_batch_tasks")
                       .Help("Tasks merged into one batch.")
                       .Register(*registry_)),
      batches_(BuildCounter()
                   .Name("grove_batches_total")
                   .Help("Executed batches by the device and strategy the engine chose.")
                   .Register(*registry_)),
      rows_(BuildCounter()
                .Name("grove_rows_total")
                .Help("Rows computed successfully.")
                .Register(*registry_)),
      queue_requests_(BuildGauge()
                          .Name("grove_queue_depth_requests")
                          .Help("Tasks waiting in the batching queue.")
                          .Register(*registry_)),
      queue_rows_(BuildGauge()
                      .Name("grove_queue_depth_rows")
                      .Help("Rows waiting in the batching queue.")
                      .Register(*registry_)),
      inflight_rows_(BuildGauge()
                         .Name("grove_inflight_rows")
                         .Help("Rows accepted and not yet answered (queued plus computing).")
                         .Register(*registry_)),
      dropped_tasks_(BuildCounter()
                         .Name("grove_dropped_tasks_total")
                         .Help("Tasks not delivered (refused, dropped or abandoned), by reason.")
                         .Register(*registry_)),
      dropped_rows_(BuildCounter()
                        .Name("grove_dropped_rows_total")
                        .Help("Rows of tasks not delivered, by reason.")
                        .Register(*registry_)),
      delivered_tasks_(BuildCounter()
                           .Name("grove_delivered_tasks_total")
                           .Help("Tasks whose results were handed back to a waiting caller.")
                           .Register(*registry_)),
      delivered_rows_(BuildCounter()
                          .Name("grove_delivered_rows_total")
                          .Help("Rows of delivered tasks.")
                          .Register(*registry_)),
      wasted_rows_(BuildCounter()
                       .Name("grove_wasted_rows_total")
                       .Help("Rows computed for callers that had gone (cancelled or expired).")
                       .Register(*registry_)),
      residual_rows_(BuildCounter()
                         .Name("grove_explain_residual_rows_total")
                         .Help("Explained rows whose additivity residual was computed.")
                         .Register(*registry_)),
      residual_exceeded_rows_(
          BuildCounter()
              .Name("grove_explain_residual_exceeded_rows_total")
              .Help("Explained rows whose additivity residual exceeded 1e-5 x max(1, |output|).")
              .Register(*registry_)),
      model_ready_(BuildGauge()
                       .Name("grove_model_ready")
                       .Help("1 while the model version is loaded and serving.")
                       .Register(*registry_)),
      model_loads_(BuildCounter()
                       .Name("grove_model_loads_total")
                       .Help("Model load attempts by result.")
                       .Register(*registry_)),
      model_load_duration_(BuildGauge()
                               .Name("grove_model_load_duration_seconds")
                               .Help("Wall time of the last successful load of the version.")
                               .Register(*registry_)),
      model_bytes_(BuildGauge()
                       .Name("grove_model_bytes")
                       .Help("Bytes resident for a loaded model version, by device.")
                       .Register(*registry_)),
      model_info_(BuildGauge()
                      .Name("grove_model_info")
                      .Help("Descriptive labels of a loaded model version (always 1).")
                      .Register(*registry_)),
      server_ready_(BuildGauge()
                        .Name("grove_server_ready")
                        .Help("1 when the server reports ready, 0 while starting or draining.")
                        .Register(*registry_)),
      build_info_(BuildGauge()
                      .Name("grove_build_info")
                      .Help("Build of groved (always 1).")
                      .Register(*registry_)) {
#if defined(GROVE_HAVE_CUDA)
  const char* cuda = "true";
#else
  const char* cuda = "false";
#endif
  build_info_.Add({{"version", GROVE_VERSION}, {"cuda", cuda}}).Set(1);
  server_ready_.Add({}).Set(0);
}

Metrics::ModelMetrics* Metrics::Model(absl::string_view model) {
  return models_.FindOrCreate(model, [&] {
    auto m = std::make_unique<ModelMetrics>();
    m->name = std::string(model);
    for (int i = 0; i < kNumOperations; ++i) {
      const prometheus::Labels labels{{"model", m->name},
                                      {"operation", OperationName(static_cast<Operation>(i))}};
      OpMetrics& o = m->ops[i];
      o.queue_wait = &queue_wait_.Add(labels, LatencyBuckets());
      o.compute = &compute_.Add(labels, LatencyBuckets());
      o.batch_rows = &batch_rows_.Add(labels, RowBuckets());
      o.batch_tasks = &batch_tasks_.Add(labels, TaskBuckets());
      o.request_rows = &request_rows_.Add(labels, RowBuckets());
      o.rows = &rows_.Add(labels);
      o.queue_requests = &queue_requests_.Add(labels);
      o.queue_rows = &queue_rows_.Add(labels);
      o.inflight_rows = &inflight_rows_.Add(labels);
      o.delivered_tasks = &delivered_tasks_.Add(labels);
      o.delivered_rows = &delivered_rows_.Add(labels);
      o.wasted_rows = &wasted_rows_.Add(labels);
      o.residual_rows = &residual_rows_.Add(labels);
      o.residual_exceeded_rows = &residual_exceeded_rows_.Add(labels);
      for (int r = 0; r < kNumDropReasons; ++r) {
        prometheus::Labels l = labels;
        l["reason"] = serving::DropReasonName(static_cast<DropReason>(r));
        o.dropped_tasks[r] = &dropped_tasks_.Add(l);
        o.dropped_rows[r] = &dropped_rows_.Add(l);
      }
    }
    return m;
  });
}

Metrics::LabelSeries* Metrics::Label(absl::string_view model) {
  return labels_.FindOrCreate(model, [] { return std::make_unique<LabelSeries>(); });
}

Metrics::CallSeries* Metrics::Calls(absl::string_view model, absl::string_view method) {
  return Label(model)->methods.FindOrCreate(method, [] { return std::make_unique<CallSeries>(); });
}

// A series missing from the cache is created through its family (which returns the existing one
// when two threads race to create it), then cached; later calls only load the pointer.
prometheus::Histogram& Metrics::Duration(CallSeries* calls, absl::string_view model,
                                         absl::string_view method, Operation op) {
  std::atomic<prometheus::Histogram*>& slot = calls->duration[static_cast<int>(op)];
  prometheus::Histogram* h = slot.load(std::memory_order_acquire);
  if (h == nullptr) {
    h = &request_duration_.Add({{"model", std::string(model)},
                                {"method", std::string(method)},
                                {"operation", OperationName(op)}},
                               LatencyBuckets());
    slot.store(h, std::memory_order_release);
  }
  return *h;
}

void Metrics::RecordRequest(absl::string_view model, absl::string_view method,
                            absl::StatusCode code, double seconds, Operation op) {
  CallSeries* calls = Calls(model, method);
  const int index = static_cast<int>(code);
  prometheus::Counter* counter = nullptr;
  if (index >= 0 && index < kNumCodes) {
    std::atomic<prometheus::Counter*>& slot = calls->requests[index];
    counter = slot.load(std::memory_order_acquire);
    if (counter == nullptr) {
      counter = &requests_.Add({{"model", std::string(model)},
                                {"method", std::string(method)},
                                {"code", CodeName(code)}});
      slot.store(counter, std::memory_order_release);
    }
  } else {
    counter = &requests_.Add(
        {{"model", std::string(model)}, {"method", std::string(method)}, {"code", CodeName(code)}});
  }
  counter->Increment();
  if (seconds >= 0) Duration(calls, model, method, op).Observe(seconds);
}

void Metrics::RecordRequestLatency(absl::string_view model, absl::string_view method,
                                   double seconds, Operation op) {
  Duration(Calls(model, method), model, method, op).Observe(seconds);
}

prometheus::Gauge* Metrics::InflightGauge(absl::string_view method) {
  return *inflight_.FindOrCreate(method, [&] {
    return std::make_unique<prometheus::Gauge*>(
        &inflight_requests_.Add({{"method", std::string(method)}}));
  });
}

namespace {

// atomic<double>::fetch_add, relaxed: each counter is read on its own.
void AddSeconds(std::atomic<double>& sum, double seconds) {
  sum.fetch_add(seconds, std::memory_order_relaxed);
}

}  // namespace

void Metrics::VersionCounters::Inference(bool ok, double seconds, int64_t rows, int64_t now_ms) {
  if (ok) {
    success_.fetch_add(1, std::memory_order_relaxed);
    AddSeconds(success_seconds_, seconds);
    inferences_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(rows, 0)),
                          std::memory_order_relaxed);
  } else {
    fail_.fetch_add(1, std::memory_order_relaxed);
    AddSeconds(fail_seconds_, seconds);
  }
  int64_t last = last_inference_ms_.load(std::memory_order_relaxed);
  while (last < now_ms &&
         !last_inference_ms_.compare_exchange_weak(last, now_ms, std::memory_order_relaxed)) {
  }
}

void Metrics::VersionCounters::QueueWait(double seconds) {
  queued_.fetch_add(1, std::memory_order_relaxed);
  AddSeconds(queue_seconds_, seconds);
}

void Metrics::VersionCounters::Execution(double seconds) {
  executions_.fetch_add(1, std::memory_order_relaxed);
  AddSeconds(compute_seconds_, seconds);
}

Metrics::VersionStatistics Metrics::VersionCounters::Read() const {
  VersionStatistics s;
  s.success = success_.load(std::memory_order_relaxed);
  s.success_seconds = success_seconds_.load(std::memory_order_relaxed);
  s.fail = fail_.load(std::memory_order_relaxed);
  s.fail_seconds = fail_seconds_.load(std::memory_order_relaxed);
  s.inferences = inferences_.load(std::memory_order_relaxed);
  s.queued = queued_.load(std::memory_order_relaxed);
  s.queue_seconds = queue_seconds_.load(std::memory_order_relaxed);
  s.executions = executions_.load(std::memory_order_relaxed);
  s.compute_seconds = compute_seconds_.load(std::memory_order_relaxed);
  s.last_inference_ms = last_inference_ms_.load(std::memory_order_relaxed);
  return s;
}

Metrics::VersionCounters* Metrics::Counters(absl::string_view model, int64_t version) {
  return Label(model)->versions.FindOrCreate(
      version, [] { return std::make_unique<VersionCounters>(); });
}

void Metrics::RecordInference(absl::string_view model, int64_t version, bool ok, double seconds,
                              int64_t rows) {
  Counters(model, version)->Inference(ok, seconds, rows, absl::ToUnixMillis(absl::Now()));
}

void Metrics::RecordQueueWait(absl::string_view model, int64_t version, double seconds) {
  Counters(model, version)->QueueWait(seconds);
}

void Metrics::RecordExecution(absl::string_view model, int64_t version, double seconds,
                              bool ok) {
  if (!ok) return;  // Triton counts successful executions only
  Counters(model, version)->Execution(seconds);
}

Metrics::VersionStatistics Metrics::Statistics(const std::string& model, int64_t version) const {
  LabelSeries* label = labels_.Find(model);
  VersionCounters* counters = label != nullptr ? label->versions.Find(version) : nullptr;
  return counters != nullptr ? counters->Read() : VersionStatistics{};
}

void Metrics::CountBatch(ModelMetrics* model, Operation op, absl::string_view device,
                         absl::string_view strategy) {
  OpMetrics& m = model->op(op);
  auto* by_strategy = m.batches.FindOrCreate(device, [] {
    return std::make_unique<SnapshotMap<std::string, prometheus::Counter*>>();
  });
  prometheus::Counter* counter = *by_strategy->FindOrCreate(strategy, [&] {
    return std::make_unique<prometheus::Counter*>(&batches_.Add({{"model", model->name},
                                                                 {"operation", OperationName(op)},
                                                                 {"device", std::string(device)},
                                                                 {"strategy", std::string(strategy)}}));
  });
  counter->Increment();
}

prometheus::Gauge& Metrics::VersionGauge(prometheus::Family<prometheus::Gauge>& family,
                                         const std::string& model, int64_t version,
                                         const prometheus::Labels& extra) {
  prometheus::Labels labels{{"model", model}, {"version", std::to_string(version)}};
  for (const auto& [k, v] : extra) labels[k] = v;
  return family.Add(labels);
}

void Metrics::VersionReady(const registry::ModelVersion& m) {
  Model(m.name);  // the request series exist from the first load
  VersionGauge(model_ready_, m.name, m.version).Set(1);
  VersionGauge(model_load_duration_, m.name, m.version).Set(m.load_seconds);
  VersionGauge(model_bytes_, m.name, m.version, {{"device", "host"}})
      .Set(static_cast<double>(m.forest().MemoryBytes()));
  const int64_t gpu_bytes = m.servable->DeviceBytes();
  VersionGauge(model_bytes_, m.name, m.version, {{"device", "gpu"}})
      .Set(static_cast<double>(gpu_bytes));
  model_loads_.Add({{"model", m.name}, {"result", "success"}}).Increment();
  prometheus::Gauge& info = VersionGauge(
      model_info_, m.name, m.version,
      {{"format", FormatLabel(m.forest().format)},
       {"objective", m.forest().objective.name},
       {"predict_engine", m.servable->Describe(Operation::kPredict)},
       {"explain_engine", m.servable->Available(Operation::kExplain).ok()
                              ? m.servable->Describe(Operation::kExplain)
                              : "none"}});
  info.Set(1);
  absl::MutexLock lock(&mu_);
  prometheus::Gauge*& current = info_series_[absl::StrCat(m.name, "\n", m.version)];
  if (current != nullptr && current != &info) model_info_.Remove(current);
  current = &info;
}

void Metrics::VersionUnloaded(const std::string& model, int64_t version) {
  VersionGauge(model_ready_, model, version).Set(0);
  VersionGauge(model_bytes_, model, version, {{"device", "host"}}).Set(0);
  VersionGauge(model_bytes_, model, version, {{"device", "gpu"}}).Set(0);
  absl::MutexLock lock(&mu_);
  auto it = info_series_.find(absl::StrCat(model, "\n", version));
  if (it != info_series_.end()) {
    model_info_.Remove(it->second);
    info_series_.erase(it);
  }
}

void Metrics::LoadFailed(const std::string& model) {
  model_loads_.Add({{"model", model}, {"result", "failure"}}).Increment();
}

void Metrics::SetServerReady(bool ready) { server_ready_.Add({}).Set(ready ? 1 : 0); }

namespace {

class MetricsQueueObserver final : public serving::QueueObserver {
 public:
  MetricsQueueObserver(Metrics* metrics, Metrics::ModelMetrics* model, Operation op)
      : metrics_(metrics), model_(model), op_(op), m_(model->op(op)) {}

  void Admitted(int64_t rows) override { m_.inflight_rows->Increment(Rows(rows)); }
  void Refused(DropReason reason, int64_t rows) override { Count(reason, rows); }
  void Dropped(DropReason reason, int64_t rows, int64_t computed_rows) override {
    Count(reason, rows);
    m_.inflight_rows->Decrement(Rows(rows));
    if (computed_rows > 0) m_.wasted_rows->Increment(Rows(computed_rows));
  }
  void Delivered(int64_t rows) override {
    m_.delivered_tasks->Increment();
    m_.delivered_rows->Increment(Rows(rows));
    m_.inflight_rows->Decrement(Rows(rows));
  }
  void Failed(int64_t rows) override { m_.inflight_rows->Decrement(Rows(rows)); }
  void BatchStarted(int64_t rows, int64_t tasks) override {
    m_.batch_rows->Observe(Rows(rows));
    m_.batch_tasks->Observe(static_cast<double>(tasks));
  }
  void QueueWait(int64_t version, absl::Duration wait) override {
    const double seconds = std::max(0.0, absl::ToDoubleSeconds(wait));
    m_.queue_wait->Observe(seconds);
    metrics_->RecordQueueWait(model_->name, version, seconds);
  }
  void Computed(int64_t version, int64_t rows, double seconds, const RunInfo& info,
                bool ok) override {
    m_.compute->Observe(seconds);
    metrics_->RecordExecution(model_->name, version, seconds, ok);
    metrics_->CountBatch(model_, op_,
                         info.device.empty() ? absl::string_view("cpu") : info.device,
                         info.strategy.empty() ? absl::string_view("unknown") : info.strategy);
    if (ok) m_.rows->Increment(Rows(rows));
  }
  void QueueDepth(int64_t tasks, int64_t rows) override {
    m_.queue_requests->Set(static_cast<double>(tasks));
    m_.queue_rows->Set(Rows(rows));
  }

 private:
  static double Rows(int64_t rows) { return static_cast<double>(rows); }
  void Count(DropReason reason, int64_t rows) {
    const int r = static_cast<int>(reason);
    m_.dropped_tasks[r]->Increment();
    m_.dropped_rows[r]->Increment(Rows(rows));
  }

  Metrics* const metrics_;
  Metrics::ModelMetrics* const model_;
  const Operation op_;
  Metrics::OpMetrics& m_;
};

}  // namespace

std::unique_ptr<serving::QueueObserver> MetricsObserver::ForQueue(const std::string& model,
                                                                  Operation op) {
  return std::make_unique<MetricsQueueObserver>(metrics_, metrics_->Model(model), op);
}

std::shared_ptr<prometheus::Collectable> MakeGpuMemoryCollectable() {
  return std::make_shared<GpuMemoryCollectable>();
}

std::shared_ptr<prometheus::Collectable> MakeHostBufferCollectable(
    const serving::HostBufferPool* pool) {
  return std::make_shared<HostBufferCollectable>(pool);
}

}  // namespace grove::server
