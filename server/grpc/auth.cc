#include "server/grpc/auth.h"

#include <memory>
#include <string>
#include <vector>

#include "grpc/grpc_security_constants.h"

namespace grove::server {

absl::Status Authorize(const auth::Authorizer* authorizer,
                       const grpc::ServerContextBase& context, auth::Role required,
                       absl::string_view method, std::string* principal) {
  if (principal != nullptr) principal->clear();
  if (authorizer == nullptr) return absl::OkStatus();
  auth::CallerCredentials caller;
  auto range = context.client_metadata().equal_range("authorization");
  for (auto it = range.first; it != range.second; ++it) {
    caller.authorization.emplace_back(it->second.data(), it->second.size());
  }
  std::string name;  // auth_context() returns a shared_ptr: the name is copied out of it
  if (authorizer->certificates_enabled()) {
    std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
    if (auth != nullptr && auth->IsPeerAuthenticated()) {
      std::vector<grpc::string_ref> cn = auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME);
      if (!cn.empty()) name.assign(cn.front().data(), cn.front().size());
    }
  }
  caller.certificate_name = name;
  absl::Status s = authorizer->Check(caller, required, method);
  if (s.ok() && principal != nullptr) *principal = auth::CallerPrincipal(caller);
  return s;
}

}  // namespace grove::server
