// grpc.reflection.v1.ServerReflection: server reflection in its v1 version, beside the v1alpha
// service gRPC's plugin serves (Debian 12's gRPC has no v1), answered from the same Protobuf
// descriptors linked into groved: list_services, file_by_filename, file_containing_symbol,
// file_containing_extension, all_extension_numbers_of_type. A file is sent with the files it
// depends on, each file once per stream. Open to every caller, as v1alpha is.
//
// Thread-safe: the service is immutable; one reactor per stream.
#pragma once

#include <string>
#include <vector>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace grove::server {

class ReflectionV1Service final : public grpc::reflection::v1::ServerReflection::CallbackService {
 public:
  // `services`: the full names list_services answers.
  explicit ReflectionV1Service(std::vector<std::string> services) : services_(std::move(services)) {}

  grpc::ServerBidiReactor<grpc::reflection::v1::ServerReflectionRequest,
                          grpc::reflection::v1::ServerReflectionResponse>*
  ServerReflectionInfo(grpc::CallbackServerContext* context) override;

 private:
  const std::vector<std::string> services_;
};

}  // namespace grove::server
