// inference.GRPCInferenceService: the Open Inference Protocol (KServe v2) as Triton speaks it, with
// the tensor names of Triton's FIL backend (see proto/inference/grpc_service.proto), so that
// tritonclient and KServe clients call groved unchanged. ModelInfer queues its work exactly like the
// native Predict/Explain and answers with raw_output_contents.
#pragma once

#include "core/auth/authorizer.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/kserve_ops.h"
#include "server/runtime.h"

namespace grove::server {

class KserveService final : public inference::GRPCInferenceService::CallbackService {
 public:
  // `authorizer`: access control (server/auth.h), null when none is configured; not owned, must
  // outlive the service. ServerLive, ServerReady and ModelReady stay open (they answer what
  // grpc.health.v1.Health answers); the other RPCs need role infer.
  // RepositoryIndex, ModelConfig and ModelStatistics need role infer; RepositoryModelLoad /
  // Unload need `model_control` (--model_control) and role admin, as grove.v1 LoadModel.
  KserveService(Runtime* runtime, const auth::Authorizer* authorizer, bool model_control)
      : runtime_(runtime), authorizer_(authorizer), model_control_(model_control) {}

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
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override;
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* context,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* context,
                                            const inference::RepositoryIndexRequest* request,
                                            inference::RepositoryIndexResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryModelLoad(
      grpc::CallbackServerContext* context, const inference::RepositoryModelLoadRequest* request,
      inference::RepositoryModelLoadResponse* response) override;
  grpc::ServerUnaryReactor* RepositoryModelUnload(
      grpc::CallbackServerContext* context, const inference::RepositoryModelUnloadRequest* request,
      inference::RepositoryModelUnloadResponse* response) override;

 private:
  // Model control of a Repository RPC; `refused` (RefusedRepositoryArgument) non-empty answers
  // UNIMPLEMENTED naming it.
  grpc::ServerUnaryReactor* Control(grpc::CallbackServerContext* context, const char* method,
                                    ModelControl op, const std::string& model,
                                    const std::string& refused);

  Runtime* const runtime_;
  const auth::Authorizer* const authorizer_;
  const bool model_control_;
};

}  // namespace grove::server
