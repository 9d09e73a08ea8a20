#include "server/server.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/log.h"
#include "core/io/file.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "prometheus/exposer.h"
#include "server/grpc/completion_queues.h"
#include "server/grove_v1/grove_service.h"
#include "server/kserve/kserve_service.h"
#include "server/grpc/reflection_v1.h"
#include "server/grpc/rpc_errors.h"

namespace grove::server {
namespace {

// PEM files: regular files only (a FIFO would block start-up), at most 1 MiB.
absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  absl::StatusOr<std::string> text = ReadRegularFile(path, int64_t{1} << 20);
  if (!text.ok()) {
    return absl::Status(text.status().code(), absl::StrCat(what, ": ", text.status().message()));
  }
  return text;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeCredentials(
    const ServerOptions& o) {
  if (o.tls_cert_file.empty() && o.tls_key_file.empty()) {
    if (!o.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls_client_ca_file needs --tls_cert_file and --tls_key_file");
    }
    return grpc::InsecureServerCredentials();
  }
  if (o.tls_cert_file.empty() || o.tls_key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls_cert_file and --tls_key_file");
  }
  absl::StatusOr<std::string> cert = ReadFile(o.tls_cert_file, "TLS certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFile(o.tls_key_file, "TLS key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  if (!o.tls_client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadFile(o.tls_client_ca_file, "TLS client CA");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(ssl);
}

// Stops the metrics exposer. CivetWeb (under prometheus-cpp) sees that it is stopped only when
// its accept loop's poll returns, which waits up to 2 s for a connection (measured: 2.0 s of every
// shutdown): connections to the port end that wait.
void StopExposer(std::unique_ptr<prometheus::Exposer> exposer, const std::string& address,
                 int port) {
  if (exposer == nullptr) return;
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    exposer.reset();
    stopped.store(true);
  });
  const std::string host = address == "0.0.0.0" || address.empty() ? "127.0.0.1"
                           : address == "::"                       ? "::1"
                                                                   : address;
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (port > 0 && getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) == 0) {
    while (!stopped.load()) {
      const int fd = ::socket(found->ai_family, SOCK_STREAM, 0);
      if (fd >= 0) {
        (void)::connect(fd, found->ai_addr, found->ai_addrlen);
        ::close(fd);
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    freeaddrinfo(found);
  }
  stopper.join();
}

}  // namespace

const char* AccessControlName(const auth::Authorizer* a) {
  if (a == nullptr) return "off";
  if (a->tokens_enabled() && a->certificates_enabled()) return "tokens+certificates";
  return a->tokens_enabled() ? "tokens" : "certificates";
}

int64_t AutoMessageBytes(const registry::ModelConfig& defaults) {
  const int64_t bytes = defaults.max_request_rows * 2048 * 4 + (int64_t{1} << 20);
  return std::clamp<int64_t>(bytes, int64_t{64} << 20, std::numeric_limits<int32_t>::max());
}

GroveServer::GroveServer(ServerOptions options) : options_(std::move(options)) {}

GroveServer::~GroveServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<GroveServer>> GroveServer::Start(ServerOptions options) {
  std::unique_ptr<GroveServer> server(new GroveServer(std::move(options)));
  if (absl::Status s = server->StartImpl(); !s.ok()) {
    server->Shutdown();
    return s;
  }
  return server;
}

absl::Status GroveServer::StartImpl() {
  ServerOptions& o = options_;
  if (o.max_message_bytes <= 0) o.max_message_bytes = AutoMessageBytes(o.runtime.default_config);
  o.max_message_bytes = std::min<int64_t>(o.max_message_bytes, std::numeric_limits<int32_t>::max());
  o.runtime.max_message_bytes = o.max_message_bytes;
  o.runtime.strict_readiness = o.strict_readiness;

  if (absl::Status s = serving::ValidateServingOptions(o.runtime.serving); !s.ok()) return s;
  if (o.grpc_threads < 0 || o.grpc_threads > kMaxGrpcThreads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "grpc_threads must be 0..", kMaxGrpcThreads, " (0: one per hardware thread; got ",
        o.grpc_threads, ")"));
  }

