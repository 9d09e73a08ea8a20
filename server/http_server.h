// groved's KServe v2 REST front end (Triton's HTTP port, 8000 by default): the routes of
// server/kserve_rest.h on an embedded HTTP/1.1 server, answering through the same operations as
// gRPC (server/kserve_ops.h), with the same access control (server/auth.h's roles; bearer tokens in
// the `Authorization` header, client certificate common names with mutual TLS) and the same
// admission (queues, memory budget, response-size limit), recorded in the same metrics.
//
// HTTP library: cpp-httplib (Debian's libcpp-httplib-dev 0.11, built against the system OpenSSL).
// Compared: CivetWeb (already in the process through prometheus-cpp) crashes on every TLS
// connection in Debian 12 (it loads OpenSSL 3 by dlopen and calls SSL_get_peer_certificate, which
// OpenSSL 3 no longer exports: a null function pointer); libmicrohttpd does TLS through GnuTLS only
// (a second TLS stack beside gRPC's OpenSSL); Boost.Beast is asynchronous and the most scalable,
// at the price of far more code and Boost 1.74. cpp-httplib is maintained (frequent releases,
// MIT, Debian security updates), serves HTTP/1.1 keep-alive and TLS / mutual TLS from PEM files as
// gRPC does here, and bounds what we need: payload size, read/write/keep-alive timeouts, and a
// task queue we supply. Its model is a thread per connection being served: a worker reads a
// request, waits for the call's result (the batcher computes it; the worker holds no lock) and
// writes the answer, so `threads` bounds the connections served at once; at most as many more wait
// accepted in the queue, and beyond that the accept loop waits (the kernel's listen queue holds
// the rest). At the request rates a 2-core server reaches, the pool is not the limit
// (docs/benchmarks/serving.md, REST).
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/auth/authorizer.h"
#include "server/runtime.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace grove::server {

struct HttpOptions {
  std::string address = "0.0.0.0";
  int port = 8000;    // 0: ephemeral
  int threads = 64;   // connections served at once (1..1024)
  int64_t max_body_bytes = 64 << 20;  // larger request bodies are refused (413)
  absl::Duration request_timeout = absl::Seconds(60);     // reading or writing one request
  absl::Duration keep_alive_timeout = absl::Seconds(60);  // an idle kept-alive connection
  // TLS as on the gRPC port (both empty: plain HTTP); a client CA requires client certificates.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  bool model_control = false;  // repository load / unload (--model_control; role admin)
};

// Bounds of the options: INVALID_ARGUMENT naming the flag otherwise.
absl::Status ValidateHttpOptions(const HttpOptions& options);

class HttpServer {
 public:
  // Binds and starts serving. `runtime` and `authorizer` (null: no access control) are not owned
  // and must outlive the server. UNAVAILABLE naming the address when it cannot bind; the TLS
  // files' errors name the file.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpOptions& options,
                                                           Runtime* runtime,
                                                           const auth::Authorizer* authorizer);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Stops accepting, lets the requests being served finish, joins the workers. Idempotent.
  void Stop();

 private:
  HttpServer(const HttpOptions& options, Runtime* runtime, const auth::Authorizer* authorizer);
  void Handle(const httplib::Request& request, httplib::Response& response);

  const HttpOptions options_;
  Runtime* const runtime_;
  const auth::Authorizer* const authorizer_;
  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  int port_ = 0;
};

}  // namespace grove::server
