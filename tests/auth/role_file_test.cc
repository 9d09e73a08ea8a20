// Role files (core/auth/role_file.h): the format, the errors (line numbers, never a token), and the
// constant-time token lookup.
#include "core/auth/role_file.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace grove::auth {
namespace {

constexpr char kInferToken[] = "infer-token-0123456789";
constexpr char kAdminToken[] = "admin-token-abcdefghij";

TEST(ParseRoleFile, TokensWithCommentsBlankLinesAndCrlf) {
  const std::string text = std::string("# groved tokens\n\n  infer ") + kInferToken +
                           "  \r\n\t# indented comment\nadmin\t" + kAdminToken + "\n   \n";
  absl::StatusOr<std::vector<RoleGrant>> grants = ParseRoleFile(text, RoleFileKind::kTokens);
  ASSERT_TRUE(grants.ok()) << grants.status();
  ASSERT_EQ(grants->size(), 2u);
  EXPECT_EQ((*grants)[0].value, kInferToken);
  EXPECT_EQ((*grants)[0].role, Role::kInfer);
  EXPECT_EQ((*grants)[0].line, 3);
  EXPECT_EQ((*grants)[1].value, kAdminToken);
  EXPECT_EQ((*grants)[1].role, Role::kAdmin);
  EXPECT_EQ((*grants)[1].line, 5);
}

TEST(ParseRoleFile, ErrorsNameTheLineAndNeverTheToken) {
  const std::string secret = "s3cret-value-that-must-not-leak";
  struct Case {
    std::string text;
    std::string want;  // part of the message
  };
  const std::vector<Case> cases = {
      {"infer " + secret + "\nroot " + secret + "x\n", "line 2: expected ROLE TOKEN"},
      {secret + "\n", "line 1: expected ROLE TOKEN"},  // a token without a role
      {"# c\nadmin\n", "line 2: no token after the role"},
      {"admin " + secret + " extra\n", "line 1: more than one field"},
      {"admin short\n", "line 1: the token is shorter than 16"},
      {"admin " + std::string(4097, 'a') + "\n", "line 1: the token is longer than 4096"},
      {"admin " + secret + "\x01\n", "line 1: the token has a character outside visible ASCII"},
      {"admin " + secret + "\xc3\xa9\n", "line 1: the token has a character outside"},
      {"infer " + secret + "\n\nadmin " + secret + "\n", "line 3: the same token as line 1"},
      {"Admin " + secret + "\n", "line 1: expected ROLE TOKEN with ROLE infer or admin"},
      {"", "no token"},
      {"# only comments\n\n", "no token"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<RoleGrant>> grants = ParseRoleFile(c.text, RoleFileKind::kTokens);
    ASSERT_FALSE(grants.ok()) << c.want;
    EXPECT_EQ(grants.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(grants.status().message(), c.want))
        << grants.status().message() << " (want " << c.want << ")";
    EXPECT_FALSE(absl::StrContains(grants.status().message(), "s3cret"))
        << grants.status().message();
  }
}

TEST(ParseRoleFile, CertificateNamesKeepInnerSpaces) {
  absl::StatusOr<std::vector<RoleGrant>> grants = ParseRoleFile(
      "admin  ops console  \ninfer grove-client\n", RoleFileKind::kCertificateNames);
  ASSERT_TRUE(grants.ok()) << grants.status();
  ASSERT_EQ(grants->size(), 2u);
  EXPECT_EQ((*grants)[0].value, "ops console");
  EXPECT_EQ((*grants)[1].value, "grove-client");
  // Names have no minimum length, but no control characters and no duplicates.
  EXPECT_TRUE(ParseRoleFile("infer a\n", RoleFileKind::kCertificateNames).ok());
  absl::StatusOr<std::vector<RoleGrant>> dup =
      ParseRoleFile("infer a\nadmin a\n", RoleFileKind::kCertificateNames);
  ASSERT_FALSE(dup.ok());
  EXPECT_TRUE(absl::StrContains(dup.status().message(), "line 2: the same certificate name as line 1"))
      << dup.status().message();
  absl::StatusOr<std::vector<RoleGrant>> ctl =
      ParseRoleFile("infer a\x7f\n", RoleFileKind::kCertificateNames);
  ASSERT_FALSE(ctl.ok());
  EXPECT_TRUE(absl::StrContains(ctl.status().message(), "control character"));
  EXPECT_FALSE(ParseRoleFile("admin\n", RoleFileKind::kCertificateNames).ok());
}

TEST(TokenTable, FindsExactTokensOnly) {
  const TokenTable table(*ParseRoleFile(
      std::string("infer ") + kInferToken + "\nadmin " + kAdminToken + "\n",
      RoleFileKind::kTokens));
  EXPECT_EQ(table.size(), 2);
  EXPECT_EQ(table.Find(kInferToken), Role::kInfer);
  EXPECT_EQ(table.Find(kAdminToken), Role::kAdmin);
  const std::string admin = kAdminToken;
  EXPECT_EQ(table.Find(""), Role::kNone);
  EXPECT_EQ(table.Find(admin.substr(0, admin.size() - 1)), Role::kNone);  // prefix
  EXPECT_EQ(table.Find(admin + "x"), Role::kNone);                        // longer
  EXPECT_EQ(table.Find(admin + admin), Role::kNone);  // the cyclic read must not match
  std::string flipped = admin;
  flipped[5] ^= 1;
  EXPECT_EQ(table.Find(flipped), Role::kNone);
  EXPECT_EQ(TokenTable().Find(kAdminToken), Role::kNone);
}

TEST(TokenTable, TheHighestRoleWinsForARepeatedToken) {
  // ParseRoleFile refuses duplicates; a table built by hand still answers one valid role.
  const TokenTable table({RoleGrant{kAdminToken, Role::kInfer, 1},
                          RoleGrant{kAdminToken, Role::kAdmin, 2}});
  EXPECT_EQ(table.Find(kAdminToken), Role::kAdmin);
}

TEST(NameTable, FindsNames) {
  const NameTable table(*ParseRoleFile("admin ops\ninfer app\n", RoleFileKind::kCertificateNames));
  EXPECT_EQ(table.Find("ops"), Role::kAdmin);
  EXPECT_EQ(table.Find("app"), Role::kInfer);
  EXPECT_EQ(table.Find("App"), Role::kNone);
  EXPECT_EQ(table.Find(""), Role::kNone);
}

std::string ReadDoc() {
  std::ifstream in(std::string(GROVE_SOURCE_DIR) + "/docs/operations.md");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The example files of docs/operations.md ("Authentication") parse as documented.
std::string DocumentedFile(const std::string& first_line) {
  const std::string doc = ReadDoc();
  std::string out;
  bool in = false;
  for (absl::string_view line : absl::StrSplit(doc, '\n')) {
    if (!in && line == "    " + first_line) in = true;
    if (!in) continue;
    if (line.empty()) break;
    out += std::string(line.substr(4)) + "\n";
  }
  return out;
}

TEST(ParseRoleFile, DocumentedExamples) {
  absl::StatusOr<std::vector<RoleGrant>> tokens = ParseRoleFile(
      DocumentedFile("# /etc/grove/tokens -- ROLE TOKEN, one per line"), RoleFileKind::kTokens);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0].role, Role::kInfer);
  EXPECT_EQ((*tokens)[1].role, Role::kAdmin);
  absl::StatusOr<std::vector<RoleGrant>> names = ParseRoleFile(
      DocumentedFile("# /etc/grove/client-roles -- ROLE NAME: the subject common name (CN) of a "
                     "client certificate"),
      RoleFileKind::kCertificateNames);
  ASSERT_TRUE(names.ok()) << names.status();
  ASSERT_EQ(names->size(), 2u);
  EXPECT_EQ((*names)[0].value, "grove-ops");
  EXPECT_EQ((*names)[1].value, "checkout service");
}

TEST(RoleName, Names) {
  EXPECT_STREQ(RoleName(Role::kNone), "none");
  EXPECT_STREQ(RoleName(Role::kInfer), "infer");
  EXPECT_STREQ(RoleName(Role::kAdmin), "admin");
}

}  // namespace
}  // namespace grove::auth
