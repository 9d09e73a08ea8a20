// inference.GRPCInferenceService: the Open Inference Protocol (KServe v2) as Triton speaks it, with
// the tensor names of Triton's FIL backend (see proto/inference/grpc_service.proto), so that
// tritonclient and KServe clients call groved unchanged. ModelInfer queues its work exactly like the
// native Predict/Explain and answers with raw_output_contents.
#pragma once

#include "core/auth/authorizer.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/runtime.h"

namespace grove::server {

class KserveService final : public inference::GRPCInferenceService::CallbackService {
 public:
  // `authorizer`: access control (server/auth.h), null when none is configured; not owned, must
  // outlive the service. ServerLive, ServerReady and ModelReady stay open (they answer what
  // grpc.health.v1.Health answers); the other RPCs need role infer.
  KserveService(Runtime* runtime, const auth::Authorizer* authorizer)
      : runtime_(runtime), authorizer_(authorizer) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;

 private:
  Runtime* const runtime_;
  const auth::Authorizer* const authorizer_;
};

}  // namespace grove::server
