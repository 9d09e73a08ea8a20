#include "server/http_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/io/file.h"
#include "httplib.h"
#include "openssl/ssl.h"
#include "openssl/x509.h"
#include "server/call.h"
#include "server/kserve_ops.h"
#include "server/kserve_rest.h"

namespace grove::server {
namespace {

// The connection tasks: `threads` workers and at most as many tasks waiting; a further connection
// waits in the accept loop (enqueue blocks without holding the lock), so the kernel's listen queue
// holds the rest instead of an unbounded list here.
class BoundedTaskQueue final : public httplib::TaskQueue {
 public:
  explicit BoundedTaskQueue(int threads) : limit_(static_cast<size_t>(threads)) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
  }
  ~BoundedTaskQueue() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](BoundedTaskQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) {
          return q->stop_ || q->tasks_.size() < q->limit_;
        },
        this));
    if (!stop_) tasks_.push_back(std::move(fn));
  }

  void shutdown() override {
    {
      absl::MutexLock lock(&mu_);
      if (stop_ && workers_.empty()) return;
      stop_ = true;
    }
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

 private:
  void Work() {
    while (true) {
      std::function<void()> fn;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](BoundedTaskQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) {
              return q->stop_ || !q->tasks_.empty();
            },
            this));
        if (tasks_.empty()) return;  // stopping, and every accepted connection was served
        fn = std::move(tasks_.front());
        tasks_.pop_front();
      }
      fn();
    }
  }

  const size_t limit_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

// The common name of the verified client certificate ("" when none).
std::string CertificateName(const httplib::Request& request) {
  if (request.ssl == nullptr) return "";
  X509* cert = SSL_get0_peer_certificate(request.ssl);
  if (cert == nullptr) return "";
  char cn[256];
  const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn,
                                          sizeof(cn));
  return n > 0 ? std::string(cn, static_cast<size_t>(n)) : "";
}

absl::Status Authorize(const auth::Authorizer* authorizer, const httplib::Request& request,
                       auth::Role required, const char* method) {
  if (authorizer == nullptr) return absl::OkStatus();
  auth::CallerCredentials caller;
  const size_t count = request.get_header_value_count("Authorization");
  std::vector<std::string> values;
  for (size_t i = 0; i < count; ++i) values.push_back(request.get_header_value("Authorization", i));
  for (const std::string& v : values) caller.authorization.emplace_back(v);
  const std::string name = authorizer->certificates_enabled() ? CertificateName(request) : "";
  caller.certificate_name = name;
  return authorizer->Check(caller, required, method);
}

void SetStatus(httplib::Response& response, const absl::Status& status) {
  response.status = HttpStatus(status.code());
  if (!status.ok()) response.set_content(RestError(status.message()), "application/json");
}

// -1 when absent; INVALID_ARGUMENT when not a non-negative integer.
absl::StatusOr<int64_t> HeaderLength(const httplib::Request& request) {
  if (!request.has_header(kInferHeaderLength)) return -1;
  const std::string h = request.get_header_value(kInferHeaderLength);
  int64_t v = 0;
  if (!absl::SimpleAtoi(h, &v) || v < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kInferHeaderLength, ": '", h, "' is not a non-negative integer"));
  }
  return v;
}

// A body at most this much above the limit is still read (and dropped) before its 413, so that a
// client that sends its whole body before reading the answer (urllib, most simple clients) reads
// the 413 instead of a reset connection; a body announced larger than that is refused at once.
constexpr int64_t kDrainedExcessBytes = int64_t{4} << 20;

// A request whose body cannot be delimited safely, and the status it is answered with.
struct FramingError {
  int status;
  std::string message;
};

