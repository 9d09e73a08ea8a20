#include "server/metrics.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/registry/device_memory.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

#ifndef GROVE_VERSION
#define GROVE_VERSION "0.1.0"
#endif

namespace grove::server {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

const char* FormatLabel(ModelFormat f) {
  switch (f) {
    case ModelFormat::kXgboostJson: return "xgboost_json";
    case ModelFormat::kXgboostUbjson: return "xgboost_ubjson";
    case ModelFormat::kLightgbmText: return "lightgbm_text";
  }
  return "unknown";
}

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

Metrics::ModelMetrics* Metrics::Model(const std::string& model) {
  absl::MutexLock lock(&mu_);
  auto& slot = models_[model];
  if (slot != nullptr) return slot.get();
  slot = std::make_unique<ModelMetrics>();
  slot->name = model;
  for (int i = 0; i < kNumOperations; ++i) {
    const prometheus::Labels labels{{"model", model},
                                    {"operation", OperationName(static_cast<Operation>(i))}};
    OpMetrics& m = slot->ops[i];
    m.queue_wait = &queue_wait_.Add(labels, LatencyBuckets());
    m.compute = &compute_.Add(labels, LatencyBuckets());
    m.batch_rows = &batch_rows_.Add(labels, RowBuckets());
    m.batch_tasks = &batch_tasks_.Add(labels, TaskBuckets());
    m.request_rows = &request_rows_.Add(labels, RowBuckets());
    m.rows = &rows_.Add(labels);
    m.queue_requests = &queue_requests_.Add(labels);
    m.queue_rows = &queue_rows_.Add(labels);
    m.inflight_rows = &inflight_rows_.Add(labels);
    m.delivered_tasks = &delivered_tasks_.Add(labels);
    m.delivered_rows = &delivered_rows_.Add(labels);
    m.wasted_rows = &wasted_rows_.Add(labels);
    for (int r = 0; r < kNumDropReasons; ++r) {
      prometheus::Labels l = labels;
      l["reason"] = serving::DropReasonName(static_cast<DropReason>(r));
      m.dropped_tasks[r] = &dropped_tasks_.Add(l);
      m.dropped_rows[r] = &dropped_rows_.Add(l);
    }
  }
  return slot.get();
}

void Metrics::RecordRequest(const std::string& model, absl::string_view method,
                            absl::string_view code, double seconds, Operation op) {
  requests_.Add({{"model", model}, {"method", std::string(method)}, {"code", std::string(code)}})
      .Increment();
  if (seconds >= 0) {
    request_duration_
        .Add({{"model", model}, {"method", std::string(method)}, {"operation", OperationName(op)}},
             LatencyBuckets())
        .Observe(seconds);
  }
}

void Metrics::RecordRequestLatency(const std::string& model, absl::string_view method,
                                   double seconds, Operation op) {
  request_duration_
      .Add({{"model", model}, {"method", std::string(method)}, {"operation", OperationName(op)}},
           LatencyBuckets())
      .Observe(seconds);
}

void Metrics::RecordInference(const std::string& model, int64_t version, bool ok, double seconds,
                              int64_t rows) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  absl::MutexLock lock(&statistics_mu_);
  VersionStatistics& s = statistics_[{model, version}];
  if (ok) {
    ++s.success;
    s.success_seconds += seconds;
    s.inferences += static_cast<uint64_t>(std::max<int64_t>(rows, 0));
  } else {
    ++s.fail;
    s.fail_seconds += seconds;
  }
  s.last_inference_ms = std::max(s.last_inference_ms, now_ms);
}

void Metrics::RecordQueueWait(const std::string& model, int64_t version, double seconds) {
  absl::MutexLock lock(&statistics_mu_);
  VersionStatistics& s = statistics_[{model, version}];
  ++s.queued;
  s.queue_seconds += seconds;
}

void Metrics::RecordExecution(const std::string& model, int64_t version, double seconds,
                              bool ok) {
  if (!ok) return;  // Triton counts successful executions only
  absl::MutexLock lock(&statistics_mu_);
  VersionStatistics& s = statistics_[{model, version}];
  ++s.executions;
  s.compute_seconds += seconds;
}

Metrics::VersionStatistics Metrics::Statistics(const std::string& model, int64_t version) const {
  absl::MutexLock lock(&statistics_mu_);
  auto it = statistics_.find(std::make_pair(model, version));
  return it != statistics_.end() ? it->second : VersionStatistics{};
}

void Metrics::InflightRequests(absl::string_view method, double delta) {
  inflight_requests_.Add({{"method", std::string(method)}}).Increment(delta);
}

void Metrics::CountBatch(const std::string& model, Operation op, const std::string& device,
                         const std::string& strategy) {
  batches_
      .Add({{"model", model},
            {"operation", OperationName(op)},
            {"device", device},
            {"strategy", strategy}})
      .Increment();
}

prometheus::Gauge& Metrics::VersionGauge(prometheus::Family<prometheus::Gauge>& family,
                                         const std::string& model, int64_t version,
                                         const prometheus::Labels& extra) {
  prometheus::Labels labels{{"model", model}, {"version", std::to_string(version)}};
  for (const auto& [k, v] : extra) labels[k] = v;
  return family.Add(labels);
}

void Metrics::VersionReady(const registry::ServableModel& m) {
  Model(m.name);  // the request series exist from the first load
  VersionGauge(model_ready_, m.name, m.version).Set(1);
  VersionGauge(model_load_duration_, m.name, m.version).Set(m.load_seconds);
  VersionGauge(model_bytes_, m.name, m.version, {{"device", "host"}})
      .Set(static_cast<double>(m.forest->MemoryBytes()));
  const int64_t gpu_bytes =
      m.predict->DeviceBytes() + (m.explain != nullptr ? m.explain->DeviceBytes() : 0);
  VersionGauge(model_bytes_, m.name, m.version, {{"device", "gpu"}})
      .Set(static_cast<double>(gpu_bytes));
  model_loads_.Add({{"model", m.name}, {"result", "success"}}).Increment();
  prometheus::Gauge& info = VersionGauge(
      model_info_, m.name, m.version,
      {{"format", FormatLabel(m.forest->format)},
       {"objective", m.forest->objective.name},
       {"predict_engine", m.predict->Describe()},
       {"explain_engine", m.explain != nullptr ? m.explain->Describe() : "none"}});
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
    metrics_->CountBatch(model_->name, op_, info.device.empty() ? "cpu" : info.device,
                         info.strategy.empty() ? "unknown" : info.strategy);
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

}  // namespace grove::server
