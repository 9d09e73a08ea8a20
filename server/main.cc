// groved: serves the models of a model repository over gRPC (native grove.v1 API, KServe v2 /
// Triton FIL tensors, health, reflection) and KServe v2 REST, with Prometheus metrics. Flags are documented in
// docs/operations.md; this file only turns them into ServerOptions and waits for SIGTERM/SIGINT.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/common/cpus.h"
#include "core/common/log.h"
#include "core/common/mutex_mode.h"
#include "core/common/thread_priority.h"
#include "core/registry/model_config.h"
#include "server/server.h"

ABSL_FLAG(std::string, model_repository, "", "model repository directory (required)");
ABSL_FLAG(std::string, grpc_address, "0.0.0.0",
          "gRPC listening address (0.0.0.0: every interface, 127.0.0.1: this host only)");
ABSL_FLAG(int, grpc_port, 8001, "gRPC port (0: ephemeral)");
ABSL_FLAG(std::string, metrics_address, "0.0.0.0",
          "metrics listening address (0.0.0.0: every interface)");
ABSL_FLAG(int, metrics_port, 8002, "Prometheus metrics port (0: ephemeral, -1: off)");
ABSL_FLAG(std::string, http_address, "0.0.0.0",
          "KServe v2 REST listening address (0.0.0.0: every interface)");
ABSL_FLAG(int, http_port, 8000,
          "KServe v2 REST port, Triton's HTTP API (0: ephemeral, -1: off); TLS and access control "
          "as on the gRPC port");
ABSL_FLAG(int, http_threads, 64,
          "REST connections open at once, 1..1024, each with a worker thread. A connection that "
          "has waited 50 ms for a worker has an idle kept-alive connection closed for it, or else "
          "one that has been idle or sending its request head for 1 s or more; up to as many more "
          "wait to be accepted");
ABSL_FLAG(int, http_timeout_seconds, 60,
          "REST: a request must arrive whole (head and body) within this long of its first byte, "
          "else it is answered 408 and its connection closed; writing an answer has as long. "
          "1..3600");
ABSL_FLAG(int, http_keep_alive_seconds, 60,
          "REST: an idle kept-alive connection is closed after this long, 1..3600");
ABSL_FLAG(int64_t, http_max_json_body_mb, 16,
          "REST: largest JSON request body, or JSON part of a body with binary tensors, MiB "
          "(1..2048; larger ones are answered 413; --max_message_bytes bounds every body). A JSON "
          "body is admitted against --max_request_memory_mb at 24 bytes per byte, what parsing "
          "and answering it costs at most");
ABSL_FLAG(std::string, port_file, "",
          "write {\"grpc_port\":N,\"metrics_port\":M,\"http_port\":H} here once bound and "
          "loaded");
ABSL_FLAG(std::string, tls_cert_file, "", "PEM server certificate chain: serve TLS");
ABSL_FLAG(std::string, tls_key_file, "", "PEM server private key");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA bundle: mutual TLS (clients must present a certificate signed by it)");
ABSL_FLAG(std::string, auth_token_file, "",
          "bearer tokens, one `ROLE TOKEN` per line (ROLE infer or admin): every RPC but health "
          "and reflection then needs the metadata `authorization: Bearer TOKEN`");
ABSL_FLAG(std::string, tls_client_roles_file, "",
          "with mutual TLS: client certificate common names, one `ROLE NAME` per line, that grant "
          "ROLE (infer or admin) to callers presenting that certificate");
ABSL_FLAG(int, auth_poll_seconds, 5,
          "re-read --auth_token_file / --tls_client_roles_file when they change (0: never)");
ABSL_FLAG(int64_t, max_message_bytes, 0, "gRPC message size limit (0: automatic)");
ABSL_FLAG(int, max_concurrent_streams, 1024,
          "calls in flight per client connection (1..1048576); beyond it a client's further calls "
          "wait on the client's side (HTTP/2 flow control) instead of piling up in the server");
ABSL_FLAG(int, grpc_threads, 0,
          "threads that receive, admit and answer Predict, Explain and ModelInfer, each draining a "
          "gRPC completion queue of its own; a short call that finds the engines idle is computed "
          "on the thread that received it. 1..64 (0: one per hardware thread of the host, at most "
          "64); the other RPCs run on gRPC's callback threads");
