// Grove's C++ client library: calls a running `groved` over gRPC (native API grove.v1.Grove, see
// proto/grove/v1/grove.proto and docs/api.md; readiness through inference.GRPCInferenceService).
//
// Rows go out as a dense row-major float32 (or float64) matrix (NaN = missing) in the raw form
// (Matrix.raw_f32 / raw_f64: little-endian bytes, no per-value encoding); results come back as
// dense row-major float32 matrices whose row r belongs to input row r (raw_f32, which groved sends
// for raw rows; the repeated `values` of older servers are read as well). Every call takes an optional
// timeout (the gRPC deadline); server errors come back unchanged as absl::Status with the gRPC
// code and message (NOT_FOUND, INVALID_ARGUMENT, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED,
// UNAVAILABLE, ...).
//
//   auto client = grove::client::GroveClient::Create({.target = "localhost:8001"});
//   grove::client::PredictParams p{.model = "fraud"};
//   absl::StatusOr<grove::client::PredictResult> r = (*client)->Predict(p, rows, n, features);
//
// Clients on groved's host may pass rows and results through POSIX shared memory instead
// (SharedMemoryBuffer, RegisterSharedMemory, PredictSharedMemory; docs/api.md "Shared memory").
//
// Thread-safe: one GroveClient may be shared by any number of threads (it holds one channel and
// one connection of its own, never shared with other clients; create several clients for several
// connections).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grove/v1/grove.grpc.pb.h"
#include "grove/v1/grove.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/status.h"
#include "inference/grpc_service.grpc.pb.h"

namespace grove::client {

struct ClientOptions {
  std::string target;  // "host:port" (any gRPC target: "dns:///h:p", "unix:/path", ...)
  // TLS: `tls` (or any file below) switches to a TLS channel. `tls_ca_file`: PEM roots to verify
  // the server with (empty: the system roots). `tls_cert_file` + `tls_key_file`: client
  // certificate for mutual TLS. `tls_server_name`: override of the name checked in the server's
  // certificate (tests with certificates issued for "localhost", ...).
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_server_name;
  // Bearer token sent with every call as the metadata `authorization: Bearer TOKEN` (groved
  // --auth_token_file); empty: none. The `grove` CLI fills it from --token or $GROVE_TOKEN. Use
  // TLS to keep it secret on the wire.
  std::string token;
  // Largest message sent or received, bytes (the default gRPC receive limit of 4 MiB is too
  // small for large batches).
  int64_t max_message_bytes = int64_t{1} << 30;
  // Deadline of calls whose CallOptions give none; InfiniteDuration = none.
  absl::Duration default_timeout = absl::InfiniteDuration();
};

struct CallOptions {
  // Deadline of this call, relative to its start; ZeroDuration = the client's default_timeout.
  absl::Duration timeout = absl::ZeroDuration();
};

// Dense row-major float32 matrix: element (r, c) is values[r * cols + c].
struct Matrix {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<float> values;
  float At(int64_t r, int64_t c) const { return values[static_cast<size_t>(r * cols + c)]; }
};

enum class Output { kMargin, kPrediction, kLeaf };

struct PredictParams {
  std::string model;
  int64_t version = 0;          // 0: the highest ready version
  std::vector<Output> outputs;  // empty: the model's default outputs (normally prediction)
  int32_t iteration_begin = 0;  // boosting rounds [begin, end); end 0 = to the last round
  int32_t iteration_end = 0;
  // Rows as Matrix.raw_f32 / raw_f64 (a groved whose ModelMetadata.raw_tensors is set); false: the
  // repeated values every groved reads (older servers drop the raw fields and see no rows).
  bool raw_rows = true;
};

struct PredictResult {
  int64_t version = 0;  // the version that answered
  Matrix margin;        // [rows, num_outputs], when asked for
  Matrix prediction;    // [rows, prediction_width]
  Matrix leaf;          // [rows, trees in range]
};

struct ExplainParams {
  std::string model;
  int64_t version = 0;
  bool interactions = false;  // SHAP interaction values as well
  int32_t top_k = 0;          // > 0: the k features with the largest |SHAP| per row and output
  bool omit_values = false;   // with top_k: no full SHAP matrix
  int32_t iteration_begin = 0;
  int32_t iteration_end = 0;
  bool raw_rows = true;       // as PredictParams::raw_rows
  // Path-dependent (default) or interventional SHAP over the model's background on the server,
  // and (interventional) the output space explained.
  grove::v1::ExplainMethod method = grove::v1::EXPLAIN_METHOD_PATH_DEPENDENT;
  grove::v1::OutputSpace output_space = grove::v1::OUTPUT_SPACE_MARGIN;
  // Shapley (SHAP) or Banzhaf values.
  grove::v1::Attribution attribution = grove::v1::ATTRIBUTION_SHAPLEY;
  // ExplainRequest.residuals: ExplainResult.residuals and residual_arithmetic as well.
  bool residuals = false;
  // Feature groups (ExplainRequest.groups); empty: the model's own, or its features.
  std::vector<grove::v1::FeatureGroup> groups;
};

struct ExplainResult {
  int64_t version = 0;
  int32_t num_features = 0;  // F
  int32_t num_outputs = 0;   // K
  // [rows, K * (F + 1)]: per output, F contributions then the bias (XGBoost pred_contribs layout).
  Matrix values;
  std::vector<float> bias;  // [K]
  // [rows, K * (F + 1) * (F + 1)] with `interactions` (XGBoost pred_interactions layout).
  Matrix interactions;
  // With top_k: [rows, K, k] feature indices and SHAP values, by |value| descending.
  int32_t top_k = 0;
  std::vector<int32_t> top_features;
  std::vector<float> top_values;
  // With ExplainParams::residuals: [rows, K], per row and output the values' and bias' sum minus
  // the model's output, and how the server computed them.
  Matrix residuals;
  std::string residual_arithmetic;
};

// Rows a caller wrote into a registered shared memory region (GroveClient::RegisterSharedMemory):
// num_rows x num_cols little-endian float32 (float64 with `float64`) values, row-major, starting
// at byte `offset` of the region.
struct SharedMemoryRows {
  std::string region;
  uint64_t offset = 0;
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  bool float64 = false;
};

// A POSIX shared memory object created by this process (shm_open with O_CREAT | O_EXCL), mapped
// read-write: where a client on groved's host puts rows for the server to read and where the
// server writes results (register it with GroveClient::RegisterSharedMemory). Unmapped and
// unlinked (shm_unlink) when destroyed; unregister it from the server first. Not thread-safe
// (its bytes are the caller's to share).
class SharedMemoryBuffer {
 public:
  // `key`: "/name" (see grove.proto RegisterSharedMemoryRequest.key); `bytes` > 0; `mode`: the
  // object's permissions (groved's user must be able to read and write it: the default suits a
  // groved running as the same user). ALREADY_EXISTS when the key is taken; errno's meaning
  // otherwise.
  static absl::StatusOr<std::unique_ptr<SharedMemoryBuffer>> Create(const std::string& key,
                                                                    int64_t bytes,
                                                                    int mode = 0600);
  ~SharedMemoryBuffer();
  SharedMemoryBuffer(const SharedMemoryBuffer&) = delete;
  SharedMemoryBuffer& operator=(const SharedMemoryBuffer&) = delete;

