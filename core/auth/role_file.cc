#include "core/auth/role_file.h"

#include <cstddef>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace grove::auth {
namespace {

constexpr size_t kMaxNameLength = 1024;

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

absl::string_view StripBlanks(absl::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

absl::Status LineError(int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", what));
}

// Why `token` cannot be a token ("" when it can). Never quotes it.
std::string TokenProblem(absl::string_view token) {
  for (char c : token) {
    if (IsBlank(c)) return "more than one field after the role (expected ROLE TOKEN)";
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u > 0x7e) return "the token has a character outside visible ASCII (0x21-0x7e)";
  }
  if (token.size() < static_cast<size_t>(kMinTokenLength)) {
    return absl::StrCat("the token is shorter than ", kMinTokenLength, " characters");
  }
  if (token.size() > static_cast<size_t>(kMaxTokenLength)) {
    return absl::StrCat("the token is longer than ", kMaxTokenLength, " characters");
  }
  return "";
}

std::string NameProblem(absl::string_view name) {
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return "the certificate name has a control character";
  }
  if (name.size() > kMaxNameLength) {
    return absl::StrCat("the certificate name is longer than ", kMaxNameLength, " bytes");
  }
  return "";
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kInfer:
      return "infer";
    case Role::kAdmin:
      return "admin";
    case Role::kNone:
      break;
  }
  return "none";
}

absl::StatusOr<std::vector<RoleGrant>> ParseRoleFile(absl::string_view text, RoleFileKind kind) {
  const bool tokens = kind == RoleFileKind::kTokens;
  std::vector<RoleGrant> grants;
  absl::flat_hash_map<std::string, int> first_line;  // value -> line it was granted on
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    absl::string_view rest = StripBlanks(line);
    if (rest.empty() || rest.front() == '#') continue;
    size_t end = 0;
    while (end < rest.size() && !IsBlank(rest[end])) ++end;
    // The first field is not quoted in errors either: a line holding only a token would leak it.
    const absl::string_view role_text = rest.substr(0, end);
    Role role = Role::kNone;
    if (role_text == "infer") {
      role = Role::kInfer;
    } else if (role_text == "admin") {
      role = Role::kAdmin;
    } else {
      return LineError(line_no, tokens ? "expected ROLE TOKEN with ROLE infer or admin"
                                       : "expected ROLE NAME with ROLE infer or admin");
    }
    const absl::string_view value = StripBlanks(rest.substr(end));
    if (value.empty()) {
      return LineError(line_no, tokens ? "no token after the role" : "no name after the role");
    }
    const std::string problem = tokens ? TokenProblem(value) : NameProblem(value);
    if (!problem.empty()) return LineError(line_no, problem);
    auto [it, inserted] = first_line.emplace(std::string(value), line_no);
    if (!inserted) {
      return LineError(line_no, absl::StrCat(tokens ? "the same token as line "
                                                    : "the same certificate name as line ",
                                             it->second));
    }
    grants.push_back(RoleGrant{std::string(value), role, line_no});
  }
  if (grants.empty()) {
    return absl::InvalidArgumentError(
        tokens ? "no token: the file has no ROLE TOKEN line"
               : "no certificate name: the file has no ROLE NAME line");
  }
  return grants;
}

TokenTable::TokenTable(const std::vector<RoleGrant>& grants) {
  tokens_.reserve(grants.size());
  roles_.reserve(grants.size());
  for (const RoleGrant& g : grants) {
    if (g.value.empty()) continue;  // never matches anything; keeps Find's modulo defined
    tokens_.push_back(g.value);
    roles_.push_back(g.role);
  }
}

Role TokenTable::Find(absl::string_view token) const {
  int found = 0;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const std::string& stored = tokens_[i];
    // The loop runs over the caller's token (its length is the caller's own knowledge) and reads
    // the stored one cyclically, so neither its length nor its bytes change the work done.
    size_t diff = stored.size() ^ token.size();
    for (size_t j = 0; j < token.size(); ++j) {
      diff |= static_cast<unsigned char>(token[j]) ^
              static_cast<unsigned char>(stored[j % stored.size()]);
    }
    // No branch on the comparison; the highest role wins should a token be listed twice.
    const int role = static_cast<int>(diff == 0) * static_cast<int>(roles_[i]);
    found = role > found ? role : found;
  }
  return static_cast<Role>(found);
}

NameTable::NameTable(const std::vector<RoleGrant>& grants) {
  for (const RoleGrant& g : grants) roles_[g.value] = g.role;
}

Role NameTable::Find(absl::string_view name) const {
  auto it = roles_.find(name);
  return it == roles_.end() ? Role::kNone : it->second;
}

}  // namespace grove::auth
