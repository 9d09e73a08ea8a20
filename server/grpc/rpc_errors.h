// Answers gRPC itself would give without a message: a unary request whose bytes cannot be decoded
// (gRPC answers UNIMPLEMENTED with an empty message) becomes INVALID_ARGUMENT naming the method, and
// a method groved does not serve (a Triton RPC outside the subset groved serves, a typo)
// is UNIMPLEMENTED naming the method and what groved serves.
//
// Thread-safe: the factory and the service are stateless; one interceptor per call.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/support/server_interceptor.h"
#include "grpcpp/support/status.h"

namespace grove::server {

// INVALID_ARGUMENT "<method>: the request cannot be decoded as the method's protobuf message ...":
// the answer to a unary request whose bytes cannot be decoded. `method` is the full path
// ("/grove.v1.Grove/Predict").
grpc::Status UndecodableRequestStatus(absl::string_view method);

// Server interceptor factory (ServerBuilder::experimental().SetInterceptorCreators): for unary calls
// whose request failed to decode, rewrites the status to UndecodableRequestStatus. Calls of
// `raw_methods` (full paths: the methods served raw on the completion queues, which decode their
// requests themselves and answer the same) get no interceptor, so that gRPC runs none of its
// interception hooks on each of their operations.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeDecodeErrorInterceptorFactory(std::vector<std::string> raw_methods = {});

// Registered with ServerBuilder::RegisterCallbackGenericService: every method no service
// registered is answered UNIMPLEMENTED "<method> is not implemented by groved; ...".
class UnknownMethodService final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* context) override;
};

}  // namespace grove::server
