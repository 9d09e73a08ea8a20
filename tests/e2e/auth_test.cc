// End-to-end access control of the real groved binary, driven as docs/operations.md
// ("Authentication", "Secure defaults") tells operators to: default flags refuse model control;
// with --auth_token_file a call without a token is UNAUTHENTICATED, an infer token predicts but is
// PERMISSION_DENIED on UnloadModel, an admin token unloads and loads; the `grove` CLI sends
// --token or $GROVE_TOKEN; a rewritten token file is picked up without a restart and a bad one
// keeps the old tokens; tokens never reach the log; --help tells the truth about the flags.
//
// Served model: examples/models/demo (the one the docs use), rows examples/rows.csv.
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/grove_client.h"
#include "gtest/gtest.h"
#include "tests/e2e/groved_process.h"

namespace grove::e2e {
namespace {

namespace fs = std::filesystem;
using client::GroveClient;

const std::string kDemoModel = std::string(GROVE_SOURCE_DIR) + "/examples/models/demo/1/model.json";
const std::string kRows = std::string(GROVE_SOURCE_DIR) + "/examples/rows.csv";
constexpr char kInferToken[] = "e2e-infer-3f9c2d7e61a84b05c1d2";
constexpr char kAdminToken[] = "e2e-admin-9a8b7c6d5e4f30211f2e";

class AuthE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!IsExecutable(GrovedBinary())) GTEST_SKIP() << "groved is not built";
    scratch_ = std::make_unique<TempDir>("auth");
    repo_ = std::make_unique<TempDir>("authrepo");
    InstallModel(repo_->path(), "demo", 1, kDemoModel);
    tokens_ = scratch_->File("tokens");
    WriteTokens(absl::StrCat("# groved tokens: ROLE TOKEN\ninfer ", kInferToken, "\n\nadmin ",
                             kAdminToken, "\n"));
  }

  // Replaces the token file by rename (what a Kubernetes Secret update does).
  void WriteTokens(const std::string& text) {
    WriteWholeFile(tokens_ + ".new", text);
    fs::rename(tokens_ + ".new", tokens_);
  }

  std::unique_ptr<GrovedProcess> StartServer(const std::vector<std::string>& flags) {
    absl::StatusOr<std::unique_ptr<GrovedProcess>> s =
        GrovedProcess::Start({repo_->path(), flags});
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  static std::unique_ptr<GroveClient> Client(const GrovedProcess& server,
                                             const std::string& token) {
    client::ClientOptions o;
    o.target = server.target();
    o.token = token;
    o.default_timeout = absl::Seconds(60);
    std::unique_ptr<GroveClient> c = *GroveClient::Create(o);
    // Connected before the test's first call (readiness needs no token): a first connection
    // attempt that fails (the sandbox's connect() has returned ENOENT on loopback TCP) is retried
    // here instead of failing that call UNAVAILABLE.
    const absl::Status up = c->WaitForReady(absl::Seconds(60));
    EXPECT_TRUE(up.ok()) << up;
    return c;
  }

  static absl::Status Predict(GroveClient& c) {
    const std::vector<float> row = {0.5f, -1, 2, 0, 1, -0.25f, 0.75f, 3};
    client::PredictParams p;
    p.model = "demo";
    return c.Predict(p, row.data(), 1, 8).status();
  }

  CommandResult Cli(const std::vector<std::string>& prefix, const GrovedProcess& server,
                    const std::vector<std::string>& extra = {}) {
    std::vector<std::string> cmd = prefix;
    cmd.insert(cmd.end(), {GroveCliBinary(), "predict", "--server", server.target(), "--model",
                           "demo", "--input", kRows, "--no-progress", "--timeout", "60"});
    cmd.insert(cmd.end(), extra.begin(), extra.end());
    return RunCommand(cmd, *scratch_);
  }

  std::unique_ptr<TempDir> scratch_;
  std::unique_ptr<TempDir> repo_;
  std::string tokens_;
};