// A body is delimited by one Content-Length of plain digits, or by Transfer-Encoding: chunked
// alone, and only a POST, PUT, PATCH or DELETE has one (cpp-httplib reads no other's body, which
// would then be read as the next request). Two lengths, a length beside chunked, a coding groved
// does not decode, or a body on another method are refused,
// never resolved one way: a proxy in front that resolved them another way would take the rest of
// the body for a request of its own (request smuggling, RFC 9112 section 6.3). A length more than
// kDrainedExcessBytes above `max_body_bytes` is refused from the headers, before any of the body
// is read (a body less far above it is read, dropped and answered 413 by cpp-httplib).
std::optional<FramingError> CheckFraming(const httplib::Request& request, int64_t max_body_bytes) {
  const size_t lengths = request.get_header_value_count("Content-Length");
  const size_t codings = request.get_header_value_count("Transfer-Encoding");
  const std::string& method = request.method;
  if ((codings > 0 || (lengths > 0 && request.get_header_value("Content-Length") != "0")) &&
      method != "POST" && method != "PUT" && method != "PATCH" && method != "DELETE") {
    return FramingError{400, absl::StrCat("a ", method, " request carries no body; send it "
                                          "without Content-Length and Transfer-Encoding")};
  }
  if (lengths > 1) {
    return FramingError{400, absl::StrCat("the request has ", lengths,
                                          " Content-Length headers; send one")};
  }
  if (lengths == 1 && codings > 0) {
    return FramingError{400,
                        "the request has both Content-Length and Transfer-Encoding; send one"};
  }
  if (codings > 0) {
    const std::string coding = request.get_header_value("Transfer-Encoding");
    if (codings > 1 || !absl::EqualsIgnoreCase(coding, "chunked")) {
      return FramingError{501, absl::StrCat("Transfer-Encoding '", coding,
                                            "' is not supported; send the body chunked "
                                            "(Transfer-Encoding: chunked) or with Content-Length")};
    }
    return std::nullopt;
  }
  if (lengths == 0) return std::nullopt;
  const std::string text = request.get_header_value("Content-Length");
  int64_t length = 0;
  const bool digits = !text.empty() && text.size() <= 18 &&
                      std::all_of(text.begin(), text.end(), absl::ascii_isdigit);
  if (!digits || !absl::SimpleAtoi(text, &length)) {
    return FramingError{400, absl::StrCat("Content-Length '", text,
                                          "' is not a byte count (digits only)")};
  }
  if (length > max_body_bytes && length - max_body_bytes > kDrainedExcessBytes) {
    return FramingError{413, absl::StrCat("the request body of ", length,
                                          " bytes is larger than the limit of ", max_body_bytes,
                                          " bytes (--max_message_bytes)")};
  }
  return std::nullopt;
}

// Answers `error` and closes the connection after the answer. The body the request announced is
// not read, so nothing after the headers on this connection can be told apart from it. cpp-httplib
// closes a connection whose response body could not be written whole: the provider writes the whole
// body and then reports failure. An answer to HEAD has no body, so a refused HEAD request is
// answered as a GET would be: with the body, then the connection closed.
void RefuseAndClose(const FramingError& error, const httplib::Request& request,
                    httplib::Response& response) {
  // cpp-httplib's request is its own (non-const) object, passed to handlers by const reference.
  if (request.method == "HEAD") const_cast<httplib::Request&>(request).method = "GET";
  response.status = error.status;
  response.set_header("Connection", "close");
  std::string body = RestError(error.message);
  const size_t size = body.size();
  response.set_content_provider(
      size, "application/json",
      [body = std::move(body)](size_t offset, size_t length, httplib::DataSink& sink) {
        sink.write(body.data() + offset, length);
        return false;
      });
}

// What one REST call records (the counterpart of UnaryCall for gRPC).
struct CallRecord {
  const char* method = "";
  std::string model_label;
  absl::Time start = absl::Now();
  bool observe_latency = false;
  Operation op = Operation::kPredict;
  ResolvedCall resolved;
};

// Answers an inference: parse, queue, wait for the result (no lock held), reply.
absl::Status Infer(Runtime* runtime, const httplib::Request& http, const RestRoute& route,
                   httplib::Response& out, CallRecord* record) {
  inference::ModelInferRequest request;
  request.set_model_name(route.model);
  request.set_model_version(route.version);
  absl::StatusOr<int64_t> header_length = HeaderLength(http);
  if (!header_length.ok()) return header_length.status();
  if (absl::Status s = ParseRestInferRequest(http.body, *header_length, &request); !s.ok()) {
    return s;
  }
  inference::ModelInferResponse response;
  absl::Notification finished;
  absl::Status result;
  absl::Status started = StartKserveInfer(
      runtime, request, &response, absl::InfiniteFuture(),
      [record](const std::shared_ptr<CallState>&, Operation op) {
        record->op = op;
        record->observe_latency = true;
      },
      [&](absl::Status status) {
        result = std::move(status);
        finished.Notify();
      },
      &record->resolved);
  if (!started.ok()) return started;
  finished.WaitForNotification();
  if (!result.ok()) return result;
  int64_t json_length = -1;
  std::string body = RestInferResponse(request, response, &json_length);
  if (json_length >= 0) out.set_header(kInferHeaderLength, absl::StrCat(json_length));
  out.status = 200;
  out.set_content(std::move(body),
                  json_length >= 0 ? "application/octet-stream" : "application/json");
  return absl::OkStatus();
}

