// Runtime: what groved's RPC handlers share. It owns the model registry, the serving core
// (core/serving: queues, admission, batches, chunks, drops), the CPU thread pool and a control
// thread for blocking model-control operations, and wires the core's observer to the metrics. No
// gRPC here, so that handlers stay thin adapters (convert, Submit, finish from the completion
// callback).
//
// Thread-safe.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/batching/clock.h"
#include "core/common/rows.h"
#include "core/common/thread_pool.h"
#include "core/registry/model_registry.h"
#include "core/serving/compute_task.h"
#include "core/serving/engine_runner.h"
#include "core/serving/serving_core.h"
#include "core/serving/shared_memory.h"
#include "server/metrics.h"

namespace grove::server {

using serving::CallState;
using serving::ComputeTask;

struct RuntimeOptions {
  std::string model_repository;
  registry::ModelConfig default_config;
  bool use_gpu = true;
  std::string calibration_cache_dir;
  int compute_threads = 0;  // CPU engine pool; 0: hardware threads
  // Queues, admission, chunks, memory budget, batch threads and their priority (which the CPU
  // engine pool shares); `serving.clock` is ignored (`clock` below serves both).
  serving::ServingOptions serving;
  bool strict_readiness = true;
  const batching::Clock* clock = nullptr;  // null: the real clock
  int64_t max_message_bytes = 64 << 20;  // responses above this are refused before compute
  // System shared memory (--shared_memory): clients may register regions. Off: the registry stays
  // empty, registration is refused and requests naming a region find none. The bounds and hooks
  // apply either way (checked by Init).
  bool shared_memory_enabled = false;
  serving::SharedMemoryOptions shared_memory;
  // Reusable buffers, page-locked when a GPU is used, for large requests' rows as they are
  // received and for merged batches (serving::HostBufferPool; --host_buffer_mb).
  int64_t host_buffer_bytes = int64_t{256} << 20;
};

class Runtime final : public registry::RegistryListener {
 public:
  Runtime(RuntimeOptions options, Metrics* metrics);
  ~Runtime() override;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Creates the registry (does not load). INVALID_ARGUMENT for shared memory or host buffer
  // bounds out of range.
  absl::Status Init();
  registry::ModelRegistry& registry() { return *registry_; }
  // Registered shared memory regions (empty unless shared_memory_enabled).
  serving::SharedMemoryRegistry& shared_memory() { return *shared_memory_; }
  bool shared_memory_enabled() const { return options_.shared_memory_enabled; }
  Metrics& metrics() { return *metrics_; }
  // Where large requests' rows are received (server/grpc/wire_rows.h) and batches gather rows.
  serving::HostBufferPool& host_buffers() { return *host_buffers_; }
  // The compute pool: CPU engines, and large copies on the request path.
  ThreadPool* pool() { return pool_.get(); }
  const RuntimeOptions& options() const { return options_; }

  // Queues `task` on its model's queue for its operation (serving::ServingCore::Submit). Never
  // waits. On error (shed: RESOURCE_EXHAUSTED, shutting down: UNAVAILABLE) the task is dropped and
  // the error returned; the caller answers its CallState.
  absl::Status Submit(std::unique_ptr<ComputeTask> task);
  // Takes the bytes a request will hold from the server's memory budget (RESOURCE_EXHAUSTED when
  // spent); the caller keeps the reservation with the call (CallState::Hold).
  absl::StatusOr<serving::MemoryReservation> ReserveMemory(const registry::ModelVersion& model,
                                                           Operation op, int64_t rows,
                                                           int64_t bytes);

  // Takes the bytes of a request body being received, before its model is known, from the same
  // budget (RESOURCE_EXHAUSTED when spent).
  absl::StatusOr<serving::MemoryReservation> ReserveReceivedBytes(int64_t bytes) {
    return core_->ReserveUnattributed(bytes);
  }

  // Runs `fn` on the control thread (model loads and unloads, which block), so that RPC reactions
  // never wait for a load. After Shutdown() `fn` runs at once on the caller's thread.
  void RunControl(absl::AnyInvocable<void() &&> fn);

  // Readiness as health and ServerReady report it. set_ready(true) once the start-up load is done.
  bool ready() const { return ready_.load(); }
  void set_ready(bool ready);
  bool shutting_down() const { return shutting_down_.load(); }
  // Health reports NOT_SERVING everywhere from now on (first phase of a graceful shutdown); work is
  // still accepted.
  void BeginShutdown();
  // Server readiness now: ready(), not shutting down and, with strict readiness, every model ready.
  bool ServerReady() const;
  // OK when ServerReady(); otherwise UNAVAILABLE saying why: shutting down, the start-up load not
  // done, or (strict readiness) the models that are not ready, named.
  absl::Status Readiness() const;
  // Model `name` has a serving version and the server is not shutting down.
  bool ModelServing(const std::string& name) const;

  // Called with (health service name, serving) whenever a serving state may have changed: "" for
  // the server, "model/<name>" per model. Set before Init's models load.
  void SetHealthCallback(std::function<void(const std::string&, bool)> cb);
  // Reports every current state to the health callback.
  void UpdateHealth();

  // Queues stop waiting for their batching delay (work is still accepted): the drain phase of a
  // graceful shutdown, so that in-flight calls finish quickly.
  void Drain();

  // Closes every queue (new work is UNAVAILABLE), lets queued and computing work finish, then stops
  // the threads. Idempotent.
  void Shutdown();

  // Responses larger than the message limit are refused before compute (INVALID_ARGUMENT naming the
  // limit and the largest row count that fits).
  absl::Status CheckResponseBytes(int64_t bytes, int64_t rows) const;

  // Queue statistics of (model, op), for tests; zeros when the queue does not exist.
  serving::ServingCore::Stats QueueStats(const std::string& model, Operation op);

  // RegistryListener.
  void OnVersionReady(const registry::ModelVersionPtr& model) override;
  void OnVersionUnloaded(const std::string& name, int64_t version) override;
  void OnLoadFailed(const std::string& name, int64_t version, const absl::Status& error) override;
  void OnModelChanged(const std::string& name) override;

 private:
  void ControlLoop();
  void UpdateModelHealth(const std::string& name);
  using HealthCallback = std::function<void(const std::string&, bool)>;
  // Sets the server's readiness metric and, with a health callback, calls `report_models` with it
  // and then reports the server ("").
  void PublishHealth(const std::function<void(const HealthCallback&)>& report_models);

  const RuntimeOptions options_;
  Metrics* const metrics_;
  const batching::Clock* const clock_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<serving::HostBufferPool> host_buffers_;  // outlives core_ (its batches' buffers)
  MetricsObserver observer_;
  serving::ServableEngineRunner engine_;
  std::unique_ptr<serving::ServingCore> core_;
  std::unique_ptr<registry::ModelRegistry> registry_;
  std::unique_ptr<serving::SharedMemoryRegistry> shared_memory_;

  absl::Mutex mu_;
  std::function<void(const std::string&, bool)> health_cb_ ABSL_GUARDED_BY(mu_);

  std::atomic<bool> ready_{false};
  std::atomic<bool> shutting_down_{false};

  absl::Mutex control_mu_;
  std::deque<absl::AnyInvocable<void() &&>> control_queue_ ABSL_GUARDED_BY(control_mu_);
  bool control_stop_ ABSL_GUARDED_BY(control_mu_) = false;
  std::atomic<bool> stopped_{false};
  std::thread control_thread_;
};

}  // namespace grove::server