  const std::string& key() const { return key_; }
  char* data() const { return data_; }  // page-aligned
  int64_t size() const { return size_; }

 private:
  SharedMemoryBuffer(std::string key, char* data, int64_t size)
      : key_(std::move(key)), data_(data), size_(size) {}
  std::string key_;
  char* data_;
  int64_t size_;
};

// The float32 result a response Matrix says was written into shared memory (its
// shared_memory_f32), copied out of `output_data`: this process's mapping of the first byte of
// `output` (the request's output_shared_memory). A Matrix without shared_memory_f32 is read as
// FromProto reads it. INTERNAL when it names another region or bytes outside `output`.
absl::StatusOr<Matrix> ReadSharedResult(const grove::v1::Matrix& m,
                                        const grove::v1::SharedMemoryRange& output,
                                        const char* output_data);

// Summary of one model, from ListModels.
struct ModelInfo {
  std::string name;
  bool ready = false;
  std::vector<grove::v1::VersionStatus> versions;
};

// Converts a gRPC status to an absl::Status with the same code and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

// The value types GroveClient sends rows in: float32 or float64.
template <typename T>
concept RowValue = std::is_same_v<T, float> || std::is_same_v<T, double>;

class GroveClient {
 public:
  // Creates the channel (does not connect: the first call or WaitForReady does). Fails only on
  // bad options (unreadable TLS files, a token with characters outside visible ASCII).
  static absl::StatusOr<std::unique_ptr<GroveClient>> Create(const ClientOptions& options);

  // Predictions for `num_rows` rows of `num_cols` values at `rows` (row-major): float32 values,
  // or float64 ones (sent as Matrix.raw_f64: the server converts them to the float32 rows that
  // route as the model's library routes the doubles -- LightGBM compares doubles).
  template <RowValue T>
  absl::StatusOr<PredictResult> Predict(const PredictParams& params, const T* rows,
                                        int64_t num_rows, int64_t num_cols,
                                        const CallOptions& call = {});
  // SHAP values (and optionally interactions / top-k) for the rows, as Predict takes them.
  template <RowValue T>
  absl::StatusOr<ExplainResult> Explain(const ExplainParams& params, const T* rows,
                                        int64_t num_rows, int64_t num_cols,
                                        const CallOptions& call = {});

