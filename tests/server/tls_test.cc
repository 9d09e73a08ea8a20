// groved's TLS and mutual TLS: certificates are made with the openssl command at test time (the
// test skips when it is missing); a client with a certificate signed by --tls_client_ca_file gets
// in, a client without one does not; --tls_client_roles_file gives certificates roles by their
// common name, and is re-read when it changes.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grove/v1/grove.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/server.h"

namespace grove::server {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Sh(const std::string& cmd) { return std::system(("(" + cmd + ") >/dev/null 2>&1").c_str()) == 0; }

// CA, server certificate for 127.0.0.1 / localhost, client certificate, all signed by the CA.
bool MakeCertificates(const fs::path& dir) {
  const std::string d = dir.string();
  std::ofstream(dir / "san.cnf") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
  return Sh(absl::StrCat("cd ", d,
                          " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem"
                          " -days 2 -subj /CN=grove-test-ca")) &&
         Sh(absl::StrCat("cd ", d,
                          " && openssl req -newkey rsa:2048 -nodes -keyout server.key -out "
                          "server.csr -subj /CN=localhost && openssl x509 -req -in server.csr -CA "
                          "ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 "
                          "-extfile san.cnf")) &&
         Sh(absl::StrCat("cd ", d,
                          " && openssl req -newkey rsa:2048 -nodes -keyout client.key -out "
                          "client.csr -subj /CN=grove-client && openssl x509 -req -in client.csr "
                          "-CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2"));
}

bool Live(const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  auto stub = inference::GRPCInferenceService::NewStub(grpc::CreateChannel(target, creds));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  inference::ServerLiveResponse r;
  return stub->ServerLive(&ctx, {}, &r).ok() && r.live();
}

// A server on loopback over dir/repo with the certificates of MakeCertificates, mutual TLS.
ServerOptions MutualTlsOptions(const fs::path& dir) {
  ServerOptions o;
  o.runtime.model_repository = (dir / "repo").string();
  o.grpc_address = "127.0.0.1";
  o.grpc_port = 0;
  o.metrics_port = -1;
  o.http.port = -1;
  o.repository_poll = absl::ZeroDuration();
  o.tls_cert_file = (dir / "server.pem").string();
  o.tls_key_file = (dir / "server.key").string();
  o.tls_client_ca_file = (dir / "ca.pem").string();
  return o;
}

TEST(Tls, MutualTlsNeedsAClientCertificate) {
  if (!Sh("openssl version")) GTEST_SKIP() << "no openssl command";
  const fs::path dir = fs::temp_directory_path() / absl::StrCat("grove_tls_", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir / "repo");
  ASSERT_TRUE(MakeCertificates(dir));
  ServerOptions o = MutualTlsOptions(dir);
  absl::StatusOr<std::unique_ptr<GroveServer>> server = GroveServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string target = absl::StrCat("localhost:", (*server)->grpc_port());

  grpc::SslCredentialsOptions with_cert;
  with_cert.pem_root_certs = Read(dir / "ca.pem");
  with_cert.pem_private_key = Read(dir / "client.key");
  with_cert.pem_cert_chain = Read(dir / "client.pem");
  EXPECT_TRUE(Live(target, grpc::SslCredentials(with_cert)));

  grpc::SslCredentialsOptions no_cert;
  no_cert.pem_root_certs = Read(dir / "ca.pem");
  EXPECT_FALSE(Live(target, grpc::SslCredentials(no_cert)));
  EXPECT_FALSE(Live(target, grpc::InsecureChannelCredentials()));

  server->reset();
  fs::remove_all(dir);
}

TEST(Tls, MissingKeyIsAStartError) {
  ServerOptions o;
  o.runtime.model_repository = fs::temp_directory_path().string();
  o.grpc_port = 0;
  o.metrics_port = -1;
  o.http.port = -1;
  o.tls_cert_file = "/nonexistent/cert.pem";
  absl::StatusOr<std::unique_ptr<GroveServer>> server = GroveServer::Start(o);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Tls, ClientCertificateRolesByCommonName) {
  if (!Sh("openssl version")) GTEST_SKIP() << "no openssl command";
  const fs::path dir = fs::temp_directory_path() / absl::StrCat("grove_tls_roles_", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir / "repo");
  ASSERT_TRUE(MakeCertificates(dir));
  std::ofstream(dir / "roles") << "# CN of the client certificate\ninfer grove-client\n";
  ServerOptions o = MutualTlsOptions(dir);
  o.tls_client_roles_file = (dir / "roles").string();
  o.auth_poll = absl::Milliseconds(20);
  o.model_control = true;
  absl::StatusOr<std::unique_ptr<GroveServer>> server = GroveServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = Read(dir / "ca.pem");
  ssl.pem_private_key = Read(dir / "client.key");
  ssl.pem_cert_chain = Read(dir / "client.pem");
  auto stub = grove::v1::Grove::NewStub(grpc::CreateChannel(
      absl::StrCat("localhost:", (*server)->grpc_port()), grpc::SslCredentials(ssl)));
  auto unload = [&stub] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grove::v1::UnloadModelRequest req;
    req.set_model("absent");
    grove::v1::UnloadModelResponse resp;
    return stub->UnloadModel(&ctx, req, &resp);
  };
  {
    grpc::ClientContext ctx;
    grove::v1::ListModelsResponse resp;
    grpc::Status s = stub->ListModels(&ctx, {}, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  grpc::Status denied = unload();
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED) << denied.error_message();
  EXPECT_TRUE(absl::StrContains(denied.error_message(), "needs role admin"));

  // Promote the certificate: the file is re-read once it changed and stayed unchanged for a poll.
  std::ofstream(dir / "roles.tmp") << "admin grove-client\n";
  fs::rename(dir / "roles.tmp", dir / "roles");
  grpc::Status s = unload();
  for (int i = 0; i < 500 && s.error_code() == grpc::StatusCode::PERMISSION_DENIED; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the watcher's own thread
    s = unload();
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();  // admitted

  server->reset();
  fs::remove_all(dir);
}


// curl's HTTP status for `args` (0 when the connection or the TLS handshake failed).
int CurlStatus(const fs::path& dir, const std::string& args) {
  const fs::path out = dir / "curl_status";
  std::system(absl::StrCat("curl -s -o /dev/null -w '%{http_code}' ", args, " > ", out.string(),
                           " 2>/dev/null")
                  .c_str());
  const std::string text = Read(out);
  return text.empty() ? 0 : std::atoi(text.c_str());
}

TEST(Tls, RestPortServesMutualTlsWithCertificateRoles) {
  if (!Sh("openssl version") || !Sh("curl --version")) GTEST_SKIP() << "no openssl or curl";
  const fs::path dir = fs::temp_directory_path() / absl::StrCat("grove_tls_rest_", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir / "repo");
  ASSERT_TRUE(MakeCertificates(dir));
  std::ofstream(dir / "roles") << "infer grove-client\n";
  ServerOptions o = MutualTlsOptions(dir);
  o.tls_client_roles_file = (dir / "roles").string();
  o.http.address = "127.0.0.1";
  o.http.port = 0;
  absl::StatusOr<std::unique_ptr<GroveServer>> server = GroveServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->WaitUntilLoaded().ok());
  const std::string url = absl::StrCat("https://localhost:", (*server)->http_port(), "/v2");
  const std::string ca = absl::StrCat("--cacert ", (dir / "ca.pem").string());
  const std::string cert = absl::StrCat(" --cert ", (dir / "client.pem").string(), " --key ",
                                        (dir / "client.key").string());
  EXPECT_EQ(CurlStatus(dir, ca + cert + " " + url), 200);  // role infer from the certificate
  EXPECT_EQ(CurlStatus(dir, ca + " " + url), 0);           // no client certificate: no handshake
  EXPECT_EQ(CurlStatus(dir, absl::StrCat("http://localhost:", (*server)->http_port(), "/v2")), 0);
  server->reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace grove::server
