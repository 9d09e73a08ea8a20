// absl::Status <-> grpc::Status (canonical codes map 1:1) and code names for metrics.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace grove::server {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// "OK", "INVALID_ARGUMENT", ... (the gRPC spelling).
const char* CodeName(absl::StatusCode code);

}  // namespace grove::server
