// libFuzzer target for the access-control role files (core/auth/role_file.h): any input, read as a
// token file and as a client-certificate file, must give grants that the lookup tables find again
// or INVALID_ARGUMENT, never a crash or a sanitizer report; and an error message must never quote
// a field that could be a token (16 or more characters without blanks).
//
// Seed corpus: tests/fuzz/seeds/role_file/ (see tests/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/strings/str_split.h"
#include "core/auth/role_file.h"

namespace {

using grove::auth::Role;
using grove::auth::RoleFileKind;
using grove::auth::RoleGrant;

void Check(absl::string_view text, RoleFileKind kind) {
  const absl::StatusOr<std::vector<RoleGrant>> grants = grove::auth::ParseRoleFile(text, kind);
  if (!grants.ok()) {
    if (grants.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    for (absl::string_view field : absl::StrSplit(text, absl::ByAnyChar(" \t\r\n"))) {
      if (field.size() >= 16 && absl::StrContains(grants.status().message(), field)) std::abort();
    }
    return;
  }
  if (grants->empty()) std::abort();
  int last_line = 0;
  for (const RoleGrant& g : *grants) {
    if (g.value.empty() || g.line <= last_line) std::abort();
    if (g.role != Role::kInfer && g.role != Role::kAdmin) std::abort();
    last_line = g.line;
  }
  if (kind == RoleFileKind::kTokens) {
    const grove::auth::TokenTable table(*grants);
    for (const RoleGrant& g : *grants) {
      if (g.value.size() < 16 || table.Find(g.value) != g.role) std::abort();
    }
    if (table.Find("") != Role::kNone) std::abort();
  } else {
    const grove::auth::NameTable table(*grants);
    for (const RoleGrant& g : *grants) {
      if (table.Find(g.value) != g.role) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  Check(text, RoleFileKind::kTokens);
  Check(text, RoleFileKind::kCertificateNames);
  return 0;
}