  metrics_ = std::make_unique<Metrics>();
  runtime_ = std::make_unique<Runtime>(o.runtime, metrics_.get());
  if (absl::Status s = runtime_->Init(); !s.ok()) return s;

  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = MakeCredentials(o);
  if (!creds.ok()) return creds.status();
  if (absl::Status s = StartAccessControl(); !s.ok()) return s;

  grove_service_ =
      std::make_unique<GroveService>(runtime_.get(), authorizer_.get(), o.model_control);
  kserve_service_ =
      std::make_unique<KserveService>(runtime_.get(), authorizer_.get(), o.model_control);
  grpc::EnableDefaultHealthCheckService(true);
  // Reflection describes services from the linked Protobuf descriptors; gRPC's health service has
  // none of its own, so its messages are linked in (this reference keeps them from being dropped).
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(
      o.grpc_address.find(':') != std::string::npos ? absl::StrCat("[", o.grpc_address, "]")
                                                    : o.grpc_address,
      ":", o.grpc_port);
  builder.AddListeningPort(address, *creds, &grpc_port_);
  // The port is ours alone: with SO_REUSEPORT (gRPC's default on Linux) a second groved on the
  // same port would start and the kernel would split the calls between the two.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Calls in flight per connection are bounded, so that beyond the server's RPC capacity callers
  // wait (and time out) on their side instead of piling up calls here that expire before their
  // handler runs and still cost what a served call costs (congestion collapse of tiny calls).
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, o.max_concurrent_streams);
  builder.RegisterService(grove_service_.get());
  builder.RegisterService(kserve_service_.get());
  // The hot unary RPCs on completion queues of their own (the services request them raw).
  completion_queues_ = std::make_unique<CompletionQueues>(
      &builder, ResolveGrpcThreads(o.grpc_threads), runtime_.get());
  completion_queues_->AddServiceMethod("Predict", "/grove.v1.Grove/Predict", grove_service_.get(),
                                       &GroveService::RequestPredict, &GroveService::HandlePredict,
                                       kGroveRawRows);
  completion_queues_->AddServiceMethod("Explain", "/grove.v1.Grove/Explain", grove_service_.get(),
                                       &GroveService::RequestExplain, &GroveService::HandleExplain,
                                       kGroveRawRows);
  completion_queues_->AddServiceMethod(
      "ModelInfer", "/inference.GRPCInferenceService/ModelInfer", kserve_service_.get(),
      &KserveService::RequestModelInfer, &KserveService::HandleModelInfer, kKserveRawRows);
  // Reflection v1 beside gRPC's v1alpha (clients ask for either), describing the same services.
  reflection_v1_service_ = std::make_unique<ReflectionV1Service>(std::vector<std::string>{
      "grove.v1.Grove", "inference.GRPCInferenceService", "grpc.health.v1.Health",
      "grpc.reflection.v1alpha.ServerReflection", "grpc.reflection.v1.ServerReflection"});
  builder.RegisterService(reflection_v1_service_.get());
  unknown_method_service_ = std::make_unique<UnknownMethodService>();
  builder.RegisterCallbackGenericService(unknown_method_service_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(MakeDecodeErrorInterceptorFactory(completion_queues_->method_paths()));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  // gRPC's own buffers (messages read but not yet handled) get the same bound as admitted
  // requests, so that a flood of calls is read more slowly instead of growing the process.
  grpc::ResourceQuota quota("groved");
  quota.Resize(static_cast<size_t>(o.runtime.serving.memory_budget_bytes));
  builder.SetResourceQuota(quota);
  builder.SetMaxReceiveMessageSize(static_cast<int>(o.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(o.max_message_bytes));
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || grpc_port_ == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat(
        "cannot bind the gRPC port ", address,
        ": the address is in use (another groved?) or not available on this host"));
  }
  completion_queues_->Start();
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health != nullptr) {
    auto set = [health](const std::string& name, bool serving) {
      if (name.empty()) {
        for (const char* n : {"", "grove.v1.Grove", "inference.GRPCInferenceService"}) {
          health->SetServingStatus(n, serving);
        }
      } else {
        health->SetServingStatus(name, serving);
      }
    };
    set("", false);
    runtime_->SetHealthCallback(set);
  }

  if (o.http.port >= 0) {
    o.http.tls_cert_file = o.tls_cert_file;
    o.http.tls_key_file = o.tls_key_file;
    o.http.tls_client_ca_file = o.tls_client_ca_file;
    o.http.max_body_bytes = o.max_message_bytes;
    o.http.model_control = o.model_control;
    absl::StatusOr<std::unique_ptr<HttpServer>> http =
        HttpServer::Start(o.http, runtime_.get(), authorizer_.get());
    if (!http.ok()) return http.status();
    http_ = *std::move(http);
  }
  if (o.metrics_port >= 0) {
    const std::string maddress = absl::StrCat(o.metrics_address, ":", o.metrics_port);
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(maddress);
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen for metrics on ", maddress, ": ", e.what()));
    }
    exposer_->RegisterCollectable(metrics_->registry());
    gpu_memory_collectable_ = MakeGpuMemoryCollectable();
    exposer_->RegisterCollectable(gpu_memory_collectable_);
    host_buffer_collectable_ = MakeHostBufferCollectable(&runtime_->host_buffers());
    exposer_->RegisterCollectable(host_buffer_collectable_);
    const std::vector<int> ports = exposer_->GetListeningPorts();
    metrics_port_ = ports.empty() ? o.metrics_port : ports.front();
  }
  GROVE_LOG(INFO) << "groved listening" << KV("grpc", absl::StrCat(o.grpc_address, ":", grpc_port_))
                  << KV("http", http_ != nullptr
                                    ? absl::StrCat(o.http.address, ":", http_->port())
                                    : std::string("off"))
                  << KV("metrics", metrics_port_ >= 0
                                       ? absl::StrCat(o.metrics_address, ":", metrics_port_)
                                       : std::string("off"))
                  << KV("tls", o.tls_cert_file.empty()
                                   ? "off"
                                   : (o.tls_client_ca_file.empty() ? "on" : "mutual"))
                  << KV("auth", AccessControlName(authorizer_.get()))
                  << KV("model_control", o.model_control ? "on" : "off")
                  << KV("shared_memory", o.runtime.shared_memory_enabled ? "on" : "off")
                  << KV("max_message_bytes", o.max_message_bytes)
                  << KV("grpc_threads", completion_queues_->threads())
                  << KV("repository", o.runtime.model_repository);

  loader_ = std::thread([this] {
    const absl::Time start = absl::Now();
    absl::Status status = runtime_->registry().LoadAll();
    if (status.ok()) {
      GROVE_LOG(INFO) << "start-up load finished"
                      << KV("seconds", absl::ToDoubleSeconds(absl::Now() - start))
                      << KV("models", runtime_->registry().List().size());
    } else {
      GROVE_LOG(WARNING) << "start-up load finished with errors" << KV("error", status.message());
    }
    if (options_.repository_poll > absl::ZeroDuration() && !runtime_->shutting_down()) {
      runtime_->registry().StartWatching(options_.repository_poll);
    }
    runtime_->set_ready(true);
    WritePortFile();
    absl::MutexLock lock(&mu_);
    loaded_ = true;
    load_status_ = status;
  });
  return absl::OkStatus();
}