// The request naming the route's model and version (ModelReady, ModelMetadata).
template <typename Request>
Request ModelRequest(const RestRoute& route) {
  Request request;
  request.set_name(route.model);
  request.set_version(route.version);
  return request;
}

// Repository load / unload: runs on the control thread; the worker waits for it (no lock held).
absl::Status Control(Runtime* runtime, const HttpOptions& options, const httplib::Request& http,
                     const RestRoute& route) {
  inference::RepositoryIndexRequest unused;
  inference::RepositoryModelLoadRequest request;
  if (absl::Status s = ParseRestRepositoryRequest(http.body, route.op, &unused, &request);
      !s.ok()) {
    return s;
  }
  const ModelControl op =
      route.op == RestOp::kRepositoryModelLoad ? ModelControl::kLoad : ModelControl::kUnload;
  if (std::string refused = RefusedRepositoryArgument("", request.parameters(), op);
      !refused.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        route.method, " with ", refused, " is not supported: groved loads models from the files "
        "of its one repository (no config or files in the request)"));
  }
  absl::Notification finished;
  absl::Status result;
  StartModelControl(runtime, options.model_control, op, route.model, absl::InfiniteFuture(),
                    [] { return false; },
                    [&](absl::Status s) {
                      result = std::move(s);
                      finished.Notify();
                    });
  finished.WaitForNotification();
  return result;
}

// Shared memory register / unregister: runs on the control thread; the worker waits for it (no
// lock held).
absl::Status SharedMemory(Runtime* runtime, const httplib::Request& http, const RestRoute& route) {
  SharedMemoryControl control = SharedMemoryControl::Unregister(route.region);
  if (route.op == RestOp::kSystemSharedMemoryRegister) {
    inference::SystemSharedMemoryRegisterRequest request;
    if (absl::Status s = ParseRestSharedMemoryRegister(http.body, &request); !s.ok()) return s;
    control = SharedMemoryControl::Register(route.region, request.key(), request.offset(),
                                            request.byte_size());
  }
  absl::Notification finished;
  absl::Status result;
  StartSharedMemoryControl(runtime, std::move(control), absl::InfiniteFuture(),
                           [] { return false; },
                           [&](absl::Status s, std::vector<std::string>) {
                             result = std::move(s);
                             finished.Notify();
                           });
  finished.WaitForNotification();
  return result;
}

// The model's configuration, statistics, or the repository index, as JSON into `out`.
absl::Status Describe(Runtime* runtime, const httplib::Request& http, const RestRoute& route,
                      httplib::Response& out) {
  absl::Status status;
  std::string body;
  if (route.op == RestOp::kModelConfig) {
    inference::ModelConfigResponse response;
    status = KserveModelConfig(runtime, ModelRequest<inference::ModelConfigRequest>(route),
                               &response);
    body = RestModelConfig(response.config());
  } else if (route.op == RestOp::kModelStatistics) {
    inference::ModelStatisticsResponse response;
    status = KserveModelStatistics(
        runtime, ModelRequest<inference::ModelStatisticsRequest>(route), &response);
    body = RestModelStatistics(response);
  } else {
    inference::RepositoryIndexRequest request;
    inference::RepositoryModelLoadRequest unused;
    status = ParseRestRepositoryRequest(http.body, route.op, &request, &unused);
    inference::RepositoryIndexResponse response;
    if (status.ok()) status = KserveRepositoryIndex(runtime, request, &response);
    body = RestRepositoryIndex(response);
  }
  if (status.ok()) out.set_content(std::move(body), "application/json");
  return status;
}

// The role a route needs: none for health and readiness (as on gRPC), admin for model control,
// infer for the rest.
std::optional<auth::Role> RequiredRole(RestOp op) {
  switch (op) {
    case RestOp::kServerLive:
    case RestOp::kServerReady:
    case RestOp::kModelReady:
      return std::nullopt;
    case RestOp::kRepositoryModelLoad:
    case RestOp::kRepositoryModelUnload:
    case RestOp::kSystemSharedMemoryRegister:
    case RestOp::kSystemSharedMemoryUnregister:
      return auth::Role::kAdmin;
    default:
      return auth::Role::kInfer;
  }
}

