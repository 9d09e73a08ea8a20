#include "server/kserve/kserve_service.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/call.h"
#include "server/convert.h"
#include "server/kserve/kserve_ops.h"

namespace grove::server {

grpc::ServerUnaryReactor* KserveService::ServerLive(grpc::CallbackServerContext* context,
                                                    const inference::ServerLiveRequest* request,
                                                    inference::ServerLiveResponse* response) {
  auto* reactor = new CallbackUnaryCall(runtime_, "ServerLive");
  response->set_live(true);
  reactor->Reply(absl::OkStatus());
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::ServerReady(grpc::CallbackServerContext* context,
                                                     const inference::ServerReadyRequest* request,
                                                     inference::ServerReadyResponse* response) {
  auto* reactor = new CallbackUnaryCall(runtime_, "ServerReady");
  response->set_ready(runtime_->ServerReady());
  reactor->Reply(absl::OkStatus());
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::ModelReady(grpc::CallbackServerContext* context,
                                                    const inference::ModelReadyRequest* request,
                                                    inference::ModelReadyResponse* response) {
  auto* reactor = new CallbackUnaryCall(runtime_, "ModelReady");
  reactor->set_model_label(ModelLabel(runtime_, request->name()));
  reactor->Reply(KserveModelReady(runtime_, *request, response));
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::ServerMetadata(
    grpc::CallbackServerContext* context, const inference::ServerMetadataRequest* request,
    inference::ServerMetadataResponse* response) {
  auto* reactor = new CallbackUnaryCall(runtime_, "ServerMetadata");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kInfer)) return reactor;
  KserveServerMetadata(runtime_->shared_memory_enabled(), response);
  reactor->Reply(absl::OkStatus());
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::ModelMetadata(
    grpc::CallbackServerContext* context, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  auto* reactor = new CallbackUnaryCall(runtime_, "ModelMetadata");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kInfer)) return reactor;
  reactor->set_model_label(ModelLabel(runtime_, request->name()));
  reactor->Reply(KserveModelMetadata(runtime_, *request, response));
  return reactor;
}

void KserveService::HandleModelInfer(const grpc::ServerContextBase& context,
                                     const inference::ModelInferRequest& request,
                                     inference::ModelInferResponse* response, UnaryCall* call) {
  if (!call->Admit(authorizer_, context, auth::Role::kInfer)) return;
  call->set_model_label(ModelLabel(runtime_, request.model_name()));
  absl::Status s = StartKserveInfer(
      runtime_, request, response, DeadlineFromChrono(context.deadline()),
      [call](const std::shared_ptr<CallState>& state, Operation op) {
        call->set_operation(op);
        call->set_call(state);
      },
      [call](absl::Status status) { call->Reply(status); }, call->resolved(),
      call->received_raw_rows(), call->principal());
  if (!s.ok()) call->Reply(s);
}

grpc::ServerUnaryReactor* KserveService::ModelConfig(grpc::CallbackServerContext* context,
                                                     const inference::ModelConfigRequest* request,
                                                     inference::ModelConfigResponse* response) {
  auto* reactor = new CallbackUnaryCall(runtime_, "ModelConfig");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kInfer)) return reactor;
  reactor->set_model_label(ModelLabel(runtime_, request->name()));
  reactor->Reply(KserveModelConfig(runtime_, *request, response));
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::ModelStatistics(
    grpc::CallbackServerContext* context, const inference::ModelStatisticsRequest* request,
    inference::ModelStatisticsResponse* response) {
  auto* reactor = new CallbackUnaryCall(runtime_, "ModelStatistics");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kInfer)) return reactor;
  if (!request->name().empty()) reactor->set_model_label(ModelLabel(runtime_, request->name()));
  reactor->Reply(KserveModelStatistics(runtime_, *request, response));
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::RepositoryIndex(
    grpc::CallbackServerContext* context, const inference::RepositoryIndexRequest* request,
    inference::RepositoryIndexResponse* response) {
  auto* reactor = new CallbackUnaryCall(runtime_, "RepositoryIndex");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kInfer)) return reactor;
  reactor->Reply(KserveRepositoryIndex(runtime_, *request, response));
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::RepositoryModelLoad(
    grpc::CallbackServerContext* context, const inference::RepositoryModelLoadRequest* request,
    inference::RepositoryModelLoadResponse* response) {
  return Control(context, "RepositoryModelLoad", ModelControl::kLoad, request->model_name(),
                 RefusedRepositoryArgument(request->repository_name(), request->parameters(),
                                           ModelControl::kLoad));
}

