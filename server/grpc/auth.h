// groved's access control on the gRPC side: extracts what a call presented (its `authorization`
// metadata, the common name of its verified client certificate) and asks the core Authorizer
// (core/auth/authorizer.h) whether the call may run with the role its RPC needs. Every handler of
// grove.v1.Grove and inference.GRPCInferenceService calls Authorize first, before it reads the
// request, so that an unauthenticated caller learns nothing (not even whether a model exists).
//
// Roles of the RPCs (docs/operations.md "Authentication"):
//   open   grpc.health.v1.Health, server reflection, KServe ServerLive / ServerReady / ModelReady
//          (the same facts the health service answers)
//   infer  Predict, Explain, ExplainStream, ListModels, GetModelMetadata, GetSharedMemoryStatus,
//          KServe ServerMetadata, ModelMetadata, ModelInfer, ModelConfig, ModelStatistics,
//          RepositoryIndex, SystemSharedMemoryStatus (and the CUDA shared memory RPCs, which
//          answer UNIMPLEMENTED)
//   admin  the control RPCs: LoadModel, UnloadModel, RegisterSharedMemory,
//          UnregisterSharedMemory, KServe RepositoryModelLoad, RepositoryModelUnload,
//          SystemSharedMemoryRegister, SystemSharedMemoryUnregister
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/auth/authorizer.h"
#include "grpcpp/grpcpp.h"

namespace grove::server {

// OK when `authorizer` is null (no access control configured) or the call holds `required`;
// otherwise UNAUTHENTICATED or PERMISSION_DENIED naming `method`. When admitted and `principal` is
// not null, it receives the caller's auth::CallerPrincipal ("" without access control). Never
// blocks; thread-safe.
absl::Status Authorize(const auth::Authorizer* authorizer,
                       const grpc::ServerContextBase& context, auth::Role required,
                       absl::string_view method, std::string* principal = nullptr);

}  // namespace grove::server