// Serves `route` into `out` (errors included); the status to record.
absl::Status Serve(Runtime* runtime, const auth::Authorizer* authorizer,
                   const HttpOptions& options, const httplib::Request& http,
                   const RestRoute& route, httplib::Response& out, CallRecord* record) {
  const std::optional<auth::Role> role = RequiredRole(route.op);
  absl::Status status =
      role ? Authorize(authorizer, http, *role, route.method) : absl::OkStatus();
  if (status.ok()) {
    switch (route.op) {
      case RestOp::kServerLive:
        break;
      case RestOp::kServerReady:
        if (!runtime->ServerReady()) status = absl::UnavailableError("the server is not ready");
        break;
      case RestOp::kModelReady: {
        inference::ModelReadyResponse response;
        status = KserveModelReady(runtime, ModelRequest<inference::ModelReadyRequest>(route),
                                  &response);
        if (status.ok() && !response.ready()) {
          status = absl::UnavailableError(absl::StrCat("model '", route.model, "' is not ready"));
        }
        break;
      }
      case RestOp::kServerMetadata: {
        inference::ServerMetadataResponse response;
        KserveServerMetadata(runtime->shared_memory_enabled(), &response);
        out.set_content(RestServerMetadata(response), "application/json");
        break;
      }
      case RestOp::kModelMetadata: {
        inference::ModelMetadataResponse response;
        status = KserveModelMetadata(runtime, ModelRequest<inference::ModelMetadataRequest>(route),
                                     &response);
        if (status.ok()) out.set_content(RestModelMetadata(response), "application/json");
        break;
      }
      case RestOp::kModelInfer:
        status = Infer(runtime, http, route, out, record);
        if (status.ok()) return status;
        break;
      case RestOp::kModelConfig:
      case RestOp::kModelStatistics:
      case RestOp::kRepositoryIndex:
        status = Describe(runtime, http, route, out);
        if (status.ok()) return status;
        break;
      case RestOp::kRepositoryModelLoad:
      case RestOp::kRepositoryModelUnload:
        status = Control(runtime, options, http, route);
        break;
      case RestOp::kSystemSharedMemoryStatus: {
        inference::SystemSharedMemoryStatusRequest request;
        request.set_name(route.region);
        inference::SystemSharedMemoryStatusResponse response;
        status = KserveSystemSharedMemoryStatus(runtime, request, &response);
        if (status.ok()) {
          out.set_content(RestSystemSharedMemoryStatus(response), "application/json");
        }
        break;
      }
      case RestOp::kSystemSharedMemoryRegister:
      case RestOp::kSystemSharedMemoryUnregister:
        status = SharedMemory(runtime, http, route);
        break;
      case RestOp::kCudaSharedMemory:
        status = CudaSharedMemoryUnimplemented(route.method);
        break;
    }
  }
  SetStatus(out, status);
  return status;
}

}  // namespace

absl::Status ValidateHttpOptions(const HttpOptions& o) {
  if (o.port < 0 || o.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--http_port ", o.port, " is outside 0..65535"));
  }
  if (o.threads < 1 || o.threads > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_threads ", o.threads, " is outside 1..1024"));
  }
  if (o.request_timeout < absl::Seconds(1) || o.request_timeout > absl::Hours(1)) {
    return absl::InvalidArgumentError("--http_timeout_seconds is outside 1..3600");
  }
  if (o.keep_alive_timeout < absl::Seconds(1) || o.keep_alive_timeout > absl::Hours(1)) {
    return absl::InvalidArgumentError("--http_keep_alive_seconds is outside 1..3600");
  }
  if (o.max_body_bytes < 1) {
    return absl::InvalidArgumentError("the REST body limit (--max_message_bytes) is not positive");
  }
  return absl::OkStatus();
}

