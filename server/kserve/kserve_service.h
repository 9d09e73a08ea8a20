// inference.GRPCInferenceService: the Open Inference Protocol (KServe v2) as Triton speaks it, with
// the tensor names of Triton's FIL backend (see proto/inference/grpc_service.proto), so that
// tritonclient and KServe clients call groved unchanged. ModelInfer queues its work exactly like the
// native Predict/Explain and answers with raw_output_contents; like them it is served on groved's
// completion queues (server/grpc/completion_queues.h calls HandleModelInfer), every other RPC on the
// gRPC callback API.
#pragma once

#include "core/auth/authorizer.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/call.h"
#include "server/kserve/kserve_ops.h"
#include "server/runtime.h"

namespace grove::server {

// inference.GRPCInferenceService with ModelInfer as a raw asynchronous method (requested on
// completion queues, bytes decoded by groved; see GroveServiceBase in server/grove_v1/grove_service.h for
// why raw) and every other method on the callback API.
namespace kserve_methods {
using S = inference::GRPCInferenceService;
using KserveServiceBase = S::WithCallbackMethod_ServerLive<S::WithCallbackMethod_ServerReady<
    S::WithCallbackMethod_ModelReady<S::WithCallbackMethod_ServerMetadata<
        S::WithCallbackMethod_ModelMetadata<S::WithRawMethod_ModelInfer<
            S::WithCallbackMethod_ModelConfig<S::WithCallbackMethod_ModelStatistics<
                S::WithCallbackMethod_RepositoryIndex<S::WithCallbackMethod_RepositoryModelLoad<
                    S::WithCallbackMethod_RepositoryModelUnload<
                        S::WithCallbackMethod_SystemSharedMemoryStatus<
                            S::WithCallbackMethod_SystemSharedMemoryRegister<
                                S::WithCallbackMethod_SystemSharedMemoryUnregister<
                                    S::WithCallbackMethod_CudaSharedMemoryStatus<
                                        S::WithCallbackMethod_CudaSharedMemoryRegister<
                                            S::WithCallbackMethod_CudaSharedMemoryUnregister<
                                                S::Service>>>>>>>>>>>>>>>>>;
}  // namespace kserve_methods
using kserve_methods::KserveServiceBase;

class KserveService final : public KserveServiceBase {
 public:
  // `authorizer`: access control (server/grpc/auth.h), null when none is configured; not owned, must
  // outlive the service. ServerLive, ServerReady and ModelReady stay open (they answer what
  // grpc.health.v1.Health answers); the other RPCs need role infer.
  // RepositoryIndex, ModelConfig and ModelStatistics need role infer; RepositoryModelLoad /
  // Unload need `model_control` (--model_control) and role admin, as grove.v1 LoadModel.
  // SystemSharedMemoryRegister / Unregister need the runtime's shared memory on (--shared_memory)
  // and role admin; SystemSharedMemoryStatus role infer; the CUDA shared memory RPCs answer
  // UNIMPLEMENTED (after the role infer check).
  KserveService(Runtime* runtime, const auth::Authorizer* authorizer, bool model_control)
      : runtime_(runtime), authorizer_(authorizer), model_control_(model_control) {}

  GROVE_UNARY_RPC(inference, ServerLive);
  GROVE_UNARY_RPC(inference, ServerReady);
  GROVE_UNARY_RPC(inference, ModelReady);
  GROVE_UNARY_RPC(inference, ServerMetadata);
  GROVE_UNARY_RPC(inference, ModelMetadata);
  // ModelInfer on any transport: `call` was created for the request (method label "ModelInfer")
  // and is answered exactly once, on this thread or later on the thread that completes its work.
  // `request` and `response` must stay alive until the call was answered (and `response` until it
  // was sent). Never blocks (a short idle call is computed inline).
  void HandleModelInfer(const grpc::ServerContextBase& context,
                        const inference::ModelInferRequest& request,
                        inference::ModelInferResponse* response, UnaryCall* call);
  GROVE_UNARY_RPC(inference, ModelConfig);
  GROVE_UNARY_RPC(inference, ModelStatistics);
  GROVE_UNARY_RPC(inference, RepositoryIndex);
  GROVE_UNARY_RPC(inference, RepositoryModelLoad);
  GROVE_UNARY_RPC(inference, RepositoryModelUnload);
  GROVE_UNARY_RPC(inference, SystemSharedMemoryStatus);
  GROVE_UNARY_RPC(inference, SystemSharedMemoryRegister);
  GROVE_UNARY_RPC(inference, SystemSharedMemoryUnregister);
  GROVE_UNARY_RPC(inference, CudaSharedMemoryStatus);
  GROVE_UNARY_RPC(inference, CudaSharedMemoryRegister);
  GROVE_UNARY_RPC(inference, CudaSharedMemoryUnregister);

 private:
  // Model control of a Repository RPC; `refused` (RefusedRepositoryArgument) non-empty answers
  // UNIMPLEMENTED naming it.
  grpc::ServerUnaryReactor* Control(grpc::CallbackServerContext* context, const char* method,
                                    ModelControl op, const std::string& model,
                                    const std::string& refused);
  // Register / unregister over the control thread.
  grpc::ServerUnaryReactor* SharedMemory(grpc::CallbackServerContext* context, const char* method,
                                         SharedMemoryControl request);
  grpc::ServerUnaryReactor* CudaSharedMemory(grpc::CallbackServerContext* context,
                                             const char* method);

  Runtime* const runtime_;
  const auth::Authorizer* const authorizer_;
  const bool model_control_;
};

}  // namespace grove::server
