// groved's access control through real gRPC calls (in-process servers on loopback): every RPC of
// grove.v1.Grove and inference.GRPCInferenceService, found through the protobuf descriptors so that
// a new RPC without a check fails here, answers UNAUTHENTICATED without a token, and the roles
// decide what a valid token may do; health stays open; model control is off by default.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "grove/v1/grove.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "server/server.h"
#include "tests/testing/shared_memory_object.h"

namespace grove::server {
namespace {

namespace fs = std::filesystem;

constexpr char kInferToken[] = "infer-token-0123456789abcdef";
constexpr char kAdminToken[] = "admin-token-0123456789abcdef";
const std::string kDemo = std::string(GROVE_SOURCE_DIR) + "/examples/models/demo/1/model.json";

// Calls `method` ("/pkg.Service/Method") with an empty request message and `token` (none when
// empty).
grpc::Status CallEmpty(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                       const std::string& token) {
  grpc::GenericStub stub(channel);
  grpc::Slice slice("", 0);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(std::move(s)); });
  return done.get_future().get();
}

std::vector<std::string> Methods(const std::string& service) {
  const google::protobuf::ServiceDescriptor* d =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
  std::vector<std::string> out;
  if (d == nullptr) return out;
  for (int i = 0; i < d->method_count(); ++i) {
    out.push_back(absl::StrCat("/", service, "/", d->method(i)->name()));
  }
  return out;
}

class AuthServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / absl::StrCat("grove_auth_server_test_", ::getpid());
    fs::remove_all(root_);
    fs::create_directories(root_ / "repo" / "demo" / "1");
    fs::copy_file(kDemo, root_ / "repo" / "demo" / "1" / "model.json");
    std::ofstream(root_ / "tokens") << "# test tokens\ninfer " << kInferToken << "\nadmin "
                                    << kAdminToken << "\n";
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(root_);
  }

  ServerOptions Options() const {
    ServerOptions o;
    o.runtime.model_repository = (root_ / "repo").string();
    o.runtime.compute_threads = 2;
    o.grpc_address = "127.0.0.1";
    o.grpc_port = 0;
    o.metrics_port = -1;
    o.http.port = -1;
    o.repository_poll = absl::ZeroDuration();
    o.auth_poll = absl::ZeroDuration();
    return o;
  }

  void Start(ServerOptions o) {
    absl::StatusOr<std::unique_ptr<GroveServer>> s = GroveServer::Start(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    ASSERT_TRUE(server_->WaitUntilLoaded().ok());
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->grpc_port()),
                                   grpc::InsecureChannelCredentials());
  }

  // Calls `rpc` of grove.v1.Grove with `request` and `token` (none when empty).
  template <typename Request, typename Response>
  grpc::Status Call(grpc::Status (grove::v1::Grove::Stub::*rpc)(grpc::ClientContext*,
                                                               const Request&, Response*),
                    const Request& request, const std::string& token) {
    auto stub = grove::v1::Grove::NewStub(channel_);
    grpc::ClientContext ctx;
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    Response response;
    return (stub.get()->*rpc)(&ctx, request, &response);
  }

  grpc::Status Unload(const std::string& token, const std::string& model = "demo") {
    grove::v1::UnloadModelRequest req;
    req.set_model(model);
    return Call(&grove::v1::Grove::Stub::UnloadModel, req, token);
  }

  grpc::Status Load(const std::string& token) {
    grove::v1::LoadModelRequest req;
    req.set_model("demo");
    return Call(&grove::v1::Grove::Stub::LoadModel, req, token);
  }

  grpc::Status Predict(const std::string& token) {
    grove::v1::PredictRequest req;
    req.set_model("demo");
    req.mutable_rows()->set_rows(1);
    req.mutable_rows()->set_cols(8);
    for (int i = 0; i < 8; ++i) req.mutable_rows()->add_values(0.5f);
    return Call(&grove::v1::Grove::Stub::Predict, req, token);
  }

  fs::path root_;
  std::unique_ptr<GroveServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(AuthServerTest, EveryRpcButHealthNeedsTheRightRole) {
  ServerOptions o = Options();
  o.auth_token_file = (root_ / "tokens").string();
  o.model_control = true;
  Start(o);
  const std::set<std::string> open = {"/inference.GRPCInferenceService/ServerLive",
                                      "/inference.GRPCInferenceService/ServerReady",
                                      "/inference.GRPCInferenceService/ModelReady"};
  const std::set<std::string> admin = {
      "/grove.v1.Grove/LoadModel",
      "/grove.v1.Grove/UnloadModel",
      "/grove.v1.Grove/RegisterSharedMemory",
      "/grove.v1.Grove/UnregisterSharedMemory",
      "/inference.GRPCInferenceService/RepositoryModelLoad",
      "/inference.GRPCInferenceService/RepositoryModelUnload",
      "/inference.GRPCInferenceService/SystemSharedMemoryRegister",
      "/inference.GRPCInferenceService/SystemSharedMemoryUnregister"};
  std::vector<std::string> methods = Methods("grove.v1.Grove");
  const std::vector<std::string> kserve = Methods("inference.GRPCInferenceService");
  ASSERT_GE(methods.size(), 7u);
  ASSERT_GE(kserve.size(), 6u);
  methods.insert(methods.end(), kserve.begin(), kserve.end());
  for (const std::string& m : methods) {
    const grpc::Status none = CallEmpty(channel_, m, "");
    const grpc::Status wrong = CallEmpty(channel_, m, "wrong-token-0123456789abcdef");
    const grpc::Status infer = CallEmpty(channel_, m, kInferToken);
    if (open.count(m)) {
      EXPECT_NE(none.error_code(), grpc::StatusCode::UNAUTHENTICATED) << m;
      EXPECT_NE(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED) << m;
      continue;
    }
    EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED) << m << ": " << none.error_message();
    EXPECT_TRUE(absl::StrContains(none.error_message(), "authorization: Bearer TOKEN"))
        << m << ": " << none.error_message();
    EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED) << m;
    EXPECT_FALSE(absl::StrContains(wrong.error_message(), "wrong-token")) << wrong.error_message();
    if (admin.count(m)) {
      EXPECT_EQ(infer.error_code(), grpc::StatusCode::PERMISSION_DENIED) << m;
      EXPECT_TRUE(absl::StrContains(infer.error_message(), "needs role admin"))
          << infer.error_message();
    } else {
      // Past access control: the empty request is answered by the handler itself.
      EXPECT_NE(infer.error_code(), grpc::StatusCode::UNAUTHENTICATED) << m;
      EXPECT_NE(infer.error_code(), grpc::StatusCode::PERMISSION_DENIED) << m;
    }
    const grpc::Status as_admin = CallEmpty(channel_, m, kAdminToken);
    EXPECT_NE(as_admin.error_code(), grpc::StatusCode::UNAUTHENTICATED) << m;
    EXPECT_NE(as_admin.error_code(), grpc::StatusCode::PERMISSION_DENIED) << m;
  }
  // Health and reflection stay open.
  EXPECT_TRUE(CallEmpty(channel_, "/grpc.health.v1.Health/Check", "").ok());
  EXPECT_NE(CallEmpty(channel_, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                      "")
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  // What each role may do, with real requests.
  EXPECT_EQ(Predict("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Predict(kInferToken).ok());
  EXPECT_EQ(Unload(kInferToken).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // Access control comes before the request is looked at: no model names leak.
  EXPECT_EQ(Unload("", "no-such-model").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Unload(kAdminToken).ok());
  EXPECT_EQ(Predict(kInferToken).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(Load(kAdminToken).ok());
  EXPECT_TRUE(Predict(kInferToken).ok());
}

TEST_F(AuthServerTest, ModelControlIsOffByDefault) {
  Start(Options());
  EXPECT_FALSE(server_->options().model_control);
  EXPECT_TRUE(Predict("").ok());  // no access control configured: inference is open
  for (const grpc::Status& s : {Unload(""), Load("")}) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_TRUE(absl::StrContains(s.error_message(), "--model_control")) << s.error_message();
  }
  EXPECT_TRUE(Predict("").ok());
}

TEST_F(AuthServerTest, WithTokensModelControlStillNeedsTheFlag) {
  ServerOptions o = Options();
  o.auth_token_file = (root_ / "tokens").string();
  Start(o);
  EXPECT_EQ(Unload("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Unload(kInferToken).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Unload(kAdminToken).error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

// Shared memory registration is a control operation: off unless --shared_memory (UNIMPLEMENTED
// naming the flag, as model control), and with access control it needs role admin.
TEST_F(AuthServerTest, SharedMemoryRegistrationIsOffByDefaultAndNeedsAdmin) {
  auto register_region = [&](const std::string& token) {
    grove::v1::RegisterSharedMemoryRequest req;
    req.set_name("r");
    req.set_key("/grove-auth-test-no-such-object");
    req.set_byte_size(64);
    return Call(&grove::v1::Grove::Stub::RegisterSharedMemory, req, token);
  };
  auto unregister_all = [&](const std::string& token) {
    return Call(&grove::v1::Grove::Stub::UnregisterSharedMemory,
                grove::v1::UnregisterSharedMemoryRequest(), token);
  };
  {
    Start(Options());
    EXPECT_FALSE(server_->options().runtime.shared_memory_enabled);
    for (const grpc::Status& s : {register_region(""), unregister_all("")}) {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
      EXPECT_TRUE(absl::StrContains(s.error_message(), "--shared_memory")) << s.error_message();
    }
    server_.reset();
  }
  ServerOptions o = Options();
  o.auth_token_file = (root_ / "tokens").string();
  o.runtime.shared_memory_enabled = true;
  Start(o);
  EXPECT_EQ(register_region("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(register_region(kInferToken).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(unregister_all(kInferToken).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // Past access control: the object does not exist.
  EXPECT_EQ(register_region(kAdminToken).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(unregister_all(kAdminToken).ok());
  EXPECT_TRUE(Call(&grove::v1::Grove::Stub::GetSharedMemoryStatus,
                   grove::v1::SharedMemoryStatusRequest(), kInferToken)
                  .ok());
}

// A region belongs to the credential that registered it: another caller, even an admin, can neither
// read rows from it nor write results into it (gRPC or REST), nor see it in a status, nor
// unregister it. The owner keeps using it throughout.
TEST_F(AuthServerTest, SharedMemoryRegionsBelongToTheCallerThatRegisteredThem) {
  constexpr char kOtherAdmin[] = "other-admin-token-0123456789abcdef";
  std::ofstream(root_ / "tokens") << "infer " << kInferToken << "\nadmin " << kAdminToken
                                  << "\nadmin " << kOtherAdmin << "\n";
  ServerOptions o = Options();
  o.auth_token_file = (root_ / "tokens").string();
  o.runtime.shared_memory_enabled = true;
  o.http.port = 0;
  Start(o);
  testing::SharedMemoryObject object(1 << 16);
  const std::vector<float> row(8, 0.5f);
  std::memcpy(object.data(), row.data(), row.size() * sizeof(float));
  grove::v1::RegisterSharedMemoryRequest reg;
  reg.set_name("mine");
  reg.set_key(object.key());
  reg.set_byte_size(object.size());
  ASSERT_TRUE(Call(&grove::v1::Grove::Stub::RegisterSharedMemory, reg, kAdminToken).ok());

  auto predict = [&](const std::string& token) {
    grove::v1::PredictRequest req;
    req.set_model("demo");
    req.mutable_rows()->set_rows(1);
    req.mutable_rows()->set_cols(8);
    auto* rows = req.mutable_rows()->mutable_shared_memory_f32();
    rows->set_region("mine");
    rows->set_byte_size(8 * sizeof(float));
    return Call(&grove::v1::Grove::Stub::Predict, req, token);
  };
  auto listed = [&](const std::string& token) {
    auto stub = grove::v1::Grove::NewStub(channel_);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    grove::v1::SharedMemoryStatusResponse response;
    EXPECT_TRUE(stub->GetSharedMemoryStatus(&ctx, grove::v1::SharedMemoryStatusRequest(),
                                            &response)
                    .ok());
    return response.regions_size();
  };
  EXPECT_TRUE(predict(kAdminToken).ok());
  for (const char* other : {kOtherAdmin, kInferToken}) {
    const grpc::Status s = predict(other);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << other << ": " << s.error_message();
    EXPECT_EQ(listed(other), 0) << other;
  }
  EXPECT_EQ(listed(kAdminToken), 1);
  // KServe: the named status of another's region is NOT_FOUND, as for one that does not exist.
  {
    auto kserve = inference::GRPCInferenceService::NewStub(channel_);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + kOtherAdmin);
    inference::SystemSharedMemoryStatusRequest req;
    req.set_name("mine");
    inference::SystemSharedMemoryStatusResponse response;
    EXPECT_EQ(kserve->SystemSharedMemoryStatus(&ctx, req, &response).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  // REST: another caller's infer naming the region is 404 and its status list is empty.
  httplib::Client http("127.0.0.1", server_->http_port());
  const httplib::Headers other_auth = {{"Authorization", std::string("Bearer ") + kOtherAdmin}};
  const nlohmann::json infer = {
      {"inputs",
       {{{"name", "input__0"},
         {"shape", {1, 8}},
         {"datatype", "FP32"},
         {"parameters",
          {{"shared_memory_region", "mine"}, {"shared_memory_byte_size", 32}}}}}}};
  auto r = http.Post("/v2/models/demo/infer", other_auth, infer.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  r = http.Get("/v2/systemsharedmemory/status", other_auth);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(nlohmann::json::parse(r->body).size(), 0u) << r->body;
  r = http.Post("/v2/systemsharedmemory/unregister", other_auth, "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  // Unregistering everything, or the region by name, as another caller removes nothing.
  grove::v1::UnregisterSharedMemoryRequest by_name;
  by_name.set_name("mine");
  EXPECT_TRUE(Call(&grove::v1::Grove::Stub::UnregisterSharedMemory, by_name, kOtherAdmin).ok());
  EXPECT_TRUE(Call(&grove::v1::Grove::Stub::UnregisterSharedMemory,
                   grove::v1::UnregisterSharedMemoryRequest(), kOtherAdmin)
                  .ok());
  EXPECT_TRUE(predict(kAdminToken).ok());
  EXPECT_EQ(listed(kAdminToken), 1);
  EXPECT_TRUE(Call(&grove::v1::Grove::Stub::UnregisterSharedMemory, by_name, kAdminToken).ok());
  EXPECT_EQ(listed(kAdminToken), 0);
}

TEST_F(AuthServerTest, StartUpErrors) {
  ServerOptions bad = Options();
  std::ofstream(root_ / "bad") << "infer " << kInferToken << "\nadmin " << kAdminToken << " x\n";
  bad.auth_token_file = (root_ / "bad").string();
  absl::StatusOr<std::unique_ptr<GroveServer>> s = GroveServer::Start(bad);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "line 2")) << s.status();
  EXPECT_FALSE(absl::StrContains(s.status().message(), kAdminToken)) << s.status();

  ServerOptions roles = Options();
  std::ofstream(root_ / "roles") << "admin ops\n";
  roles.tls_client_roles_file = (root_ / "roles").string();  // without mutual TLS
  s = GroveServer::Start(roles);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "--tls_client_ca_file")) << s.status();
}

}  // namespace
}  // namespace grove::server
