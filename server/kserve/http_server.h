// groved's KServe v2 REST front end (Triton's HTTP port, 8000 by default): the routes of
// server/kserve/kserve_rest.h on an embedded HTTP/1.1 server, answering through the same operations as
// gRPC (server/kserve/kserve_ops.h), with the same access control (server/grpc/auth.h's roles; bearer tokens in
// the `Authorization` header, client certificate common names with mutual TLS) and the same
// admission (queues, memory budget, response-size limit), recorded in the same metrics.
//
// HTTP library: cpp-httplib (Debian's libcpp-httplib-dev 0.11, built against the system OpenSSL).
// Compared: CivetWeb (already in the process through prometheus-cpp) crashes on every TLS
// connection in Debian 12 (it loads OpenSSL 3 by dlopen and calls SSL_get_peer_certificate, which
// OpenSSL 3 no longer exports: a null function pointer); libmicrohttpd does TLS through GnuTLS only
// (a second TLS stack beside gRPC's OpenSSL); Boost.Beast is asynchronous and the most scalable,
// at the price of far more code and Boost 1.74. cpp-httplib is maintained (frequent releases,
// MIT, Debian security updates), parses HTTP/1.1 and serves TLS / mutual TLS from PEM files as
// gRPC does here.
//
// What cpp-httplib 0.11 does not bound, groved does around it. Debian builds it as a shared
// library, so its compile-time limits (CPPHTTPLIB_HEADER_MAX_LENGTH and the like) are fixed in the
// library: a line is read whole before its length is checked, the number of header fields and a
// chunked body are not bounded, a timeout bounds one read, and an idle kept-alive connection holds
// its worker until its keep-alive timeout whatever the server is doing. So groved owns each
// connection (it overrides the server's per-connection entry point and hands cpp-httplib a stream
// of its own to parse from): it reads the socket itself, non-blocking, and
//   * checks the request head byte by byte as it arrives (server/http/http_head.h: line length, field
//     count, head size) and answers 414 / 431 before it keeps more than the bounds;
//   * holds every request to one deadline (`request_timeout`) from its first byte to its last, and
//     every response to one for writing it (408 when the request did not arrive in time);
//   * checks the route and the credentials from the headers, and admits the body against the
//     request memory budget (413 above the limits, 429 when the budget is spent), before reading
//     any of the body; a chunked body is admitted as it arrives;
//   * serves at most `threads` connections, each with a worker thread: when a connection has
//     waited 50 ms for a worker, an idle kept-alive connection is closed for it, or else one that
//     has been idle or sending its request head for a second or more (slow clients cannot hold
//     every worker); at most `threads` more wait accepted, and beyond that the kernel's listen
//     queue;
//   * on shutdown stops accepting, closes idle connections, closes each other one after its
//     answer, and at the grace deadline cancels the calls left (answered 503) and closes every
//     connection.
// A worker reads a request, waits for the call's result (the batcher computes it; the worker holds
// no lock) and writes the answer. At the request rates a 2-core server reaches, the pool is not the
// limit (docs/benchmarks/serving.md, REST load test). An event-driven server (Boost.Beast, the one in
// Debian 12 with OpenSSL) would hold no thread per connection; with the bounds above a connection
// holds one only while it is being served or nobody waits for it, which is what the pool needs, so
// the port keeps cpp-httplib's parser rather than a rewrite.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/auth/authorizer.h"
#include "server/http/http_head.h"
#include "server/runtime.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace grove::server {

class ConnectionTable;

struct HttpOptions {
  std::string address = "0.0.0.0";
  int port = 8000;    // 0: ephemeral
  int threads = 64;   // connections open at once, each with a worker (1..1024)
  int64_t max_body_bytes = 64 << 20;  // larger request bodies are refused (413)
  // A JSON body (one without binary tensors) costs the parser many times its size before the model
  // and shape are checked: it has a limit of its own (at most max_body_bytes), and is admitted
  // against the memory budget at kJsonBodyCost (server/http/http_stream.h) times its size.
  int64_t max_json_body_bytes = 16 << 20;
  HeadLimits head;  // the request line and header fields
  // Receiving one request, from its first byte to its last; and writing one response.
  absl::Duration request_timeout = absl::Seconds(60);
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
  // The first phase of Stop, which returns at once: stops accepting, closes idle connections and
  // makes every other connection close after its answer. Idempotent.
  void BeginStop();
  // BeginStop, then waits until `deadline` for the requests being served; at the deadline
  // cancels the calls left (their clients are answered 503), shuts down the connections left
  // shortly after, and joins the workers. Idempotent.
  void Stop(absl::Time deadline = absl::InfiniteFuture());

 private:
  HttpServer(const HttpOptions& options, Runtime* runtime, const auth::Authorizer* authorizer);
  void Handle(const httplib::Request& request, httplib::Response& response);

  const HttpOptions options_;
  Runtime* const runtime_;
  const auth::Authorizer* const authorizer_;
  std::unique_ptr<ConnectionTable> table_;  // outlives server_
  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  std::shared_ptr<absl::Notification> listener_done_;
  int port_ = 0;
};

}  // namespace grove::server