// The default flags: model control is off, with a status that names the flag; inference is open.
TEST_F(AuthE2eTest, DefaultFlagsRefuseModelControl) {
  std::unique_ptr<GrovedProcess> server = StartServer({});
  ASSERT_NE(server, nullptr);
  std::unique_ptr<GroveClient> c = Client(*server, "");
  ASSERT_TRUE(c->WaitForReady(absl::Seconds(60)).ok()) << server->log();
  EXPECT_TRUE(Predict(*c).ok());
  absl::Status unload = c->UnloadModel("demo");
  EXPECT_EQ(unload.code(), absl::StatusCode::kUnimplemented) << unload;
  EXPECT_TRUE(absl::StrContains(unload.message(), "--model_control")) << unload;
  EXPECT_EQ(c->LoadModel("demo").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(Predict(*c).ok());  // still loaded
  EXPECT_TRUE(absl::StrContains(server->log(), "model_control=off")) << server->log();

  // Switched on without access control: it works, and the log warns that anyone may use it.
  std::unique_ptr<GrovedProcess> open = StartServer({"--model_control"});
  ASSERT_NE(open, nullptr);
  std::unique_ptr<GroveClient> oc = Client(*open, "");
  ASSERT_TRUE(oc->WaitForReady(absl::Seconds(60)).ok()) << open->log();
  EXPECT_TRUE(oc->UnloadModel("demo").ok());
  EXPECT_TRUE(oc->LoadModel("demo").ok());
  EXPECT_TRUE(absl::StrContains(open->log(), "anyone who can reach the gRPC port can load and "
                                             "unload models"))
      << open->log();
}

TEST_F(AuthE2eTest, TokensAndRoles) {
  std::unique_ptr<GrovedProcess> server =
      StartServer({"--auth_token_file=" + tokens_, "--model_control"});
  ASSERT_NE(server, nullptr);
  std::unique_ptr<GroveClient> anonymous = Client(*server, "");
  // Readiness stays open (load balancers and WaitForReady need no token).
  ASSERT_TRUE(anonymous->WaitForReady(absl::Seconds(60)).ok()) << server->log();

  absl::Status none = Predict(*anonymous);
  EXPECT_EQ(none.code(), absl::StatusCode::kUnauthenticated) << none;
  EXPECT_EQ(anonymous->UnloadModel("demo").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Predict(*Client(*server, "not-a-valid-token-0123456789")).code(),
            absl::StatusCode::kUnauthenticated);
  client::ClientOptions bad;
  bad.target = server->target();
  bad.token = absl::StrCat(kInferToken, "\n");  // e.g. read from a file with its newline
  absl::StatusOr<std::unique_ptr<GroveClient>> refused = GroveClient::Create(bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(absl::StrContains(refused.status().message(), kInferToken));

  std::unique_ptr<GroveClient> infer = Client(*server, kInferToken);
  EXPECT_TRUE(Predict(*infer).ok());
  EXPECT_TRUE(infer->ListModels().ok());
  absl::Status denied = infer->UnloadModel("demo");
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied) << denied;
  EXPECT_EQ(denied.message(), "UnloadModel needs role admin; the caller has role infer");
  EXPECT_TRUE(Predict(*infer).ok());

  std::unique_ptr<GroveClient> admin = Client(*server, kAdminToken);
  EXPECT_TRUE(admin->UnloadModel("demo").ok());
  EXPECT_EQ(Predict(*infer).code(), absl::StatusCode::kUnavailable);  // unloaded
  absl::StatusOr<client::ModelInfo> loaded = admin->LoadModel("demo");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->ready);
  EXPECT_TRUE(Predict(*infer).ok());

  // The CLI: --token, or $GROVE_TOKEN; the answers are the local CLI's.
  CommandResult local = RunCommand({GroveCliBinary(), "predict", "--model", kDemoModel, "--input",
                                    kRows, "--no-progress"},
                                   *scratch_);
  ASSERT_EQ(local.exit_code, 0) << local.err;
  CommandResult with_flag = Cli({}, *server, {"--token", kInferToken});
  EXPECT_EQ(with_flag.exit_code, 0) << with_flag.err;
  EXPECT_EQ(with_flag.out, local.out);
  CommandResult with_env =
      Cli({"/usr/bin/env", absl::StrCat("GROVE_TOKEN=", kInferToken)}, *server);
  EXPECT_EQ(with_env.exit_code, 0) << with_env.err;
  EXPECT_EQ(with_env.out, local.out);
  CommandResult without = Cli({"/usr/bin/env", "-u", "GROVE_TOKEN"}, *server);
  EXPECT_EQ(without.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(without.err, "UNAUTHENTICATED")) << without.err;

  // Tokens never reach the log.
  const std::string log = server->log();
  EXPECT_TRUE(absl::StrContains(log, "auth=tokens")) << log;
  EXPECT_FALSE(absl::StrContains(log, kInferToken)) << log;
  EXPECT_FALSE(absl::StrContains(log, kAdminToken)) << log;
}

