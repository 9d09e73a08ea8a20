// Prometheus metrics of groved, exactly as documented in docs/metrics.md.
//
// Handles for every series are created on first use and cached for the life of the process, in
// maps searched without a lock (SnapshotMap), so that the request path costs a few hash lookups and
// atomic increments: no mutex and no prometheus-cpp family lookup (whose label maps are built,
// hashed and searched under the family's mutex) once a series exists. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/common/snapshot_map.h"
#include "core/registry/model_config.h"
#include "core/registry/model_registry.h"
#include "core/serving/host_buffers.h"
#include "core/serving/observer.h"
#include "core/serving/outcome.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace grove::server {



using serving::DropReason;
using serving::kNumDropReasons;

// The `model` label of calls naming a model the server does not know.
inline constexpr const char* kUnknownModelLabel = "_unknown";

class Metrics {
 public:
  struct OpMetrics {
    prometheus::Histogram* queue_wait = nullptr;
    prometheus::Histogram* compute = nullptr;
    prometheus::Histogram* batch_rows = nullptr;
    prometheus::Histogram* batch_tasks = nullptr;
    prometheus::Histogram* request_rows = nullptr;
    prometheus::Counter* rows = nullptr;
    prometheus::Gauge* queue_requests = nullptr;
    prometheus::Gauge* queue_rows = nullptr;
    prometheus::Gauge* inflight_rows = nullptr;
    prometheus::Counter* delivered_tasks = nullptr;
    prometheus::Counter* delivered_rows = nullptr;
    prometheus::Counter* wasted_rows = nullptr;
    // Explained rows whose additivity residual was asked for (ExplainRequest.residuals), and
    // those whose residual exceeded kResidualBound x max(1, |output|) in some output.
    prometheus::Counter* residual_rows = nullptr;
    prometheus::Counter* residual_exceeded_rows = nullptr;
    std::array<prometheus::Counter*, kNumDropReasons> dropped_tasks{};
    std::array<prometheus::Counter*, kNumDropReasons> dropped_rows{};
    // grove_batches_total by device, then strategy (CountBatch).
    SnapshotMap<std::string, SnapshotMap<std::string, prometheus::Counter*>> batches;
  };
  struct ModelMetrics {
    std::string name;
    std::array<OpMetrics, kNumOperations> ops;
    OpMetrics& op(Operation o) { return ops[static_cast<int>(o)]; }
  };

  Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // The cached handles of `model` (created on first use; never freed).
  ModelMetrics* Model(absl::string_view model);
  // grove_batches_total of one engine call of `model`'s `op` queue on `device` with `strategy`.
  void CountBatch(ModelMetrics* model, Operation op, absl::string_view device,
                  absl::string_view strategy);

  // A finished RPC. `seconds` < 0: not observed in the latency histogram.
  void RecordRequest(absl::string_view model, absl::string_view method, absl::StatusCode code,
                     double seconds, Operation op);
  // grove_request_duration_seconds only (one message of a stream).
  void RecordRequestLatency(absl::string_view model, absl::string_view method, double seconds,
                            Operation op);
  // grove_inflight_requests of `method` (cached: a call keeps it from start to end).
  prometheus::Gauge* InflightGauge(absl::string_view method);
  void InflightRequests(absl::string_view method, double delta) {
    InflightGauge(method)->Increment(delta);
  }

  // Model state (from the registry listener).
  void VersionReady(const registry::ModelVersion& model);
  void VersionUnloaded(const std::string& model, int64_t version);
  void LoadFailed(const std::string& model);
  void SetServerReady(bool ready);

  // Triton's ModelStatistics, per model version (the Prometheus series carry no version label, and
  // a model's versions share its queues and series): inference calls (Predict, Explain, each
  // ExplainStream message, ModelInfer over gRPC or REST) that resolved the version, by outcome,
  // with their latency in the server and, for successful ones, their rows; each of its tasks'
  // queue wait; each of its engine calls' time. Counted since the process started, across reloads
  // of the version.
  struct VersionStatistics {
    uint64_t success = 0;
    double success_seconds = 0;
    uint64_t fail = 0;
    double fail_seconds = 0;
    uint64_t inferences = 0;  // rows of successful calls
    uint64_t queued = 0;      // tasks that waited in a queue
    double queue_seconds = 0;
    uint64_t executions = 0;  // engine calls (chunks of batches) that succeeded
    double compute_seconds = 0;
    int64_t last_inference_ms = 0;  // Unix time when the last call finished; 0: none yet
  };
  // The statistics of one version, each field counted atomically without a lock: read during
  // traffic, the fields may be a few events apart (a call's count before its seconds).
  class VersionCounters {
   public:
    void Inference(bool ok, double seconds, int64_t rows, int64_t now_ms);
    void QueueWait(double seconds);
    void Execution(double seconds);
    VersionStatistics Read() const;

