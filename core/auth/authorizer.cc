#include "core/auth/authorizer.h"

#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/common/log.h"
#include "core/io/file.h"

namespace grove::auth {
namespace {

const char* Describe(RoleFileKind kind) {
  return kind == RoleFileKind::kTokens ? "token file" : "client roles file";
}

// Token and role files: a few lines each; 1 MiB bounds what a reload may read and parse.
constexpr int64_t kMaxRoleFileBytes = int64_t{1} << 20;

// Regular files only (a FIFO would block the reload thread), bounded.
absl::StatusOr<std::string> ReadFile(const std::string& path, RoleFileKind kind) {
  absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxRoleFileBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat(Describe(kind), ": ", text.status().message()));
  }
  return text;
}

// The token of an `authorization` value "Bearer TOKEN" (scheme case-insensitive, RFC 7235), or ""
// when the value has another form.
absl::string_view BearerToken(absl::string_view value) {
  constexpr absl::string_view kScheme = "bearer";
  if (value.size() <= kScheme.size() || !absl::StartsWithIgnoreCase(value, kScheme) ||
      value[kScheme.size()] != ' ') {
    return "";
  }
  return absl::StripAsciiWhitespace(value.substr(kScheme.size() + 1));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::Create(AuthorizerOptions options) {
  if (options.token_file.empty() && options.certificate_file.empty()) {
    return absl::InvalidArgumentError("access control needs a token file or a client roles file");
  }
  std::unique_ptr<Authorizer> a(new Authorizer(std::move(options)));
  for (WatchedFile& file : a->files_) {
    file.handled = file.last_seen = Stat(file.path);
    if (absl::Status s = a->Load(file); !s.ok()) return s;
  }
  return a;
}

Authorizer::Authorizer(AuthorizerOptions options) : options_(std::move(options)) {
  if (!options_.token_file.empty()) {
    files_.push_back(WatchedFile{options_.token_file, RoleFileKind::kTokens, {}, {}});
  }
  if (!options_.certificate_file.empty()) {
    files_.push_back(WatchedFile{options_.certificate_file, RoleFileKind::kCertificateNames, {}, {}});
  }
}

Authorizer::~Authorizer() { StopWatching(); }

Authorizer::FileStamp Authorizer::Stat(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return FileStamp{};
  return FileStamp{true, static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                   static_cast<int64_t>(st.st_size),
                   static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

absl::Status Authorizer::Load(const WatchedFile& file) {
  absl::StatusOr<std::string> text = ReadFile(file.path, file.kind);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<RoleGrant>> grants = ParseRoleFile(*text, file.kind);
  if (!grants.ok()) {
    return absl::Status(grants.status().code(), absl::StrCat(Describe(file.kind), " '", file.path,
                                                             "': ", grants.status().message()));
  }
  if (file.kind == RoleFileKind::kTokens) {
    auto table = std::make_shared<const TokenTable>(*grants);
    absl::MutexLock lock(&mu_);
    tokens_ = std::move(table);
  } else {
    auto table = std::make_shared<const NameTable>(*grants);
    absl::MutexLock lock(&mu_);
    names_ = std::move(table);
  }
  return absl::OkStatus();
}

std::string CallerPrincipal(const CallerCredentials& caller) {
  if (!caller.authorization.empty()) {
    const absl::string_view token = BearerToken(caller.authorization.front());
    if (!token.empty()) return absl::StrCat("token:", token);
  }
  if (!caller.certificate_name.empty()) return absl::StrCat("cert:", caller.certificate_name);
  return "";
}

absl::StatusOr<Role> Authorizer::RoleOf(const CallerCredentials& caller) const {
  std::shared_ptr<const TokenTable> tokens;
  std::shared_ptr<const NameTable> names;
  {
    absl::ReaderMutexLock lock(&mu_);
    tokens = tokens_;
    names = names_;
  }
  Role role = Role::kNone;
  if (tokens != nullptr && !caller.authorization.empty()) {
    if (caller.authorization.size() > 1) {
      return absl::UnauthenticatedError(
          absl::StrCat("more than one 'authorization' ", caller.carrier, " entry"));
    }
    const absl::string_view token = BearerToken(caller.authorization.front());
    if (token.empty()) {
      return absl::UnauthenticatedError(
          absl::StrCat("the 'authorization' ", caller.carrier,
                       " is not of the form 'Bearer TOKEN'"));
    }
    role = tokens->Find(token);
    if (role == Role::kNone) {
      return absl::UnauthenticatedError("the bearer token is not valid on this server");
    }
  }
  if (names != nullptr && !caller.certificate_name.empty()) {
    role = std::max(role, names->Find(caller.certificate_name));
  }
  if (role != Role::kNone) return role;
  if (tokens != nullptr) {
    return absl::UnauthenticatedError(absl::StrCat(
        "no credentials: send the ", caller.carrier, " 'authorization: Bearer TOKEN'"));
  }
  if (caller.certificate_name.empty()) {
    return absl::PermissionDeniedError("the client certificate has no common name with a role");
  }
  return absl::PermissionDeniedError(absl::StrCat("the client certificate '",
                                                  caller.certificate_name,
                                                  "' has no role on this server"));
}

absl::Status Authorizer::Check(const CallerCredentials& caller, Role required,
                               absl::string_view method) const {
  absl::StatusOr<Role> role = RoleOf(caller);
  if (!role.ok()) {
    return absl::Status(role.status().code(),
                        absl::StrCat(method, ": ", role.status().message()));
  }
  if (*role < required) {
    return absl::PermissionDeniedError(absl::StrCat(method, " needs role ", RoleName(required),
                                                    "; the caller has role ", RoleName(*role)));
  }
  return absl::OkStatus();
}

int64_t Authorizer::num_tokens() const {
  absl::ReaderMutexLock lock(&mu_);
  return tokens_ == nullptr ? 0 : tokens_->size();
}

int64_t Authorizer::num_certificate_names() const {
  absl::ReaderMutexLock lock(&mu_);
  return names_ == nullptr ? 0 : names_->size();
}

Authorizer::PollResult Authorizer::Poll() {
  absl::MutexLock poll_lock(&poll_mu_);
  PollResult result;
  for (WatchedFile& file : files_) {
    const FileStamp now = Stat(file.path);
    const bool stable = now == file.last_seen;
    file.last_seen = now;
    if (now == file.handled || !stable) continue;
    file.handled = now;  // loaded or rejected: either way reported once
    if (absl::Status s = Load(file); s.ok()) {
      ++result.reloaded;
    } else if (result.error.ok()) {
      result.error = s;
    }
  }
  return result;
}

void Authorizer::StartWatching(absl::Duration interval) {
  watcher_.Start(interval, [this] {
    const PollResult r = Poll();
    if (r.reloaded > 0) {
      GROVE_LOG(INFO) << "access control files reloaded" << KV("tokens", num_tokens())
                      << KV("certificate_names", num_certificate_names());
    }
    if (!r.error.ok()) {
      GROVE_LOG(ERROR) << "access control file rejected; the previous grants stay in force"
                       << KV("error", r.error.message());
    }
  });
}

void Authorizer::StopWatching() { watcher_.Stop(); }

}  // namespace grove::auth