  // Bulk explanations over one ExplainStream call. `next(&rows, &n)` is called for each message
  // to send: it fills `rows` with n rows of `num_cols` values and returns true, or returns false
  // at the end. `done(sequence, result)` receives the answers in order (sequence = 0, 1, ...,
  // one per message). At most `window` messages are in flight, which bounds the memory of both
  // sides. Returns the stream's final status (the first error ends the stream).
  using NextRowsFn = std::function<bool(std::vector<float>* rows, int64_t* num_rows)>;
  using ExplainDoneFn = std::function<absl::Status(uint64_t sequence, ExplainResult&& result)>;
  absl::Status ExplainStream(const ExplainParams& params, int64_t num_cols, const NextRowsFn& next,
                             const ExplainDoneFn& done, int window = 4,
                             const CallOptions& call = {});
  // The same with float64 rows (Matrix.raw_f64).
  using NextRowsF64Fn = std::function<bool(std::vector<double>* rows, int64_t* num_rows)>;
  absl::Status ExplainStream(const ExplainParams& params, int64_t num_cols,
                             const NextRowsF64Fn& next, const ExplainDoneFn& done, int window = 4,
                             const CallOptions& call = {});

  absl::StatusOr<std::vector<ModelInfo>> ListModels(const CallOptions& call = {});
  absl::StatusOr<grove::v1::ModelMetadata> GetModelMetadata(const std::string& model,
                                                            int64_t version = 0,
                                                            const CallOptions& call = {});
  // Model control (needs groved --model_control and, with access control, an admin token):
  // (re)load from the repository, unload.
  absl::StatusOr<ModelInfo> LoadModel(const std::string& model, const CallOptions& call = {});
  absl::Status UnloadModel(const std::string& model, const CallOptions& call = {});

  // Predictions for rows already in shared memory, the results written by the server into
  // `output` (a range of a registered region that shares no byte with the rows) and copied out of
  // `output_data` (this process's mapping of the range's first byte) into the result. Needs a
  // groved on this host with --shared_memory (ModelMetadata.shared_memory).
  absl::StatusOr<PredictResult> PredictSharedMemory(const PredictParams& params,
                                                    const SharedMemoryRows& rows,
                                                    const grove::v1::SharedMemoryRange& output,
                                                    const char* output_data,
                                                    const CallOptions& call = {});

  // System shared memory (groved --shared_memory; register and unregister need an admin token
  // with access control): register bytes [offset, offset + byte_size) of object `key` as `name`;
  // unregister `name` ("" = every region), returning the names removed; the registered regions
  // ("" = all).
  absl::Status RegisterSharedMemory(const std::string& name, const std::string& key,
                                    uint64_t offset, uint64_t byte_size,
                                    const CallOptions& call = {});
  absl::StatusOr<std::vector<std::string>> UnregisterSharedMemory(const std::string& name,
                                                                  const CallOptions& call = {});
  absl::StatusOr<std::vector<grove::v1::SharedMemoryRegion>> SharedMemoryStatus(
      const std::string& name = "", const CallOptions& call = {});

  // KServe v2 readiness (inference.GRPCInferenceService).
  absl::StatusOr<bool> ServerLive(const CallOptions& call = {});
  absl::StatusOr<bool> ServerReady(const CallOptions& call = {});
  absl::StatusOr<bool> ModelReady(const std::string& model, int64_t version = 0,
                                  const CallOptions& call = {});
  // Waits until the server answers ServerReady true, or `timeout` passes (DEADLINE_EXCEEDED).
  absl::Status WaitForReady(absl::Duration timeout);

  // The stubs, for callers that need the raw protocol (async calls, fields not wrapped here).
  grove::v1::Grove::Stub* stub() { return grove_.get(); }
  inference::GRPCInferenceService::Stub* inference_stub() { return inference_.get(); }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // Sets the deadline of `context` from `call` and the client's default timeout, and adds the
  // bearer token: call it on every context used with stub() / inference_stub().
  void Prepare(grpc::ClientContext* context, const CallOptions& call) const;

 private:
  GroveClient(ClientOptions options, std::shared_ptr<grpc::Channel> channel);
  template <typename T>
  absl::Status ExplainStreamImpl(const ExplainParams& params, int64_t num_cols,
                                 const std::function<bool(std::vector<T>*, int64_t*)>& next,
                                 const ExplainDoneFn& done, int window, const CallOptions& call);

  const ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grove::v1::Grove::Stub> grove_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> inference_;
};

// Helpers shared with the CLI and bench: build a native request (rows as raw_f32 / raw_f64) /
// unpack a native response (raw_f32 or values).
// `raw`: Matrix.raw_f32 / raw_f64; otherwise the repeated values / values_f64.
void FillMatrix(const float* rows, int64_t num_rows, int64_t num_cols, bool raw,
                grove::v1::Matrix* out);
void FillMatrix(const double* rows, int64_t num_rows, int64_t num_cols, bool raw,
                grove::v1::Matrix* out);
// A Matrix naming rows in shared memory (shared_memory_f32 / _f64).
void FillMatrix(const SharedMemoryRows& rows, grove::v1::Matrix* out);
Matrix FromProto(const grove::v1::Matrix& m);
grove::v1::ExplainRequest MakeExplainRequest(const ExplainParams& params);
absl::StatusOr<ExplainResult> FromProto(grove::v1::ExplainResponse&& response, int64_t num_rows);

}  // namespace grove::client