   private:
    std::atomic<uint64_t> success_{0};
    std::atomic<double> success_seconds_{0};
    std::atomic<uint64_t> fail_{0};
    std::atomic<double> fail_seconds_{0};
    std::atomic<uint64_t> inferences_{0};
    std::atomic<uint64_t> queued_{0};
    std::atomic<double> queue_seconds_{0};
    std::atomic<uint64_t> executions_{0};
    std::atomic<double> compute_seconds_{0};
    std::atomic<int64_t> last_inference_ms_{0};
  };
  // The counters of `version` of `model` (created on first use; never freed).
  VersionCounters* Counters(absl::string_view model, int64_t version);
  // A finished inference call of `version` of `model` (its latency; its rows when `ok`).
  void RecordInference(absl::string_view model, int64_t version, bool ok, double seconds,
                       int64_t rows);
  // The serving core's events (MetricsObserver): one task's queue wait, one engine call.
  void RecordQueueWait(absl::string_view model, int64_t version, double seconds);
  void RecordExecution(absl::string_view model, int64_t version, double seconds, bool ok);
  // Zeros for a version that has seen nothing.
  VersionStatistics Statistics(const std::string& model, int64_t version) const;

  static const prometheus::Histogram::BucketBoundaries& LatencyBuckets();
  static const prometheus::Histogram::BucketBoundaries& RowBuckets();

 private:
  static constexpr int kNumCodes = 17;  // absl::StatusCode kOk .. kUnauthenticated
  // The series of calls of one method under one model label (`model`, `method`), by status code
  // and operation, each created when first needed.
  struct CallSeries {
    std::array<std::atomic<prometheus::Counter*>, kNumCodes> requests{};
    std::array<std::atomic<prometheus::Histogram*>, kNumOperations> duration{};
  };
  // What is kept per value of the `model` label (calls naming an unknown model included, so this
  // is not ModelMetrics, whose queue series exist only for models).
  struct LabelSeries {
    SnapshotMap<std::string, CallSeries> methods;
    SnapshotMap<int64_t, VersionCounters> versions;
  };

  LabelSeries* Label(absl::string_view model);
  CallSeries* Calls(absl::string_view model, absl::string_view method);
  prometheus::Histogram& Duration(CallSeries* calls, absl::string_view model,
                                  absl::string_view method, Operation op);

  prometheus::Gauge& VersionGauge(prometheus::Family<prometheus::Gauge>& family,
                                  const std::string& model, int64_t version,
                                  const prometheus::Labels& extra = {});

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Histogram>& request_rows_;
  prometheus::Family<prometheus::Gauge>& inflight_requests_;
  prometheus::Family<prometheus::Histogram>& queue_wait_;
  prometheus::Family<prometheus::Histogram>& compute_;
  prometheus::Family<prometheus::Histogram>& batch_rows_;
  prometheus::Family<prometheus::Histogram>& batch_tasks_;
  prometheus::Family<prometheus::Counter>& batches_;
  prometheus::Family<prometheus::Counter>& rows_;
  prometheus::Family<prometheus::Gauge>& queue_requests_;
  prometheus::Family<prometheus::Gauge>& queue_rows_;
  prometheus::Family<prometheus::Gauge>& inflight_rows_;
  prometheus::Family<prometheus::Counter>& dropped_tasks_;
  prometheus::Family<prometheus::Counter>& dropped_rows_;
  prometheus::Family<prometheus::Counter>& delivered_tasks_;
  prometheus::Family<prometheus::Counter>& delivered_rows_;
  prometheus::Family<prometheus::Counter>& wasted_rows_;
  prometheus::Family<prometheus::Counter>& residual_rows_;
  prometheus::Family<prometheus::Counter>& residual_exceeded_rows_;
  prometheus::Family<prometheus::Gauge>& model_ready_;
  prometheus::Family<prometheus::Counter>& model_loads_;
  prometheus::Family<prometheus::Gauge>& model_load_duration_;
  prometheus::Family<prometheus::Gauge>& model_bytes_;
  prometheus::Family<prometheus::Gauge>& model_info_;
  prometheus::Family<prometheus::Gauge>& server_ready_;
  prometheus::Family<prometheus::Gauge>& build_info_;

  SnapshotMap<std::string, ModelMetrics> models_;
  SnapshotMap<std::string, LabelSeries> labels_;
  SnapshotMap<std::string, prometheus::Gauge*> inflight_;  // by method

  absl::Mutex mu_;
  // grove_model_info series currently set, per (model, version), to zero them on unload.
  absl::flat_hash_map<std::string, prometheus::Gauge*> info_series_ ABSL_GUARDED_BY(mu_);
};

// The serving core's events as the series of one model and operation.
class MetricsObserver final : public serving::ServingObserver {
 public:
  explicit MetricsObserver(Metrics* metrics) : metrics_(metrics) {}
  std::unique_ptr<serving::QueueObserver> ForQueue(const std::string& model,
                                                   Operation op) override;

 private:
  Metrics* const metrics_;
};

// A prometheus Collectable for grove_gpu_memory_{used,total}_bytes, sampled at every scrape.
std::shared_ptr<prometheus::Collectable> MakeGpuMemoryCollectable();

// A prometheus Collectable for grove_host_buffer_* (the host buffer pool's kept and in-use bytes,
// its misses and whether it page-locks), read at every scrape. `pool` is not owned and must outlive
// every scrape (the server stops its exposer before its runtime).
std::shared_ptr<prometheus::Collectable> MakeHostBufferCollectable(
    const serving::HostBufferPool* pool);

}  // namespace grove::server