ABSL_FLAG(int, repository_poll_seconds, 5, "repository re-scan interval (0: no file watching)");
ABSL_FLAG(bool, model_control, false,
          "allow the LoadModel / UnloadModel RPCs (off: they answer UNIMPLEMENTED). With "
          "--auth_token_file or --tls_client_roles_file they need role admin, without them anyone "
          "who reaches the gRPC port may use them");
ABSL_FLAG(bool, shared_memory, false,
          "let clients on this host register POSIX shared memory regions (Triton's system shared "
          "memory extension, grove.v1 RegisterSharedMemory) that requests read rows from and write "
          "results into (off: registering answers UNIMPLEMENTED). With --auth_token_file or "
          "--tls_client_roles_file registering needs role admin");
ABSL_FLAG(int64_t, shared_memory_max_region_mb, 4096,
          "largest shared memory region a client may register, MiB (1..2^26)");
ABSL_FLAG(int64_t, shared_memory_max_total_mb, 16384,
          "shared memory mapped at once over every region, MiB (at least the largest region, at "
          "most 2^28); regions unregistered while requests use them count until those finish");
ABSL_FLAG(int, shared_memory_max_regions, 256,
          "shared memory regions mapped at once, 1..65536 (each holds a file descriptor)");
ABSL_FLAG(bool, strict_readiness, true, "server ready only when every model is ready");
ABSL_FLAG(std::string, default_model_config, "",
          "JSON file with server-wide defaults of every model's config.json");
ABSL_FLAG(bool, use_gpu, true, "let engines use visible GPUs (CUDA builds)");
ABSL_FLAG(int, compute_threads, 0, "CPU engine threads, 0..4096 (0: one per hardware thread)");
ABSL_FLAG(int, batch_threads, 0, "threads executing batches, 1..1024 (0: half the host's cores, 2 to 8)");
ABSL_FLAG(int64_t, max_queue_wait_ms, 10000,
          "refuse (RESOURCE_EXHAUSTED) a call when the work queued ahead of it would take longer "
          "than this at the engine's measured rate (1..3600000); calls whose deadline the queue "
          "cannot meet are refused as well");
ABSL_FLAG(int64_t, compute_chunk_ms, 20,
          "engine time of one chunk of a running batch (1..10000): between chunks, rows of "
          "callers that left are not computed");
ABSL_FLAG(int64_t, inline_compute_us, 100,
          "a call that finds its queue empty and the engines idle is computed on the gRPC thread "
          "that received it (no hand-off to a batch thread and back) when its expected engine time "
          "is at most this many microseconds (0..10000; 0: every call goes to a batch thread)");
ABSL_FLAG(int64_t, max_request_memory_mb, 2048,
          "memory that admitted requests may hold together, converted rows and results "
          "(1..1073741824 MiB); beyond it calls are refused with RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, host_buffer_mb, 256,
          "buffers kept for large requests' rows and for batches merged from several requests, "
          "page-locked when a GPU is used so that rows reach it without a staging copy "
          "(0..1048576 MiB; 0: none kept)");
ABSL_FLAG(std::string, compute_priority, "normal",
          "scheduling priority of the threads that compute batches: normal, low (nice 19) or idle "
          "(SCHED_IDLE). low and idle let RPC threads (admission, refusals) run ahead of compute "
          "when compute saturates the cores; use them only where groved owns its cores");
ABSL_FLAG(std::string, calibration_cache_dir, "", "where GPU engines cache their calibration");
ABSL_FLAG(int, shutdown_delay_seconds, 0,
          "after SIGTERM, report NOT_SERVING and keep serving this long");
ABSL_FLAG(int, shutdown_grace_seconds, 30,
          "then stop accepting (gRPC and REST; idle REST connections are closed) and wait this "
          "long for in-flight calls; calls left then are cancelled (a REST one is answered 503) "
          "and the connections closed");
ABSL_FLAG(std::string, log_format, "text", "text or json");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning, error");

namespace {

int Fail(const std::string& message) {
  GROVE_LOG(ERROR) << "groved cannot start" << grove::KV("error", message);
  return 2;
}

// A MiB flag's bytes, saturated before the shift so that an absurd value fails the options'
// validation instead of overflowing; a negative one is 0.
int64_t MibToBytes(int64_t mb) {
  return mb > (int64_t{1} << 40) ? INT64_MAX : std::max<int64_t>(mb, 0) << 20;
}

}  // namespace

