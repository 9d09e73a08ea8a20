// inference.GRPCInferenceService: the Open Inference Protocol (KServe v2) as Triton speaks it, with
// the tensor names of Triton's FIL backend (see proto/inference/grpc_service.proto), so that
// tritonclient and KServe clients call groved unchanged. ModelInfer queues its work exactly like the
// native Predict/Explain and answers with raw_output_contents.
#pragma once

#include "inference/grpc_service.grpc.pb.h"
#include "server/runtime.h"

namespace grove::server {

class KserveService final : public inference::GRPCInferenceService::CallbackService {
 public:
  explicit KserveService(Runtime* runtime) : runtime_(runtime) {}

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
};

}  // namespace grove::server
