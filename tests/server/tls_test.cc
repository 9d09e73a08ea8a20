// groved's TLS and mutual TLS: certificates are made with the openssl command at test time (the
// test skips when it is missing); a client with a certificate signed by --tls_client_ca_file gets
// in, a client without one does not.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
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

TEST(Tls, MutualTlsNeedsAClientCertificate) {
  if (!Sh("openssl version")) GTEST_SKIP() << "no openssl command";
  const fs::path dir = fs::temp_directory_path() / absl::StrCat("grove_tls_", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir / "repo");
  ASSERT_TRUE(MakeCertificates(dir));
  ServerOptions o;
  o.runtime.model_repository = (dir / "repo").string();
  o.grpc_address = "127.0.0.1";
  o.grpc_port = 0;
  o.metrics_port = -1;
  o.repository_poll = absl::ZeroDuration();
  o.tls_cert_file = (dir / "server.pem").string();
  o.tls_key_file = (dir / "server.key").string();
  o.tls_client_ca_file = (dir / "ca.pem").string();
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
  o.tls_cert_file = "/nonexistent/cert.pem";
  absl::StatusOr<std::unique_ptr<GroveServer>> server = GroveServer::Start(o);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace grove::server
