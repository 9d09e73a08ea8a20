// The Open Inference Protocol's operations, independent of the transport: gRPC
// (server/kserve/kserve_service.cc) and HTTP/REST (server/kserve/http_server.cc) both convert their request into
// the protocol's messages (proto/inference/grpc_service.proto), call these, and convert the
// response back, so that both answer the same requests with the same results, bit for bit.
//
// Thread-safe (state lives in the Runtime).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/registry/model_registry.h"
#include "inference/grpc_service.pb.h"
#include "server/call.h"
#include "server/control.h"
#include "server/runtime.h"

namespace grove::server {

// Server metadata: name "grove", the version, the extensions groved serves (Triton's names;
// system_shared_memory when `shared_memory` is on).
void KserveServerMetadata(bool shared_memory, inference::ServerMetadataResponse* response);

// Whether the model (version) serves: NOT_FOUND for an unknown model; ready false while it loads,
// after a failed load or during shutdown.
absl::Status KserveModelReady(Runtime* runtime, const inference::ModelReadyRequest& request,
                              inference::ModelReadyResponse* response);

absl::Status KserveModelMetadata(Runtime* runtime, const inference::ModelMetadataRequest& request,
                                 inference::ModelMetadataResponse* response);

// A configuration synthesised from the model: platform and backend "grove", max_batch_size = the
// model's max_request_rows, input__0 / output__0 / treeshap_output with their types and dims, and
// parameters describing the model (format, objective, link, features, outputs, feature names).
absl::Status KserveModelConfig(Runtime* runtime, const inference::ModelConfigRequest& request,
                               inference::ModelConfigResponse* response);

// Per model version, as Triton answers (Metrics::Statistics): the named version; without a
// version every serving version of the model; without a name every serving version of every
// model. NOT_FOUND / UNAVAILABLE as ModelReady's lookup for an unknown model or version, or a
// model with no serving version.
absl::Status KserveModelStatistics(Runtime* runtime,
                                   const inference::ModelStatisticsRequest& request,
                                   inference::ModelStatisticsResponse* response);

// Every version of every model: READY (serving), LOADING, or UNAVAILABLE with the reason; with
// request.ready only the serving ones. INVALID_ARGUMENT for a repository name other than "".
absl::Status KserveRepositoryIndex(Runtime* runtime, const inference::RepositoryIndexRequest& request,
                                   inference::RepositoryIndexResponse* response);

// What groved cannot honour in a repository load / unload: a repository name other than "", or a
// parameter other than unload's `unload_dependents` (tritonclient always sends it; groved has no
// ensembles, so there are no dependents): "parameter 'config'" etc.; "" when all is supported.
std::string RefusedRepositoryArgument(
    const std::string& repository,
    const google::protobuf::Map<std::string, inference::ModelRepositoryParameter>& parameters,
    ModelControl op);

// Triton's SystemSharedMemoryStatus from the registry: every region of `owner` ("" name) or the
// one named (NOT_FOUND naming it otherwise).
absl::Status KserveSystemSharedMemoryStatus(Runtime* runtime,
                                            const inference::SystemSharedMemoryStatusRequest& request,
                                            const std::string& owner,
                                            inference::SystemSharedMemoryStatusResponse* response);
// What the CUDA shared memory RPCs answer: UNIMPLEMENTED saying that groved maps system shared
// memory only and naming `method`.
absl::Status CudaSharedMemoryUnimplemented(absl::string_view method);

// What a transport learns when an inference has been queued, before any of its work can finish:
// the compute state (to cancel it when the client goes away) and the operation (for metrics).
using InferStarted =
    std::function<void(const std::shared_ptr<CallState>& call, Operation op)>;

// Validates `request`, reserves memory and queues its work, answering into `response`. On OK,
// `started` has run and `done` runs exactly once (on an executor thread, or on this thread before
// the return when the work ran inline) once `response` is complete or failed; on error neither
// runs. `request` and `response` must stay alive until `done` ran. *resolved gets the model
// version and rows as soon as they are known (before any work is queued), also when the call
// then fails. `received_raw`: the raw input contents when the transport received them apart from
// the message (UnaryCall::received_raw_rows), alive as `request`. `principal`: the caller
// (auth::CallerPrincipal), whose shared memory regions the request may name.
absl::Status StartKserveInfer(Runtime* runtime, const inference::ModelInferRequest& request,
                              inference::ModelInferResponse* response, absl::Time deadline,
                              const InferStarted& started, std::function<void(absl::Status)> done,
                              ResolvedCall* resolved, absl::string_view received_raw,
                              const std::string& principal);

}  // namespace grove::server
