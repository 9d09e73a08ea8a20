#include "server/kserve_service.h"

#include <memory>

#include "server/call.h"
#include "server/convert.h"
#include "server/kserve_ops.h"

namespace grove::server {

grpc::ServerUnaryReactor* KserveService::ServerLive(grpc::CallbackServerContext* context,
                                                    const inference::ServerLiveRequest* request,
                                                    inference::ServerLiveResponse* response) {
  auto* reactor = new UnaryCall(runtime_, "ServerLive");
  response->set_live(true);
  reactor->Reply(absl::OkStatus());
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::ServerReady(grpc::CallbackServerContext* context,
                                                     const inference::ServerReadyRequest* request,
                                                     inference::ServerReadyResponse* response) {
  auto* reactor = new UnaryCall(runtime_, "ServerReady");
  response->set_ready(runtime_->ServerReady());
  reactor->Reply(absl::OkStatus());
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::ModelReady(grpc::CallbackServerContext* context,
                                                    const inference::ModelReadyRequest* request,
                                                    inference::ModelReadyResponse* response) {
  auto* reactor = new UnaryCall(runtime_, "ModelReady");
  reactor->set_model_label(ModelLabel(runtime_, request->name()));
  reactor->Reply(KserveModelReady(runtime_, *request, response));
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::ServerMetadata(
    grpc::CallbackServerContext* context, const inference::ServerMetadataRequest* request,
    inference::ServerMetadataResponse* response) {
  auto* reactor = new UnaryCall(runtime_, "ServerMetadata");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kInfer)) return reactor;
  KserveServerMetadata(response);
  reactor->Reply(absl::OkStatus());
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::ModelMetadata(
    grpc::CallbackServerContext* context, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  auto* reactor = new UnaryCall(runtime_, "ModelMetadata");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kInfer)) return reactor;
  reactor->set_model_label(ModelLabel(runtime_, request->name()));
  reactor->Reply(KserveModelMetadata(runtime_, *request, response));
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::ModelInfer(grpc::CallbackServerContext* context,
                                                    const inference::ModelInferRequest* request,
                                                    inference::ModelInferResponse* response) {
  auto* reactor = new UnaryCall(runtime_, "ModelInfer");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kInfer)) return reactor;
  reactor->set_model_label(ModelLabel(runtime_, request->model_name()));
  absl::Status s = StartKserveInfer(
      runtime_, *request, response, DeadlineFromChrono(context->deadline()),
      [reactor](const std::shared_ptr<CallState>& call, registry::Operation op) {
        reactor->set_operation(op);
        reactor->set_call(call);
      },
      [reactor](absl::Status status) { reactor->Reply(status); });
  if (!s.ok()) reactor->Reply(s);
  return reactor;
}

}  // namespace grove::server
