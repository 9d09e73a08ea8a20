// Authorizer: who may call what on groved. It holds the grants of the bearer-token file and of the
// client-certificate file (core/auth/role_file.h), decides each call from the credentials the call
// presented, and re-reads a file when it changes. No gRPC here: server/grpc/auth.h extracts the
// credentials from a call and maps the status.
//
// Decision (docs/operations.md "Authentication"): the caller's role is the highest of the role of
// its bearer token and the role of its verified client certificate's common name.
//   * With a token file, a call without any credential that grants a role, with a malformed
//     `authorization` value or with an unknown token is UNAUTHENTICATED.
//   * With only a certificate file, a certificate whose name has no role is PERMISSION_DENIED (the
//     TLS layer already authenticated it).
//   * A role below the one the RPC needs is PERMISSION_DENIED.
//
// Reload: Poll() re-reads a file whose (device, inode, size, mtime) changed and then stayed the same
// for one more poll (so that a file being written is not read half-way). A good file replaces its
// grants atomically; a bad or missing one keeps the previous grants.
//
// Thread-safe: Check runs concurrently with Poll and the watcher thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/auth/role_file.h"
#include "core/common/periodic_thread.h"

namespace grove::auth {

struct AuthorizerOptions {
  std::string token_file;        // "": bearer tokens grant nothing (--auth_token_file)
  std::string certificate_file;  // "": client certificates grant nothing (--tls_client_roles_file)
};

// What one call presented. Views into the call's metadata; valid for the Check call only.
struct CallerCredentials {
  // Every value of the call's `authorization` metadata (normally none or one).
  std::vector<absl::string_view> authorization;
  // Common name of the client certificate the TLS layer verified; "" when none.
  absl::string_view certificate_name;
  // Where the call carries `authorization`, as messages name it: gRPC "metadata", HTTP "header".
  absl::string_view carrier = "metadata";
};

// Who `caller` is, for what a caller owns on the server (its shared memory registrations): the
// bearer token it presented ("token:" + the token: never logged nor returned), else its verified
// certificate's common name ("cert:" + the name), else "" (no credentials: every such caller is the
// same owner). Meaningful only once Check admitted the call.
std::string CallerPrincipal(const CallerCredentials& caller);

class Authorizer {
 public:
  // Reads both files (at least one must be given). Errors: no file given, a file unreadable
  // (NOT_FOUND) or malformed (INVALID_ARGUMENT), each naming the file and the line.
  static absl::StatusOr<std::unique_ptr<Authorizer>> Create(AuthorizerOptions options);
  ~Authorizer();  // StopWatching()
  Authorizer(const Authorizer&) = delete;
  Authorizer& operator=(const Authorizer&) = delete;

  bool tokens_enabled() const { return !options_.token_file.empty(); }
  bool certificates_enabled() const { return !options_.certificate_file.empty(); }
  const AuthorizerOptions& options() const { return options_; }

  // OK when `caller` holds `required` (or a higher role); otherwise UNAUTHENTICATED or
  // PERMISSION_DENIED (see above) with a message naming `method` and never a token.
  absl::Status Check(const CallerCredentials& caller, Role required,
                     absl::string_view method) const;

  // Grants currently in force.
  int64_t num_tokens() const;
  int64_t num_certificate_names() const;

  struct PollResult {
    int reloaded = 0;     // files whose new grants are now in force
    absl::Status error;   // first file rejected by this pass (reported once per file state)
  };
  // One file-watching pass (see the header comment).
  PollResult Poll();

  // Runs Poll() every `interval` on a thread of its own until StopWatching(), logging reloads and
  // rejected files (once per file state; never a token).
  void StartWatching(absl::Duration interval);
  void StopWatching();

 private:
  struct FileStamp {
    bool exists = false;
    uint64_t device = 0;
    uint64_t inode = 0;
    int64_t size = 0;
    int64_t mtime_ns = 0;
    bool operator==(const FileStamp& o) const {
      return exists == o.exists && device == o.device && inode == o.inode && size == o.size &&
             mtime_ns == o.mtime_ns;
    }
    bool operator!=(const FileStamp& o) const { return !(*this == o); }
  };
  struct WatchedFile {
    std::string path;
    RoleFileKind kind = RoleFileKind::kTokens;
    FileStamp handled;    // the state last loaded or rejected
    FileStamp last_seen;  // the state seen by the previous poll
  };

  explicit Authorizer(AuthorizerOptions options);
  // The role `caller` holds, or why it holds none (UNAUTHENTICATED / PERMISSION_DENIED).
  absl::StatusOr<Role> RoleOf(const CallerCredentials& caller) const;
  static FileStamp Stat(const std::string& path);
  // Reads and parses `file` and installs its grants.
  absl::Status Load(const WatchedFile& file);

  const AuthorizerOptions options_;
  std::vector<WatchedFile> files_;  // Create (before sharing), then Poll under poll_mu_
  absl::Mutex poll_mu_;

  mutable absl::Mutex mu_;
  std::shared_ptr<const TokenTable> tokens_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const NameTable> names_ ABSL_GUARDED_BY(mu_);

  PeriodicThread watcher_;
};

}  // namespace grove::auth
