// grove.v1.Grove, Grove's native API (proto/grove/v1/grove.proto). Predict and Explain, the hot
// unary RPCs, are served on groved's completion queues (server/grpc/completion_queues.h calls
// HandlePredict / HandleExplain); every other RPC on the gRPC callback API.
//
// Predict and Explain validate the request, pin the model version, queue one task per operation
// (predict outputs and explanations go to separate queues) and return; the batch executor finishes
// the call. ExplainStream keeps at most kStreamWindow messages of one stream in flight and reads the
// next message only when one is answered, so a fast writer is held back by flow control. Load and
// unload, and shared memory registration, run on the runtime's control thread. Every RPC is first
// admitted by access control (server/grpc/auth.h).
#pragma once

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/auth/authorizer.h"
#include "grove/v1/grove.grpc.pb.h"
#include "server/call.h"
#include "server/runtime.h"

namespace grove::server {

// grove.v1.Grove with Predict and Explain as raw asynchronous methods (requested on completion
// queues, bytes decoded by groved: gRPC's typed asynchronous methods answer a request that cannot
// be decoded with INTERNAL "Unable to parse request", out of reach of the interceptor that names
// the method, server/grpc/rpc_errors.h) and ExplainStream on raw bytes: the service decodes each stream
// message itself, so that one that cannot be decoded ends the stream with INVALID_ARGUMENT naming
// it (gRPC's typed reader reports a decoding failure as a plain end of stream, and the stream
// would end OK).
using GroveServiceBase = grove::v1::Grove::WithRawMethod_Predict<
    grove::v1::Grove::WithRawMethod_Explain<grove::v1::Grove::WithRawCallbackMethod_ExplainStream<
        grove::v1::Grove::WithCallbackMethod_ListModels<grove::v1::Grove::WithCallbackMethod_GetModelMetadata<
            grove::v1::Grove::WithCallbackMethod_LoadModel<
                grove::v1::Grove::WithCallbackMethod_UnloadModel<
                    grove::v1::Grove::WithCallbackMethod_RegisterSharedMemory<
                        grove::v1::Grove::WithCallbackMethod_UnregisterSharedMemory<
                            grove::v1::Grove::WithCallbackMethod_GetSharedMemoryStatus<
                                grove::v1::Grove::Service>>>>>>>>>>;

// Messages of one ExplainStream being computed or waiting to be written at once.
inline constexpr int kStreamWindow = 4;

// Starts one explanation into `response`. On OK, `done` runs exactly once (on an executor thread)
// when `response` is complete or failed, and *call is the compute state (for cancellation); on
// error `done` is not called. `request` and `response` must stay alive until `done` ran.
// *resolved gets the model version and rows as soon as they are known (before any work is
// queued), also when the call then fails. `received_raw_rows`: the rows' raw_f32 when the
// transport received it apart from the message (UnaryCall::received_raw_rows), alive as `request`.
// `principal`: the caller (UnaryCall::principal), whose shared memory regions the request may use.
absl::Status StartExplain(Runtime* runtime, const grove::v1::ExplainRequest& request,
                          grove::v1::ExplainResponse* response, absl::Time deadline,
                          std::function<void(absl::Status)> done,
                          std::shared_ptr<CallState>* call, ResolvedCall* resolved,
                          absl::string_view received_raw_rows, const std::string& principal);

class GroveService final : public GroveServiceBase {
 public:
  // `authorizer`: access control (server/grpc/auth.h), null when none is configured; not owned, must
  // outlive the service. `model_control`: LoadModel/UnloadModel allowed (UNIMPLEMENTED naming
  // --model_control otherwise; checked after access control, so they need role admin as well). A
  // LoadModel / UnloadModel whose deadline passed (or that was cancelled) while it waited for the
  // control thread is answered DEADLINE_EXCEEDED (CANCELLED) and not applied.
  GroveService(Runtime* runtime, const auth::Authorizer* authorizer, bool model_control)
      : runtime_(runtime), authorizer_(authorizer), model_control_(model_control) {}

  // Predict and Explain on any transport: `call` was created for the request (method label
  // "Predict" / "Explain") and is answered exactly once, on this thread or later on the thread that
  // completes its work. `request` and `response` must stay alive until the call was answered (and
  // `response` until it was sent). Never blocks (a short idle call is computed inline).
  void HandlePredict(const grpc::ServerContextBase& context,
                     const grove::v1::PredictRequest& request,
                     grove::v1::PredictResponse* response, UnaryCall* call);
  void HandleExplain(const grpc::ServerContextBase& context,
                     const grove::v1::ExplainRequest& request,
                     grove::v1::ExplainResponse* response, UnaryCall* call);
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ExplainStream(
      grpc::CallbackServerContext* context) override;
  GROVE_UNARY_RPC(grove::v1, ListModels);
  grpc::ServerUnaryReactor* GetModelMetadata(grpc::CallbackServerContext* context,
                                             const grove::v1::GetModelMetadataRequest* request,
                                             grove::v1::ModelMetadata* response) override;
  GROVE_UNARY_RPC(grove::v1, LoadModel);
  GROVE_UNARY_RPC(grove::v1, UnloadModel);
  // Shared memory: register / unregister need the runtime's shared memory on (--shared_memory;
  // UNIMPLEMENTED otherwise) and role admin, and run on the control thread; status needs role
  // infer.
  GROVE_UNARY_RPC(grove::v1, RegisterSharedMemory);
  GROVE_UNARY_RPC(grove::v1, UnregisterSharedMemory);
  grpc::ServerUnaryReactor* GetSharedMemoryStatus(
      grpc::CallbackServerContext* context, const grove::v1::SharedMemoryStatusRequest* request,
      grove::v1::SharedMemoryStatusResponse* response) override;

 private:
  Runtime* const runtime_;
  const auth::Authorizer* const authorizer_;
  const bool model_control_;
};

}  // namespace grove::server
