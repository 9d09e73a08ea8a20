// Authorizer (core/auth/authorizer.h): decisions from tokens and certificate names, start-up
// errors, and reloading changed files by Poll() (no watcher thread: the test drives the polls).
#include "core/auth/authorizer.h"

#include <unistd.h>

#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace grove::auth {
namespace {

namespace fs = std::filesystem;

constexpr char kInfer[] = "infer-token-0123456789";
constexpr char kAdmin[] = "admin-token-abcdefghij";

class AuthorizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           absl::StrCat("grove_authorizer_test_", ::getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `text` to `name` by rename, as a Kubernetes Secret update or `mv` would.
  std::string Write(const std::string& name, const std::string& text) {
    const fs::path tmp = dir_ / (name + ".tmp");
    std::ofstream(tmp, std::ios::binary | std::ios::trunc) << text;
    fs::rename(tmp, dir_ / name);
    return (dir_ / name).string();
  }

  static CallerCredentials Bearer(const std::string& token) {
    static auto* values = new std::deque<std::string>;  // keeps every returned view valid
    values->push_back("Bearer " + token);
    CallerCredentials c;
    c.authorization.push_back(values->back());
    return c;
  }

  fs::path dir_;
};

TEST_F(AuthorizerTest, StartUpErrors) {
  EXPECT_EQ(Authorizer::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<Authorizer>> missing =
      Authorizer::Create({(dir_ / "absent").string(), ""});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "absent"));
  const std::string bad = Write("tokens", absl::StrCat("admin ", kAdmin, "\nadmin\n"));
  absl::StatusOr<std::unique_ptr<Authorizer>> a = Authorizer::Create({bad, ""});
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(a.status().message(), absl::StrCat("token file '", bad,
                                                                   "': line 2: no token")))
      << a.status().message();
  EXPECT_FALSE(absl::StrContains(a.status().message(), kAdmin));
}

TEST_F(AuthorizerTest, TokenDecisions) {
  absl::StatusOr<std::unique_ptr<Authorizer>> a = Authorizer::Create(
      {Write("tokens", absl::StrCat("infer ", kInfer, "\nadmin ", kAdmin, "\n")), ""});
  ASSERT_TRUE(a.ok()) << a.status();
  const Authorizer& auth = **a;
  EXPECT_TRUE(auth.tokens_enabled());
  EXPECT_FALSE(auth.certificates_enabled());
  EXPECT_EQ(auth.num_tokens(), 2);

  absl::Status none = auth.Check({}, Role::kInfer, "Predict");
  EXPECT_EQ(none.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(none.message(), "Predict: no credentials: send the metadata 'authorization: Bearer TOKEN'");
  CallerCredentials http;  // REST names the header, not gRPC's metadata
  http.carrier = "header";
  EXPECT_EQ(auth.Check(http, Role::kInfer, "ModelInfer").message(),
            "ModelInfer: no credentials: send the header 'authorization: Bearer TOKEN'");

  absl::Status unknown = auth.Check(Bearer("not-a-token-of-this-server"), Role::kInfer, "Predict");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_FALSE(absl::StrContains(unknown.message(), "not-a-token")) << unknown.message();

  CallerCredentials basic;
  basic.authorization.push_back("Basic dXNlcjpwYXNz");
  EXPECT_EQ(auth.Check(basic, Role::kInfer, "Predict").code(), absl::StatusCode::kUnauthenticated);
  CallerCredentials bare;
  bare.authorization.push_back(kAdmin);  // the token without the scheme
  EXPECT_EQ(auth.Check(bare, Role::kInfer, "Predict").code(), absl::StatusCode::kUnauthenticated);
  CallerCredentials two;
  const std::string a1 = absl::StrCat("Bearer ", kAdmin);
  two.authorization = {a1, a1};
  EXPECT_EQ(auth.Check(two, Role::kInfer, "Predict").code(), absl::StatusCode::kUnauthenticated);

  EXPECT_TRUE(auth.Check(Bearer(kInfer), Role::kInfer, "Predict").ok());
  absl::Status denied = auth.Check(Bearer(kInfer), Role::kAdmin, "UnloadModel");
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.message(), "UnloadModel needs role admin; the caller has role infer");
  EXPECT_TRUE(auth.Check(Bearer(kAdmin), Role::kInfer, "Predict").ok());
  EXPECT_TRUE(auth.Check(Bearer(kAdmin), Role::kAdmin, "UnloadModel").ok());

  // RFC 7235: the scheme is case-insensitive; blanks around the token are ignored.
  CallerCredentials lower;
  const std::string v = absl::StrCat("bearer   ", kAdmin, " ");
  lower.authorization.push_back(v);
  EXPECT_TRUE(auth.Check(lower, Role::kAdmin, "LoadModel").ok());
  // A certificate name means nothing without a certificate file.
  CallerCredentials cert_only;
  cert_only.certificate_name = "ops";
  EXPECT_EQ(auth.Check(cert_only, Role::kInfer, "Predict").code(),
            absl::StatusCode::kUnauthenticated);
}