grpc::ServerUnaryReactor* KserveService::RepositoryModelUnload(
    grpc::CallbackServerContext* context, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse* response) {
  return Control(context, "RepositoryModelUnload", ModelControl::kUnload, request->model_name(),
                 RefusedRepositoryArgument(request->repository_name(), request->parameters(),
                                           ModelControl::kUnload));
}

grpc::ServerUnaryReactor* KserveService::SystemSharedMemoryStatus(
    grpc::CallbackServerContext* context, const inference::SystemSharedMemoryStatusRequest* request,
    inference::SystemSharedMemoryStatusResponse* response) {
  auto* reactor = new CallbackUnaryCall(runtime_, "SystemSharedMemoryStatus");
  if (!reactor->Admit(authorizer_, *context, auth::Role::kInfer)) return reactor;
  reactor->Reply(
      KserveSystemSharedMemoryStatus(runtime_, *request, reactor->principal(), response));
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::SystemSharedMemoryRegister(
    grpc::CallbackServerContext* context,
    const inference::SystemSharedMemoryRegisterRequest* request,
    inference::SystemSharedMemoryRegisterResponse* response) {
  return SharedMemory(context, "SystemSharedMemoryRegister",
                      SharedMemoryControl::Register(request->name(), request->key(),
                                                    request->offset(), request->byte_size()));
}

grpc::ServerUnaryReactor* KserveService::SystemSharedMemoryUnregister(
    grpc::CallbackServerContext* context,
    const inference::SystemSharedMemoryUnregisterRequest* request,
    inference::SystemSharedMemoryUnregisterResponse* response) {
  return SharedMemory(context, "SystemSharedMemoryUnregister",
                      SharedMemoryControl::Unregister(request->name()));
}

grpc::ServerUnaryReactor* KserveService::SharedMemory(grpc::CallbackServerContext* context,
                                                      const char* method,
                                                      SharedMemoryControl request) {
  auto* reactor = new CallbackUnaryCall(runtime_, method);
  if (!reactor->Admit(authorizer_, *context, auth::Role::kAdmin)) return reactor;
  ReplySharedMemoryControl(runtime_, reactor, *context, std::move(request));
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::CudaSharedMemoryStatus(
    grpc::CallbackServerContext* context, const inference::CudaSharedMemoryStatusRequest* request,
    inference::CudaSharedMemoryStatusResponse* response) {
  return CudaSharedMemory(context, "CudaSharedMemoryStatus");
}

grpc::ServerUnaryReactor* KserveService::CudaSharedMemoryRegister(
    grpc::CallbackServerContext* context, const inference::CudaSharedMemoryRegisterRequest* request,
    inference::CudaSharedMemoryRegisterResponse* response) {
  return CudaSharedMemory(context, "CudaSharedMemoryRegister");
}

grpc::ServerUnaryReactor* KserveService::CudaSharedMemoryUnregister(
    grpc::CallbackServerContext* context,
    const inference::CudaSharedMemoryUnregisterRequest* request,
    inference::CudaSharedMemoryUnregisterResponse* response) {
  return CudaSharedMemory(context, "CudaSharedMemoryUnregister");
}

grpc::ServerUnaryReactor* KserveService::CudaSharedMemory(grpc::CallbackServerContext* context,
                                                          const char* method) {
  auto* reactor = new CallbackUnaryCall(runtime_, method);
  if (!reactor->Admit(authorizer_, *context, auth::Role::kInfer)) return reactor;
  reactor->Reply(CudaSharedMemoryUnimplemented(method));
  return reactor;
}

grpc::ServerUnaryReactor* KserveService::Control(grpc::CallbackServerContext* context,
                                                 const char* method, ModelControl op,
                                                 const std::string& model,
                                                 const std::string& refused) {
  auto* reactor = new CallbackUnaryCall(runtime_, method);
  if (!reactor->Admit(authorizer_, *context, auth::Role::kAdmin)) return reactor;
  reactor->set_model_label(ModelLabel(runtime_, model));
  if (!refused.empty()) {
    reactor->Reply(absl::UnimplementedError(absl::StrCat(
        method, " with ", refused, " is not supported: groved loads models from the files of "
        "its one repository (no config or files in the request)")));
    return reactor;
  }
  Runtime* runtime = runtime_;
  StartModelControl(runtime_, model_control_, op, model, DeadlineFromChrono(context->deadline()),
                    [reactor] { return reactor->cancelled(); },
                    [runtime, reactor, model](absl::Status s) {
                      reactor->set_model_label(ModelLabel(runtime, model));
                      reactor->Reply(s);
                    });
  return reactor;
}

}  // namespace grove::server