absl::Status GroveServer::StartAccessControl() {
  const ServerOptions& o = options_;
  if (!o.tls_client_roles_file.empty() && o.tls_client_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_client_roles_file needs mutual TLS (--tls_client_ca_file, --tls_cert_file, "
        "--tls_key_file)");
  }
  if (!o.auth_token_file.empty() || !o.tls_client_roles_file.empty()) {
    absl::StatusOr<std::unique_ptr<auth::Authorizer>> a =
        auth::Authorizer::Create({o.auth_token_file, o.tls_client_roles_file});
    if (!a.ok()) return a.status();
    authorizer_ = *std::move(a);
    GROVE_LOG(INFO) << "access control on" << KV("tokens", authorizer_->num_tokens())
                    << KV("certificate_names", authorizer_->num_certificate_names())
                    << KV("poll_seconds", absl::ToDoubleSeconds(o.auth_poll));
    if (o.auth_poll > absl::ZeroDuration()) authorizer_->StartWatching(o.auth_poll);
  }
  if (o.model_control && authorizer_ == nullptr) {
    GROVE_LOG(WARNING) << "model control is on without access control: anyone who can reach the "
                          "gRPC port can load and unload models (add --auth_token_file or "
                          "--tls_client_roles_file so that only admins can)";
  }
  if (o.runtime.shared_memory_enabled && authorizer_ == nullptr) {
    GROVE_LOG(WARNING) << "shared memory is on without access control: anyone who can reach the "
                          "gRPC or REST port can make groved map, read and write any POSIX shared "
                          "memory object its user may open (add --auth_token_file or "
                          "--tls_client_roles_file so that only admins can register regions, or "
                          "bind the ports to 127.0.0.1)";
  }
  if (!o.auth_token_file.empty() && o.tls_cert_file.empty()) {
    GROVE_LOG(WARNING) << "bearer tokens are sent in plaintext: serve TLS (--tls_cert_file, "
                          "--tls_key_file) unless the network between clients and groved is "
                          "trusted";
  }
  return absl::OkStatus();
}

