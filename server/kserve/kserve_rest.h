// KServe v2 REST (the Open Inference Protocol over HTTP/JSON, as Triton serves it on port 8000):
// the routes, and the conversion between HTTP bodies and the protocol's messages
// (proto/inference/grpc_service.proto), so that the REST front end (server/kserve/http_server.h) calls
// the same operations as gRPC (server/kserve/kserve_ops.h). Pure functions of their arguments: no
// sockets, no shared state; every rule is unit-tested and the request parser is fuzzed
// (tests/fuzz/kserve_rest_request_fuzz.cc).
//
// JSON is parsed strictly: RFC 8259 only (no comments, NaN literals or trailing commas), no
// duplicate keys, no unknown fields, parameter values scalars. JSON has no NaN: a missing value in
// `data` is written `null` (or the tensor sent in binary form). Results in `data` are float32 values
// written with 9 significant digits (they read back bit for bit); a non-finite one is `null`.
// Triton's binary tensor extension: a body whose JSON part is followed by raw tensor bytes, the
// JSON's length given by the Inference-Header-Content-Length header, each binary input's size by
// its `binary_data_size` parameter; outputs are returned in binary when the request asks for it
// (`binary_data` on the output, or `binary_data_output` on the request).
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "inference/grpc_service.pb.h"

namespace grove::server {

inline constexpr const char* kInferHeaderLength = "Inference-Header-Content-Length";

// What a REST request asks for.
enum class RestOp {
  kServerLive,      // GET  /v2/health/live
  kServerReady,     // GET  /v2/health/ready
  kServerMetadata,  // GET  /v2
  kModelMetadata,   // GET  /v2/models/NAME[/versions/V]
  kModelReady,      // GET  /v2/models/NAME[/versions/V]/ready
  kModelInfer,      // POST /v2/models/NAME[/versions/V]/infer
  kModelConfig,     // GET  /v2/models/NAME[/versions/V]/config
  kModelStatistics,       // GET  /v2/models[/NAME[/versions/V]]/stats
  kRepositoryIndex,       // POST /v2/repository/index
  kRepositoryModelLoad,   // POST /v2/repository/models/NAME/load
  kRepositoryModelUnload, // POST /v2/repository/models/NAME/unload
  kSystemSharedMemoryStatus,      // GET  /v2/systemsharedmemory[/region/NAME]/status
  kSystemSharedMemoryRegister,    // POST /v2/systemsharedmemory/region/NAME/register
  kSystemSharedMemoryUnregister,  // POST /v2/systemsharedmemory[/region/NAME]/unregister
  kCudaSharedMemory,  // /v2/cudasharedmemory[/region/NAME]/status|register|unregister: 501
};

struct RestRoute {
  RestOp op = RestOp::kServerLive;
  std::string model;    // URL-decoded by the HTTP server
  std::string version;  // "" = the highest ready version
  std::string region;   // shared memory routes: "" = every region (status, unregister)
  const char* method = "";  // the gRPC method's name (metrics, access control messages)
};

// Routes `method` `path`. NOT_FOUND naming the path for one groved does not serve (with the
// routes it serves); INVALID_ARGUMENT for a known path with the wrong HTTP method.
absl::StatusOr<RestRoute> ParseRestRoute(absl::string_view method, absl::string_view path);

// Parses an infer request body into `request` (model name and version are the route's).
// `header_length` is Inference-Header-Content-Length, -1 when absent (the whole body is JSON).
// An input carries `data`, `binary_data_size` or the shared memory parameters
// (shared_memory_region ...), exactly one. INVALID_ARGUMENT naming the field and the rule for
// anything else.
//
// Numbers in JSON `data` are counted as they are converted: an input's data may hold no more than
// its shape declares, and all inputs together no more than `max_values` (the server passes the
// model's max_request_rows x features), so a body of many numbers is refused (INVALID_ARGUMENT
// naming the input and the bound) before it is stored.
absl::Status ParseRestInferRequest(absl::string_view body, int64_t header_length,
                                   int64_t max_values, inference::ModelInferRequest* request);

// The response to `request` as a body: JSON, then the binary outputs; *header_length is the JSON
// part's length when some output is binary, -1 otherwise. An output the request put in shared
// memory has neither data nor binary data (its values are in the region). The response's
// parameters (string values) follow the outputs as "parameters".
std::string RestInferResponse(const inference::ModelInferRequest& request,
                              const inference::ModelInferResponse& response,
                              int64_t* header_length);

// The body of a repository request: {"ready": bool} for the index, {"parameters": {...}} for load
// and unload (an empty body is an empty object). INVALID_ARGUMENT naming the field otherwise.
absl::Status ParseRestRepositoryRequest(absl::string_view body, RestOp op,
                                        inference::RepositoryIndexRequest* index,
                                        inference::RepositoryModelLoadRequest* control);

// The body of a system shared memory registration: {"key": string, "offset": integer (optional),
// "byte_size": integer} (Triton's); the region's name is the route's. INVALID_ARGUMENT naming the
// field otherwise.
absl::Status ParseRestSharedMemoryRegister(absl::string_view body,
                                           inference::SystemSharedMemoryRegisterRequest* request);
// [{"name", "key", "offset", "byte_size"}, ...] sorted by name (Triton's status body).
std::string RestSystemSharedMemoryStatus(
    const inference::SystemSharedMemoryStatusResponse& response);

std::string RestServerMetadata(const inference::ServerMetadataResponse& response);
std::string RestModelConfig(const inference::ModelConfig& config);
std::string RestModelStatistics(const inference::ModelStatisticsResponse& response);
std::string RestRepositoryIndex(const inference::RepositoryIndexResponse& response);
std::string RestModelMetadata(const inference::ModelMetadataResponse& response);
// {"error": message}.
std::string RestError(absl::string_view message);

// HTTP status of a canonical code (400 for the argument and precondition errors, 401, 403, 404,
// 429 for RESOURCE_EXHAUSTED, 501, 503, 504, 500).
int HttpStatus(absl::StatusCode code);
// The canonical code counted for an HTTP status groved answers before a request reaches a handler
// (head bounds, framing, credentials, body admission, an unknown route): 400, 411, 413, 414, 415
// and 431 INVALID_ARGUMENT; 408 DEADLINE_EXCEEDED; 429 RESOURCE_EXHAUSTED; otherwise the code
// HttpStatus maps to it (UNKNOWN for none).
absl::StatusCode CodeOfHttpStatus(int status);

}  // namespace grove::server