TEST_F(AuthorizerTest, CertificateDecisions) {
  absl::StatusOr<std::unique_ptr<Authorizer>> a =
      Authorizer::Create({"", Write("names", "admin ops\ninfer app\n")});
  ASSERT_TRUE(a.ok()) << a.status();
  const Authorizer& auth = **a;
  CallerCredentials ops, app, other, anonymous;
  ops.certificate_name = "ops";
  app.certificate_name = "app";
  other.certificate_name = "intruder";
  EXPECT_TRUE(auth.Check(ops, Role::kAdmin, "UnloadModel").ok());
  EXPECT_TRUE(auth.Check(app, Role::kInfer, "Predict").ok());
  absl::Status s = auth.Check(app, Role::kAdmin, "UnloadModel");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "UnloadModel needs role admin; the caller has role infer");
  s = auth.Check(other, Role::kInfer, "Predict");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "Predict: the client certificate 'intruder' has no role on this server");
  EXPECT_EQ(auth.Check(anonymous, Role::kInfer, "Predict").code(),
            absl::StatusCode::kPermissionDenied);
  // Tokens mean nothing without a token file.
  EXPECT_EQ(auth.Check(Bearer(kAdmin), Role::kInfer, "Predict").code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(AuthorizerTest, TokensAndCertificatesTogether) {
  absl::StatusOr<std::unique_ptr<Authorizer>> a =
      Authorizer::Create({Write("tokens", absl::StrCat("infer ", kInfer, "\n")),
                          Write("names", "admin ops\n")});
  ASSERT_TRUE(a.ok()) << a.status();
  CallerCredentials ops;
  ops.certificate_name = "ops";
  EXPECT_TRUE((*a)->Check(ops, Role::kAdmin, "LoadModel").ok());  // certificate alone
  CallerCredentials ops_infer = Bearer(kInfer);
  ops_infer.certificate_name = "ops";
  EXPECT_TRUE((*a)->Check(ops_infer, Role::kAdmin, "LoadModel").ok());  // the higher role
  CallerCredentials ops_bad = Bearer("unknown-token-0123456789");
  ops_bad.certificate_name = "ops";
  EXPECT_EQ((*a)->Check(ops_bad, Role::kInfer, "Predict").code(),
            absl::StatusCode::kUnauthenticated);  // a wrong token is never ignored
  CallerCredentials stranger;
  stranger.certificate_name = "app";
  EXPECT_EQ((*a)->Check(stranger, Role::kInfer, "Predict").code(),
            absl::StatusCode::kUnauthenticated);  // tokens on: the missing token is the problem
}

// The owner of what a caller registers: its token when it sent one (whatever its certificate),
// else its certificate's name, else nobody in particular; a token and a name never coincide.
TEST_F(AuthorizerTest, CallerPrincipalIsTokenThenCertificateThenNone) {
  CallerCredentials both = Bearer(kInfer);
  both.certificate_name = "ops";
  EXPECT_EQ(CallerPrincipal(both), absl::StrCat("token:", kInfer));
  CallerCredentials name;
  name.certificate_name = kInfer;
  EXPECT_EQ(CallerPrincipal(name), absl::StrCat("cert:", kInfer));
  EXPECT_NE(CallerPrincipal(name), CallerPrincipal(Bearer(kInfer)));
  EXPECT_EQ(CallerPrincipal(CallerCredentials()), "");
  EXPECT_NE(CallerPrincipal(Bearer(kInfer)), CallerPrincipal(Bearer(absl::StrCat(kInfer, "x"))));
}

TEST_F(AuthorizerTest, PollReloadsStableChangesAndKeepsGrantsOnBadFiles) {
  const std::string path = Write("tokens", absl::StrCat("admin ", kAdmin, "\n"));
  absl::StatusOr<std::unique_ptr<Authorizer>> a = Authorizer::Create({path, ""});
  ASSERT_TRUE(a.ok()) << a.status();
  Authorizer& auth = **a;
  EXPECT_EQ(auth.Poll().reloaded, 0);  // unchanged

  // A new file is read once it stayed the same for one poll.
  const std::string rotated = "rotated-admin-token-0123";
  Write("tokens", absl::StrCat("admin ", rotated, "\ninfer ", kInfer, "\n"));
  Authorizer::PollResult first = auth.Poll();
  EXPECT_EQ(first.reloaded, 0);
  EXPECT_TRUE(first.error.ok());
  EXPECT_TRUE(auth.Check(Bearer(kAdmin), Role::kAdmin, "LoadModel").ok());
  Authorizer::PollResult second = auth.Poll();
  EXPECT_EQ(second.reloaded, 1);
  EXPECT_TRUE(second.error.ok()) << second.error;
  EXPECT_EQ(auth.Check(Bearer(kAdmin), Role::kAdmin, "LoadModel").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(auth.Check(Bearer(rotated), Role::kAdmin, "LoadModel").ok());
  EXPECT_EQ(auth.num_tokens(), 2);
  EXPECT_EQ(auth.Poll().reloaded, 0);

  // A malformed file is reported once and the previous grants stay.
  Write("tokens", absl::StrCat("admin ", rotated, "\nsuperuser ", kAdmin, "xyz\n"));
  EXPECT_TRUE(auth.Poll().error.ok());
  Authorizer::PollResult bad = auth.Poll();
  EXPECT_EQ(bad.reloaded, 0);
  EXPECT_EQ(bad.error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.error.message(), "line 2")) << bad.error;
  EXPECT_FALSE(absl::StrContains(bad.error.message(), kAdmin)) << bad.error;
  EXPECT_TRUE(auth.Poll().error.ok());  // the same bad state: not reported again
  EXPECT_TRUE(auth.Check(Bearer(rotated), Role::kAdmin, "LoadModel").ok());

  // A removed file too.
  fs::remove(path);
  auth.Poll();
  EXPECT_EQ(auth.Poll().error.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(auth.Poll().error.ok());
  EXPECT_TRUE(auth.Check(Bearer(rotated), Role::kAdmin, "LoadModel").ok());

  // A good file again.
  Write("tokens", absl::StrCat("infer ", kInfer, "\n"));
  auth.Poll();
  EXPECT_EQ(auth.Poll().reloaded, 1);
  EXPECT_EQ(auth.Check(Bearer(rotated), Role::kInfer, "Predict").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(auth.Check(Bearer(kInfer), Role::kInfer, "Predict").ok());
}

}  // namespace
}  // namespace grove::auth