void GroveServer::WritePortFile() {
  if (options_.port_file.empty()) return;
  const std::string tmp = absl::StrCat(options_.port_file, ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "{\"grpc_port\":" << grpc_port_ << ",\"metrics_port\":" << metrics_port_
        << ",\"http_port\":" << http_port() << "}\n";
    if (!out) {
      GROVE_LOG(ERROR) << "cannot write the port file" << KV("path", tmp);
      return;
    }
  }
  if (std::rename(tmp.c_str(), options_.port_file.c_str()) != 0) {
    GROVE_LOG(ERROR) << "cannot rename the port file" << KV("path", options_.port_file);
  }
}

absl::Status GroveServer::WaitUntilLoaded() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&loaded_));
  return load_status_;
}

void GroveServer::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  if (runtime_ != nullptr) {
    GROVE_LOG(INFO) << "shutdown: reporting NOT_SERVING"
                    << KV("delay_seconds", absl::ToDoubleSeconds(options_.shutdown_delay));
    runtime_->BeginShutdown();
    if (options_.shutdown_delay > absl::ZeroDuration()) absl::SleepFor(options_.shutdown_delay);
  }
  // gRPC and REST stop accepting and drain together, within one grace period: idle REST
  // connections close now, the others after their answer, and those left at the deadline are cut
  // (their calls cancelled) as gRPC cancels its calls.
  const absl::Time deadline = absl::Now() + options_.shutdown_grace;
  if (runtime_ != nullptr && (server_ != nullptr || http_ != nullptr)) {
    GROVE_LOG(INFO) << "shutdown: draining in-flight calls"
                    << KV("grace_seconds", absl::ToDoubleSeconds(options_.shutdown_grace));
    runtime_->Drain();
  }
  if (http_ != nullptr) http_->BeginStop();
  if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(deadline));
  if (http_ != nullptr) http_->Stop(deadline);
  if (loader_.joinable()) loader_.join();
  if (authorizer_ != nullptr) authorizer_->StopWatching();
  if (runtime_ != nullptr) runtime_->Shutdown();
  if (server_ != nullptr) server_->Wait();
  // Every call was answered (the runtime stopped) and the server is down: the queues drain.
  if (completion_queues_ != nullptr) completion_queues_->Shutdown();
  StopExposer(std::move(exposer_), options_.metrics_address, metrics_port_);
  GROVE_LOG(INFO) << "shutdown: done";
}

}  // namespace grove::server
