// GroveServer: groved assembled. Binds the gRPC port (grove.v1.Grove, inference.GRPCInferenceService,
// grpc.health.v1.Health, server reflection v1alpha and v1; TLS / mutual TLS when configured), the KServe v2 REST
// port (the same TLS and access control) and the Prometheus metrics port, loads the model repository in the background, watches it, and shuts down
// gracefully. Access control (bearer tokens, client-certificate roles) guards every RPC but health
// and reflection (server/grpc/auth.h). main.cc only turns flags into ServerOptions; tests start it
// in-process.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/auth/authorizer.h"
#include "server/kserve/http_server.h"
#include "server/metrics.h"
#include "server/runtime.h"

namespace grpc {
class Server;
}
namespace prometheus {
class Exposer;
}

namespace grove::server {

class CompletionQueues;
class GroveService;
class KserveService;
class ReflectionV1Service;
class UnknownMethodService;

// Every field documented in docs/operations.md (flag of the same name).
struct ServerOptions {
  RuntimeOptions runtime;  // model_repository, default_config, use_gpu, threads, ...
  std::string grpc_address = "0.0.0.0";
  int grpc_port = 8001;  // 0: ephemeral
  std::string metrics_address = "0.0.0.0";
  int metrics_port = 8002;  // 0: ephemeral, -1: off
  std::string port_file;    // {"grpc_port":N,"metrics_port":M,"http_port":H} once bound and loaded
  // KServe v2 REST (server/kserve/http_server.h): http.port 0 ephemeral, -1 off. Its TLS files and body
  // limit are the gRPC port's (tls_*, max_message_bytes), filled in at Start.
  HttpOptions http;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  // Access control (docs/operations.md "Authentication"). Both empty: every RPC is open.
  std::string auth_token_file;        // `ROLE TOKEN` lines: bearer tokens
  std::string tls_client_roles_file;  // `ROLE NAME` lines: client certificate common names
  absl::Duration auth_poll = absl::Seconds(5);  // re-read changed access files; 0: never
  int64_t max_message_bytes = 0;  // 0: automatic (AutoMessageBytes)
  int max_concurrent_streams = 1024;  // calls in flight per client connection (1..1048576)
  // Threads (each draining a completion queue of its own) that receive and answer Predict, Explain
  // and ModelInfer (server/grpc/completion_queues.h); 0: one per hardware thread; at most 64.
  int grpc_threads = 0;
  absl::Duration repository_poll = absl::Seconds(5);  // 0: no file watching
  bool model_control = false;  // LoadModel / UnloadModel (with access control: role admin)
  bool strict_readiness = true;
  absl::Duration shutdown_delay = absl::ZeroDuration();
  absl::Duration shutdown_grace = absl::Seconds(30);
};

// The automatic message-size limit: max_request_rows x 2048 columns x 4 bytes + 1 MiB, at least
// 64 MiB, at most 2 GiB - 1.
int64_t AutoMessageBytes(const registry::ModelConfig& defaults);

// "off", "tokens", "certificates" or "tokens+certificates" (the start-up log line).
const char* AccessControlName(const auth::Authorizer* authorizer);

class GroveServer {
 public:
  // Binds both ports and starts serving (not ready until the start-up load finished, which runs in
  // the background). The gRPC port is bound exclusively (no SO_REUSEPORT: a second server on a port
  // in use fails instead of splitting the calls). Errors: the repository is not a directory, a port
  // cannot be bound (UNAVAILABLE naming the address), TLS files unreadable, an access-control file
  // unreadable or malformed (the message names the line, never a token), --tls_client_roles_file
  // without mutual TLS.
  static absl::StatusOr<std::unique_ptr<GroveServer>> Start(ServerOptions options);
  ~GroveServer();  // Shutdown()
  GroveServer(const GroveServer&) = delete;
  GroveServer& operator=(const GroveServer&) = delete;

  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }  // -1 when off
  int http_port() const { return http_ != nullptr ? http_->port() : -1; }
  Runtime& runtime() { return *runtime_; }
  Metrics& metrics() { return *metrics_; }
  const ServerOptions& options() const { return options_; }

  // Blocks until the start-up load finished; its result (OK when every model loaded).
  absl::Status WaitUntilLoaded();

  // Graceful shutdown (docs/operations.md "Shutdown"): NOT_SERVING, delay, stop accepting and
  // drain for up to the grace period, cancel the rest, stop. Idempotent.
  void Shutdown();

 private:
  explicit GroveServer(ServerOptions options);
  absl::Status StartImpl();
  // Creates the authorizer from the access-control options and warns about open model control
  // and open shared memory registration.
  absl::Status StartAccessControl();
  void WritePortFile();

  ServerOptions options_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Runtime> runtime_;
  std::unique_ptr<auth::Authorizer> authorizer_;  // null: no access control; outlives the services
  std::unique_ptr<GroveService> grove_service_;
  std::unique_ptr<KserveService> kserve_service_;
  std::unique_ptr<ReflectionV1Service> reflection_v1_service_;
  std::unique_ptr<UnknownMethodService> unknown_method_service_;
  // Declared before server_: gRPC's completion queues must outlive the server.
  std::unique_ptr<CompletionQueues> completion_queues_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  // The exposer keeps only weak references to collectables, so the server owns them.
  std::shared_ptr<prometheus::Collectable> gpu_memory_collectable_;
  std::shared_ptr<prometheus::Collectable> host_buffer_collectable_;  // reads runtime_'s pool
  int grpc_port_ = 0;
  int metrics_port_ = -1;
  std::thread loader_;

  absl::Mutex mu_;
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status load_status_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace grove::server