HttpServer::HttpServer(const HttpOptions& options, Runtime* runtime,
                       const auth::Authorizer* authorizer)
    : options_(options), runtime_(runtime), authorizer_(authorizer) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpOptions& options,
                                                              Runtime* runtime,
                                                              const auth::Authorizer* authorizer) {
  if (absl::Status s = ValidateHttpOptions(options); !s.ok()) return s;
  // The PEM files are read here once so that a missing or unreadable one is named (the TLS
  // context loads them itself and would only say that it is not valid).
  for (const std::string& f :
       {options.tls_cert_file, options.tls_key_file, options.tls_client_ca_file}) {
    if (f.empty()) continue;
    absl::StatusOr<std::string> text = ReadRegularFile(f, int64_t{1} << 20);
    if (!text.ok()) return text.status();
  }
  std::unique_ptr<HttpServer> server(new HttpServer(options, runtime, authorizer));
  if (!options.tls_cert_file.empty()) {
    server->server_ = std::make_unique<httplib::SSLServer>(
        options.tls_cert_file.c_str(), options.tls_key_file.c_str(),
        options.tls_client_ca_file.empty() ? nullptr : options.tls_client_ca_file.c_str());
  } else {
    server->server_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& http = *server->server_;
  if (!http.is_valid()) {
    return absl::InvalidArgumentError(
        absl::StrCat("REST TLS: the certificate ", options.tls_cert_file, ", key ",
                     options.tls_key_file, " or client CA do not make a valid TLS context"));
  }
  const int threads = options.threads;
  http.new_task_queue = [threads] { return new BoundedTaskQueue(threads); };
  http.set_payload_max_length(static_cast<size_t>(options.max_body_bytes));
  const auto timeout = absl::ToChronoSeconds(options.request_timeout);
  http.set_read_timeout(timeout);
  http.set_write_timeout(timeout);
  http.set_keep_alive_timeout(absl::ToInt64Seconds(options.keep_alive_timeout));
  // cpp-httplib closes a connection after 5 requests by default: every client would reconnect
  // constantly (and overflow its listen queue of 5). 1000 keeps connections alive while still
  // handing a busy connection's worker to a waiting one now and then.
  http.set_keep_alive_max_count(1000);
  // SO_REUSEADDR only: without SO_REUSEPORT (cpp-httplib's default sets it) a second groved on the
  // port fails to start instead of sharing its requests. TCP_NODELAY (inherited by accepted
  // sockets): a response goes out in two writes, header and body, and with Nagle's algorithm the
  // body waited for the client's delayed ACK, 40 ms per kept-alive request (measured).
  http.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  });
  const int64_t limit = options.max_body_bytes;
  http.set_error_handler([limit](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty() || res.has_header("Content-Type")) return;  // a handler's own answer
    std::string message = absl::StrCat("HTTP status ", res.status);
    if (res.status == 413) {
      message = absl::StrCat("the request body is larger than the limit of ", limit,
                             " bytes (--max_message_bytes)");
    }
    res.set_content(RestError(message), "application/json");
  });
  HttpServer* self = server.get();
  auto handler = [self](const httplib::Request& req, httplib::Response& res) {
    self->Handle(req, res);
  };
  // A POST without Content-Length or chunked encoding has no body (tritonclient.http's repository
  // and load calls send one so); cpp-httplib would answer 400 because it cannot tell where a body
  // ends, so such a request is served before it tries to read one.
  // Before that, the framing is checked (CheckFraming): the pre-routing handler runs once the
  // headers are read and before any of the body is.
  http.set_pre_routing_handler([self, limit](const httplib::Request& req, httplib::Response& res) {
    if (std::optional<FramingError> error = CheckFraming(req, limit)) {
      RefuseAndClose(*error, req, res);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method != "POST" || req.has_header("Content-Length") ||
        req.has_header("Transfer-Encoding")) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    self->Handle(req, res);
    return httplib::Server::HandlerResponse::Handled;
  });
  for (auto method : {&httplib::Server::Get, &httplib::Server::Post, &httplib::Server::Put,
                      &httplib::Server::Delete, &httplib::Server::Patch}) {
    (http.*method)(".*", handler);
  }
  const bool bound = options.port == 0
                         ? (server->port_ = http.bind_to_any_port(options.address)) > 0
                         : http.bind_to_port(options.address, options.port);
  if (!bound) {
    return absl::UnavailableError(absl::StrCat(
        "cannot bind the REST port ", options.address, ":", options.port,
        ": the address is in use (another groved?) or not available on this host"));
  }
  if (options.port != 0) server->port_ = options.port;
  server->listener_ = std::thread([self] { self->server_->listen_after_bind(); });
  return server;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (server_ == nullptr) return;
  server_->stop();
  if (listener_.joinable()) listener_.join();
  server_.reset();
}

void HttpServer::Handle(const httplib::Request& request, httplib::Response& response) {
  absl::StatusOr<RestRoute> route = ParseRestRoute(request.method, request.path);
  if (!route.ok()) {
    SetStatus(response, route.status());
    return;
  }
  CallRecord record;
  record.method = route->method;
  if (!route->model.empty()) record.model_label = ModelLabel(runtime_, route->model);
  runtime_->metrics().InflightRequests(record.method, 1);
  const absl::Status status =
      Serve(runtime_, authorizer_, options_, request, *route, response, &record);
  RecordFinishedCall(runtime_, record.model_label, record.method, status.code(), record.start,
                     record.observe_latency, record.op, record.resolved);
  runtime_->metrics().InflightRequests(record.method, -1);
}

}  // namespace grove::server