int main(int argc, char** argv) {
  // Every thread inherits this mask; the main thread takes the signals with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Debian's Abseil is built with Mutex deadlock detection on, which records every lock in a global
  // graph (GraphCycles, a visible share of a small call's CPU). Tests keep it on.
  grove::DisableMutexDeadlockDetection();
  // Request and response buffers of large calls (MBs) would otherwise be mmap'd and unmapped per
  // call, and every call would fault in and zero its pages again: keep them on the heap for reuse
  // (docs/benchmarks/archive.md, 2026-11-25 15:23 UTC).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);

  // Every flag is defined in this file. Abseil's --help lists only the flags of a file named after
  // the program (it printed "No flags matched"), and its --version says only whether NDEBUG is set.
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "server/main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.normalize_filename = [](absl::string_view path) {  // not the build machine's path
    const size_t at = path.rfind("server/");
    return std::string(at == absl::string_view::npos ? path : path.substr(at));
  };
  usage.version_string = [] {
#if defined(GROVE_HAVE_CUDA)
    const char* cuda = "yes";
#else
    const char* cuda = "no";
#endif
    return absl::StrCat("groved ", GROVE_VERSION, " (CUDA engines: ", cuda, ")\n");
  };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "serves tree-ensemble predictions and SHAP explanations over gRPC and KServe v2 REST.\n"
      "  groved --model_repository=DIR [--grpc_port=8001] [--http_port=8000] [--metrics_port=8002]\n"
      "         [--auth_token_file=FILE] [--model_control] [--shared_memory]\n"
      "See docs/operations.md.");
  absl::ParseCommandLine(argc, argv);

  const std::string log_format = absl::GetFlag(FLAGS_log_format);
  if (log_format == "json") {
    grove::SetLogFormat(grove::LogFormat::kJson);
  } else if (log_format != "text") {
    return Fail("--log_format must be text or json");
  }
  const std::string level = absl::GetFlag(FLAGS_log_level);
  if (level == "debug") {
    grove::SetMinLogSeverity(grove::LogSeverity::kDebug);
  } else if (level == "info") {
    grove::SetMinLogSeverity(grove::LogSeverity::kInfo);
  } else if (level == "warning") {
    grove::SetMinLogSeverity(grove::LogSeverity::kWarning);
  } else if (level == "error") {
    grove::SetMinLogSeverity(grove::LogSeverity::kError);
  } else {
    return Fail("--log_level must be debug, info, warning or error");
  }

  grove::server::ServerOptions o;
  o.runtime.model_repository = absl::GetFlag(FLAGS_model_repository);
  if (o.runtime.model_repository.empty()) return Fail("--model_repository is required");
  const std::string defaults = absl::GetFlag(FLAGS_default_model_config);
  if (!defaults.empty()) {
    absl::StatusOr<grove::registry::ModelConfig> config =
        grove::registry::LoadModelConfigFile(defaults, grove::registry::ModelConfig{});
    if (!config.ok()) return Fail(std::string(config.status().message()));
    o.runtime.default_config = *config;
  }
  o.runtime.use_gpu = absl::GetFlag(FLAGS_use_gpu);
  o.runtime.compute_threads = absl::GetFlag(FLAGS_compute_threads);
  if (o.runtime.compute_threads < 0 || o.runtime.compute_threads > 4096) {
    return Fail("--compute_threads must be 0..4096");
  }
  // Bounds of these are checked once, by serving::ValidateServingOptions when the server starts.
  grove::serving::ServingOptions& serving = o.runtime.serving;
  const int threads = absl::GetFlag(FLAGS_batch_threads);
  serving.batch_threads =
      threads != 0 ? threads
                   : grove::serving::DefaultBatchThreads(grove::UsableCpus());
  o.runtime.calibration_cache_dir = absl::GetFlag(FLAGS_calibration_cache_dir);
  serving.max_queue_wait = absl::Milliseconds(absl::GetFlag(FLAGS_max_queue_wait_ms));
  serving.chunk_target = absl::Milliseconds(absl::GetFlag(FLAGS_compute_chunk_ms));
  serving.inline_compute = absl::Microseconds(absl::GetFlag(FLAGS_inline_compute_us));
  serving.memory_budget_bytes = MibToBytes(absl::GetFlag(FLAGS_max_request_memory_mb));
  // Saturated as MibToBytes does, but a negative value stays negative (-1);
  // serving::ValidateHostBufferOptions checks the bounds when the server starts.
  const int64_t host_buffer_mb = absl::GetFlag(FLAGS_host_buffer_mb);
  o.runtime.host_buffer_bytes = host_buffer_mb < 0                  ? -1
                                 : host_buffer_mb > (int64_t{1} << 40) ? INT64_MAX
                                                                       : host_buffer_mb << 20;
  std::optional<grove::ThreadPriority> priority =
      grove::ParseThreadPriority(absl::GetFlag(FLAGS_compute_priority));
  if (!priority) return Fail("--compute_priority must be normal, low or idle");
  serving.compute_priority = *priority;
  o.grpc_address = absl::GetFlag(FLAGS_grpc_address);
  o.grpc_port = absl::GetFlag(FLAGS_grpc_port);
  o.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o.port_file = absl::GetFlag(FLAGS_port_file);
  o.http.address = absl::GetFlag(FLAGS_http_address);
  o.http.port = absl::GetFlag(FLAGS_http_port);
  o.http.threads = absl::GetFlag(FLAGS_http_threads);
  o.http.request_timeout = absl::Seconds(absl::GetFlag(FLAGS_http_timeout_seconds));
  o.http.keep_alive_timeout = absl::Seconds(absl::GetFlag(FLAGS_http_keep_alive_seconds));
  const int64_t json_mb = absl::GetFlag(FLAGS_http_max_json_body_mb);
  if (json_mb < 1 || json_mb > 2048) return Fail("--http_max_json_body_mb must be 1..2048");
  o.http.max_json_body_bytes = json_mb << 20;
  o.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  o.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  o.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  o.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  o.tls_client_roles_file = absl::GetFlag(FLAGS_tls_client_roles_file);
  o.auth_poll = absl::Seconds(absl::GetFlag(FLAGS_auth_poll_seconds));
  o.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  o.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  if (o.max_concurrent_streams < 1 || o.max_concurrent_streams > (1 << 20)) {
    return Fail("--max_concurrent_streams must be 1..1048576");
  }
  // Bounds checked when the server starts (0..64).
  o.grpc_threads = absl::GetFlag(FLAGS_grpc_threads);
  o.repository_poll = absl::Seconds(absl::GetFlag(FLAGS_repository_poll_seconds));
  o.model_control = absl::GetFlag(FLAGS_model_control);
  // Bounds of these are checked once, by serving::ValidateSharedMemoryOptions when the server
  // starts.
  o.runtime.shared_memory_enabled = absl::GetFlag(FLAGS_shared_memory);
  o.runtime.shared_memory.max_region_bytes =
      MibToBytes(absl::GetFlag(FLAGS_shared_memory_max_region_mb));
  o.runtime.shared_memory.max_total_bytes =
      MibToBytes(absl::GetFlag(FLAGS_shared_memory_max_total_mb));
  o.runtime.shared_memory.max_regions = absl::GetFlag(FLAGS_shared_memory_max_regions);
  o.strict_readiness = absl::GetFlag(FLAGS_strict_readiness);
  o.shutdown_delay = absl::Seconds(absl::GetFlag(FLAGS_shutdown_delay_seconds));
  o.shutdown_grace = absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds));
  if (o.grpc_port < 0 || o.grpc_port > 65535) return Fail("--grpc_port must be 0..65535");
  if (o.metrics_port < -1 || o.metrics_port > 65535) {
    return Fail("--metrics_port must be -1..65535");
  }
  if (o.http.port < -1 || o.http.port > 65535) return Fail("--http_port must be -1..65535");
  if (o.shutdown_delay < absl::ZeroDuration() || o.shutdown_grace < absl::ZeroDuration() ||
      o.repository_poll < absl::ZeroDuration() || o.auth_poll < absl::ZeroDuration()) {
    return Fail("durations must not be negative");
  }

  absl::StatusOr<std::unique_ptr<grove::server::GroveServer>> server =
      grove::server::GroveServer::Start(o);
  if (!server.ok()) return Fail(std::string(server.status().message()));

  int sig = 0;
  sigwait(&signals, &sig);
  GROVE_LOG(INFO) << "shutdown requested" << grove::KV("signal", sig == SIGTERM ? "SIGTERM"
                                                                                : "SIGINT");
  (*server)->Shutdown();
  server->reset();
  return 0;
}
