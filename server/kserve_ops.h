// The Open Inference Protocol's operations, independent of the transport: gRPC
// (server/kserve_service.cc) and HTTP/REST (server/http_server.cc) both convert their request into
// the protocol's messages (proto/inference/grpc_service.proto), call these, and convert the
// response back, so that both answer the same requests with the same results, bit for bit.
//
// Thread-safe (state lives in the Runtime).
#pragma once

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/registry/model_registry.h"
#include "inference/grpc_service.pb.h"
#include "server/runtime.h"

namespace grove::server {

// Server metadata: name "grove", the version, the extensions groved serves.
void KserveServerMetadata(inference::ServerMetadataResponse* response);

// Whether the model (version) serves: NOT_FOUND for an unknown model; ready false while it loads,
// after a failed load or during shutdown.
absl::Status KserveModelReady(Runtime* runtime, const inference::ModelReadyRequest& request,
                              inference::ModelReadyResponse* response);

absl::Status KserveModelMetadata(Runtime* runtime, const inference::ModelMetadataRequest& request,
                                 inference::ModelMetadataResponse* response);

// What a transport learns when an inference has been queued, before any of its work can finish:
// the compute state (to cancel it when the client goes away) and the operation (for metrics).
using InferStarted =
    std::function<void(const std::shared_ptr<CallState>& call, registry::Operation op)>;

// Validates `request`, reserves memory and queues its work, answering into `response`. On OK,
// `started` has run and `done` runs exactly once (on an executor thread, or on this thread before
// the return when the work ran inline) once `response` is complete or failed; on error neither
// runs. `request` and `response` must stay alive until `done` ran.
absl::Status StartKserveInfer(Runtime* runtime, const inference::ModelInferRequest& request,
                              inference::ModelInferResponse* response, absl::Time deadline,
                              const InferStarted& started, std::function<void(absl::Status)> done);

}  // namespace grove::server
