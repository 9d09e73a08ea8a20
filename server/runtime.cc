#include "server/runtime.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/log.h"
#include "core/gpu/device_set.h"

namespace grove::server {

Runtime::Runtime(RuntimeOptions options, Metrics* metrics)
    : options_(std::move(options)),
      metrics_(metrics),
      clock_(options_.clock != nullptr ? options_.clock : batching::RealClock::Get()),
      observer_(metrics) {
  pool_ = std::make_unique<ThreadPool>(options_.compute_threads,
                                       options_.serving.compute_priority);
  serving::HostBufferOptions buffers;
  buffers.max_bytes = options_.host_buffer_bytes;
  buffers.page_locked = options_.use_gpu && gpu::VisibleGpuCount() > 0;
  host_buffers_ = std::make_unique<serving::HostBufferPool>(buffers);
  serving::ServingOptions s = options_.serving;
  s.clock = clock_;
  s.host_buffers = host_buffers_.get();
  s.copy_pool = pool_.get();
  core_ = std::make_unique<serving::ServingCore>(s, &engine_, &observer_);
  control_thread_ = std::thread([this] { ControlLoop(); });
}

Runtime::~Runtime() {
  Shutdown();
  // The registry's listener is this object: stop the watcher before members go away.
  if (registry_ != nullptr) registry_->StopWatching();
}

absl::Status Runtime::Init() {
  if (absl::Status s = serving::ValidateSharedMemoryOptions(options_.shared_memory); !s.ok()) {
    return s;
  }
  if (absl::Status s = serving::ValidateHostBufferOptions(
          serving::HostBufferOptions{.max_bytes = options_.host_buffer_bytes});
      !s.ok()) {
    return s;
  }
  serving::SharedMemoryOptions shm = options_.shared_memory;
  if (options_.use_gpu && shm.pin == nullptr && gpu::VisibleGpuCount() > 0) {
    // Regions are page-locked at registration so the GPU engines read rows from them and write
    // results into them by DMA, without their staging copies. A region that cannot be locked
    // (the host's locked-memory limit, say) is still served, through the staging copies.
    shm.pin = [](void* address, size_t bytes) {
      if (absl::Status s = gpu::PinHostRange(address, bytes); !s.ok()) {
        GROVE_LOG(WARNING) << "shared memory region not page-locked; the GPU copies it through "
                              "staging" << KV("bytes", bytes) << KV("why", s.message());
      }
      return absl::OkStatus();
    };
    shm.unpin = [](void* address, size_t) { gpu::UnpinHostRange(address); };
  }
  shared_memory_ = std::make_unique<serving::SharedMemoryRegistry>(shm);
  registry::RegistryOptions r;
  r.repository = options_.model_repository;
  r.default_config = options_.default_config;
  r.engine_options.device = options_.use_gpu ? Device::kAuto : Device::kCpu;
  r.engine_options.calibration_cache_dir = options_.calibration_cache_dir;
  r.servable_factory = registry::DefaultServableFactory(pool_.get());
  r.listener = this;
  absl::StatusOr<std::unique_ptr<registry::ModelRegistry>> created =
      registry::ModelRegistry::Create(std::move(r));
  if (!created.ok()) return created.status();
  registry_ = std::move(*created);
  return absl::OkStatus();
}

absl::Status Runtime::Submit(std::unique_ptr<ComputeTask> task) {
  if (stopped_.load()) return absl::UnavailableError("the server is shutting down");
  return core_->Submit(std::move(task));
}

absl::StatusOr<serving::MemoryReservation> Runtime::ReserveMemory(
    const registry::ModelVersion& model, Operation op, int64_t rows, int64_t bytes) {
  return core_->Reserve(model, op, rows, bytes);
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

bool Runtime::ServerReady() const { return Readiness().ok(); }

absl::Status Runtime::Readiness() const {
  if (shutting_down_.load()) return absl::UnavailableError("the server is shutting down");
  if (!ready_.load()) {
    return absl::UnavailableError(
        "the server is not ready: the model repository's start-up load has not finished");
  }
  if (!options_.strict_readiness || registry_ == nullptr || registry_->AllReady()) {
    return absl::OkStatus();
  }
  constexpr int kNamed = 10;
  std::vector<std::string> waiting;
  int count = 0;
  for (const registry::ModelStatus& m : registry_->List()) {
    if (m.ready) continue;
    if (count++ < kNamed) waiting.push_back(absl::StrCat("'", m.name, "'"));
  }
  if (count == 0) return absl::OkStatus();  // the last one became ready meanwhile
  return absl::UnavailableError(absl::StrCat(
      "the server is not ready: ", count == 1 ? "model " : "models ", absl::StrJoin(waiting, ", "),
      count > kNamed ? absl::StrCat(" and ", count - kNamed, " more") : "",
      count == 1 ? " is" : " are",
      " not ready (every model must be ready: --strict_readiness; a model's status says why)"));
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

void Runtime::PublishHealth(const std::function<void(const HealthCallback&)>& report_models) {
  HealthCallback cb;
  {
    absl::MutexLock lock(&mu_);
    cb = health_cb_;
  }
  const bool server = ServerReady();
  metrics_->SetServerReady(server);
  if (!cb) return;
  report_models(cb);
  cb("", server);
}

void Runtime::UpdateModelHealth(const std::string& name) {
  PublishHealth([&](const HealthCallback& cb) {
    cb(absl::StrCat("model/", name), ModelServing(name));
  });
}

void Runtime::UpdateHealth() {
  PublishHealth([&](const HealthCallback& cb) {
    if (registry_ == nullptr) return;
    for (const registry::ModelStatus& s : registry_->List()) {
      cb(absl::StrCat("model/", s.name), s.ready && !shutting_down_.load());
    }
  });
}

void Runtime::Drain() { core_->Drain(); }

void Runtime::Shutdown() {
  if (stopped_.exchange(true)) return;
  shutting_down_.store(true);
  if (registry_ != nullptr) registry_->StopWatching();
  core_->Shutdown();
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

serving::ServingCore::Stats Runtime::QueueStats(const std::string& model, Operation op) {
  return core_->QueueStats(model, op);
}

void Runtime::OnVersionReady(const registry::ModelVersionPtr& model) {
  metrics_->VersionReady(*model);
  core_->Configure(model->name, *model->config);
}

void Runtime::OnVersionUnloaded(const std::string& name, int64_t version) {
  metrics_->VersionUnloaded(name, version);
}

void Runtime::OnLoadFailed(const std::string& name, int64_t version, const absl::Status& error) {
  metrics_->LoadFailed(name);
}

void Runtime::OnModelChanged(const std::string& name) { UpdateModelHealth(name); }

}  // namespace grove::server
