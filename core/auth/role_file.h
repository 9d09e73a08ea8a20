// Role files of groved's access control: the bearer-token file (--auth_token_file) and the client
// certificate file (--tls_client_roles_file). Pure parsing and lookup, no I/O and no gRPC, so that
// both are unit-tested and fuzzed (tests/fuzz/role_file_fuzz.cc).
//
// Format (docs/operations.md "Authentication"): one grant per line, `ROLE VALUE`, ROLE `infer` or
// `admin`, separated by spaces or tabs. Blank lines and lines starting with `#` (after optional
// blanks) are ignored; a trailing '\r' is ignored (CRLF files). In a token file VALUE is one token of
// 16 to 4096 visible ASCII characters (0x21..0x7e: what an HTTP/2 header value can carry) and nothing
// may follow it; in a certificate file VALUE is the rest of the line (a subject common name, which
// may contain spaces), trimmed. A value may appear once per file.
//
// Errors never quote a token: they name the line and what is wrong with it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grove::auth {

// Ordered: a role grants everything the roles below it grant.
enum class Role : int { kNone = 0, kInfer = 1, kAdmin = 2 };

// "none", "infer", "admin".
const char* RoleName(Role role);

enum class RoleFileKind {
  kTokens,            // VALUE is a secret bearer token
  kCertificateNames,  // VALUE is a client certificate's subject common name
};

inline constexpr int kMinTokenLength = 16;
inline constexpr int kMaxTokenLength = 4096;

struct RoleGrant {
  std::string value;
  Role role = Role::kNone;
  int line = 0;  // 1-based
};

// Parses a role file. INVALID_ARGUMENT "line N: ..." for the first malformed line (unknown role,
// missing or bad value, extra fields, a value given twice) and for a file without any grant.
absl::StatusOr<std::vector<RoleGrant>> ParseRoleFile(absl::string_view text, RoleFileKind kind);

// Bearer tokens and their roles. Immutable; thread-safe.
class TokenTable {
 public:
  TokenTable() = default;
  explicit TokenTable(const std::vector<RoleGrant>& grants);

  // The role of `token` (kNone when unknown). The time taken does not depend on the content of the
  // stored tokens: `token` is compared with every one of them, byte by byte, with no early exit.
  Role Find(absl::string_view token) const;
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  std::vector<std::string> tokens_;
  std::vector<Role> roles_;
};

// Certificate common names and their roles. Immutable; thread-safe. Not secret: plain lookup.
class NameTable {
 public:
  NameTable() = default;
  explicit NameTable(const std::vector<RoleGrant>& grants);

  Role Find(absl::string_view name) const;
  int64_t size() const { return static_cast<int64_t>(roles_.size()); }

 private:
  absl::flat_hash_map<std::string, Role> roles_;
};

}  // namespace grove::auth