// A rewritten token file takes effect without a restart; a malformed one is logged once and the
// previous tokens stay in force.
TEST_F(AuthE2eTest, TokenFileReload) {
  std::unique_ptr<GrovedProcess> server =
      StartServer({"--auth_token_file=" + tokens_, "--auth_poll_seconds=1"});
  ASSERT_NE(server, nullptr);
  std::unique_ptr<GroveClient> old_infer = Client(*server, kInferToken);
  ASSERT_TRUE(old_infer->WaitForReady(absl::Seconds(60)).ok()) << server->log();
  ASSERT_TRUE(Predict(*old_infer).ok());

  const std::string rotated = "e2e-rotated-0f1e2d3c4b5a69788796";
  WriteTokens(absl::StrCat("infer ", rotated, "\n"));
  std::unique_ptr<GroveClient> new_infer = Client(*server, rotated);
  // The poller re-reads the file within two polls (it waits for one unchanged poll).
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (Predict(*new_infer).code() == absl::StatusCode::kUnauthenticated &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(Predict(*new_infer).ok()) << server->log();
  EXPECT_EQ(Predict(*old_infer).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(server->log(), "access control files reloaded")) << server->log();

  // A malformed file: an error in the log (line number, no token), the rotated token still works.
  const std::string leaked = "e2e-must-not-leak-5a6b7c8d9e0f";
  WriteTokens(absl::StrCat("infer ", rotated, "\nroot ", leaked, "\n"));
  const std::string want = "line 2: expected ROLE TOKEN";
  const auto end2 = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!absl::StrContains(server->log(), want) && std::chrono::steady_clock::now() < end2) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::string log = server->log();
  EXPECT_TRUE(absl::StrContains(log, want)) << log;
  EXPECT_TRUE(absl::StrContains(log, "the previous grants stay in force")) << log;
  EXPECT_FALSE(absl::StrContains(log, leaked)) << log;
  EXPECT_FALSE(absl::StrContains(log, rotated)) << log;
  EXPECT_TRUE(Predict(*new_infer).ok());
}

// A token file that cannot be used stops groved at start, naming the line but not the token.
TEST_F(AuthE2eTest, MalformedTokenFileIsAStartError) {
  const std::string secret = "e2e-secret-in-a-bad-line-0123";
  WriteTokens(absl::StrCat("infer ", kInferToken, "\nadmin ", secret, " trailing\n"));
  absl::StatusOr<std::unique_ptr<GrovedProcess>> s =
      GrovedProcess::Start({repo_->path(), {"--auth_token_file=" + tokens_}});
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.status().message(), "line 2: more than one field"))
      << s.status();
  EXPECT_FALSE(absl::StrContains(s.status().message(), secret)) << s.status();
}

// `groved --help` documents the access-control flags and the secure default of --model_control.
TEST_F(AuthE2eTest, HelpTellsTheTruth) {
  CommandResult r = RunCommand({GrovedBinary(), "--helpfull"}, *scratch_);
  const std::string text = r.out + r.err;
  for (const char* flag : {"--auth_token_file", "--tls_client_roles_file", "--auth_poll_seconds"}) {
    EXPECT_TRUE(absl::StrContains(text, flag)) << flag << "\n" << text;
  }
  const size_t at = text.find("--model_control (");  // the flag's entry, not the usage line
  ASSERT_NE(at, std::string::npos) << text;
  const std::string entry = text.substr(at, text.find(';', text.find("default:", at)) - at);
  EXPECT_TRUE(absl::StrContains(entry, "default: false")) << entry;
  EXPECT_TRUE(absl::StrContains(entry, "admin")) << entry;
}

// `groved --help` lists groved's own flags (not "No flags matched"), and `--version` names the
// version and the build instead of Abseil's "Debug build" line.
TEST_F(AuthE2eTest, HelpAndVersionNameGrovedsFlagsAndVersion) {
  CommandResult help = RunCommand({GrovedBinary(), "--help"}, *scratch_);
  const std::string text = help.out + help.err;
  EXPECT_FALSE(absl::StrContains(text, "No flags matched")) << text;
  for (const char* flag : {"--model_repository", "--grpc_port", "--max_queue_wait_ms"}) {
    EXPECT_TRUE(absl::StrContains(text, flag)) << flag << "\n" << text;
  }
  CommandResult version = RunCommand({GrovedBinary(), "--version"}, *scratch_);
  EXPECT_TRUE(absl::StartsWith(version.out, "groved 0.")) << version.out << version.err;
  EXPECT_TRUE(absl::StrContains(version.out, "CUDA engines:")) << version.out;
  EXPECT_FALSE(absl::StrContains(version.out + version.err, "NDEBUG")) << version.out;
}

}  // namespace
}  // namespace grove::e2e
