#include "server/grpc/rpc_errors.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace grove::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

class DecodeErrorInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit DecodeErrorInterceptor(grpc::experimental::ServerRpcInfo* info)
      : method_(info->method() != nullptr ? info->method() : "?"),
        unary_(info->type() == grpc::experimental::ServerRpcInfo::Type::UNARY) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    // A unary request that failed to decode reaches the interceptors as a null message (a stream's
    // end looks the same, hence unary calls only).
    if (unary_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      undecodable_ = true;
    }
    if (undecodable_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      methods->ModifySendStatus(UndecodableRequestStatus(method_));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  const bool unary_;
  bool undecodable_ = false;
};

class DecodeErrorInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit DecodeErrorInterceptorFactory(std::vector<std::string> raw_methods)
      : raw_methods_(std::move(raw_methods)) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    if (info->method() != nullptr &&
        std::find(raw_methods_.begin(), raw_methods_.end(), info->method()) !=
            raw_methods_.end()) {
      return nullptr;  // gRPC allows it: no interceptor for this call
    }
    return new DecodeErrorInterceptor(info);
  }

 private:
  const std::vector<std::string> raw_methods_;
};

class UnimplementedReactor final : public grpc::ServerGenericBidiReactor {
 public:
  explicit UnimplementedReactor(const std::string& method) {
    Finish(grpc::Status(
        grpc::StatusCode::UNIMPLEMENTED,
        absl::StrCat(method.empty() ? std::string("(no method)") : method,
                     " is not implemented by groved; it serves grove.v1.Grove (Predict, Explain, "
                     "ExplainStream, ListModels, GetModelMetadata, LoadModel, UnloadModel, "
                     "RegisterSharedMemory, UnregisterSharedMemory, GetSharedMemoryStatus), "
                     "inference.GRPCInferenceService (ServerLive, ServerReady, ModelReady, "
                     "ServerMetadata, ModelMetadata, ModelInfer, ModelConfig, ModelStatistics, "
                     "RepositoryIndex, RepositoryModelLoad, RepositoryModelUnload, "
                     "SystemSharedMemoryStatus, SystemSharedMemoryRegister, "
                     "SystemSharedMemoryUnregister; not Triton's tracing, logging or streaming "
                     "RPCs), grpc.health.v1.Health and server reflection")));
  }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::Status UndecodableRequestStatus(absl::string_view method) {
  return grpc::Status(
      grpc::StatusCode::INVALID_ARGUMENT,
      absl::StrCat(method, ": the request cannot be decoded as the method's protobuf message "
                           "(malformed or truncated bytes); nothing was done"));
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeDecodeErrorInterceptorFactory(std::vector<std::string> raw_methods) {
  return std::make_unique<DecodeErrorInterceptorFactory>(std::move(raw_methods));
}

grpc::ServerGenericBidiReactor* UnknownMethodService::CreateReactor(
    grpc::GenericCallbackServerContext* context) {
  return new UnimplementedReactor(context->method());
}

}  // namespace grove::server
