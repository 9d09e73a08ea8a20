// groved's REST port and metadata on the wire, in one process: request framing read byte by byte
// from raw sockets (what a proxy in front would forward), names that are not UTF-8 in every
// metadata call, and files named to callers relative to the model repository.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "grove/v1/grove.grpc.pb.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "server/server.h"
#include "tests/server/server_testing.h"

namespace grove::server {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const std::string kDemo = std::string(GROVE_SOURCE_DIR) + "/examples/models/demo/1/model.json";
const std::string kLgb =
    std::string(GROVE_SOURCE_DIR) + "/tests/golden/lgb_zero_as_missing/model.txt";
constexpr int64_t kBodyLimit = 1 << 20;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteText(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// What the server answered on one connection: every byte until it closed the connection or went
// quiet for `quiet_seconds`, and which of the two.
struct Exchange {
  std::string received;
  bool closed = false;
};

// Connects to 127.0.0.1:`port`, sends `request` (from a thread of its own, so that a server that
// stops reading cannot block the test) and reads the answer.
Exchange Send(int port, const std::string& request, int quiet_seconds = 3) {
  Exchange out;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ADD_FAILURE() << "connect failed";
    ::close(fd);
    return out;
  }
  timeval tv{quiet_seconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::thread writer([fd, &request] {
    size_t done = 0;
    while (done < request.size()) {
      const ssize_t n = ::send(fd, request.data() + done, request.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server closed the connection
      done += static_cast<size_t>(n);
    }
  });
  char buf[4096];
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      out.received.append(buf, static_cast<size_t>(n));
      continue;
    }
    out.closed = n == 0 || (n < 0 && errno == ECONNRESET);
    break;
  }
  ::shutdown(fd, SHUT_RDWR);  // releases a writer blocked on a full window
  writer.join();
  ::close(fd);
  return out;
}

int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class HttpServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::temp_directory_path() /
                         absl::StrCat("grove_http_server_test_", ::getpid()));
    fs::remove_all(*root_);
    fs::create_directories(*root_ / "demo" / "1");
    fs::copy_file(kDemo, *root_ / "demo" / "1" / "model.json");
    // A LightGBM model whose first feature name holds a Latin-1 byte ('é' = 0xE9).
    const std::string lgb = ReadText(kLgb);
    ASSERT_THAT(lgb, HasSubstr("feature_names=Column_0 "));
    WriteText(*root_ / "latin1" / "1" / "model.txt",
              absl::StrReplaceAll(lgb, {{"feature_names=Column_0 ", "feature_names=caf\xE9 "}}));
    // A model that cannot load: its error is what a caller of it is told.
    fs::create_directories(*root_ / "bad" / "1");
    fs::copy_file(kDemo, *root_ / "bad" / "1" / "model.json");
    WriteText(*root_ / "bad" / "config.json", R"({"max_request_rows": 0})");
    ServerOptions o = LoopbackServerOptions(root_->string());
    o.strict_readiness = false;
    o.max_message_bytes = kBodyLimit;
    absl::StatusOr<std::unique_ptr<GroveServer>> s = GroveServer::Start(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = s->release();
    (void)server_->WaitUntilLoaded();  // "bad" fails, on purpose
    channel_ = new std::shared_ptr<grpc::Channel>(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->grpc_port()),
                            grpc::InsecureChannelCredentials()));
  }
  static void TearDownTestSuite() {
    delete channel_;
    delete server_;
    fs::remove_all(*root_);
    delete root_;
  }

  static int HttpPort() { return server_->http_port(); }
  // grove.v1 GetModelMetadata of `model`; a failed call is a test failure.
  static grove::v1::ModelMetadata Metadata(const std::string& model) {
    grpc::ClientContext ctx;
    grove::v1::GetModelMetadataRequest req;
    req.set_model(model);
    grove::v1::ModelMetadata md;
    const grpc::Status s = grove::v1::Grove::NewStub(*channel_)->GetModelMetadata(&ctx, req, &md);
    EXPECT_TRUE(s.ok()) << model << ": " << s.error_message();
    return md;
  }
  static std::string InferBody() {
    return R"({"inputs":[{"name":"input__0","shape":[1,8],"datatype":"FP32",)"
           R"("data":[0,0,0,0,0,0,0,0]}]})";
  }
  static std::string InferHead(const std::string& extra_headers) {
    return absl::StrCat("POST /v2/models/demo/infer HTTP/1.1\r\nHost: x\r\n", extra_headers,
                        "\r\n");
  }

  static inline fs::path* root_ = nullptr;
  static inline GroveServer* server_ = nullptr;
  static inline std::shared_ptr<grpc::Channel>* channel_ = nullptr;
};

// One Content-Length, or chunked alone (in any case), frames a body as before.
TEST_F(HttpServerTest, SoundFramingIsServed) {
  const std::string body = InferBody();
  const std::string chunks = absl::StrCat(absl::Hex(body.size()), "\r\n", body, "\r\n0\r\n\r\n");
  for (const std::string& request :
       {InferHead(absl::StrCat("Content-Length: ", body.size(), "\r\nConnection: close\r\n")) +
            body,
        InferHead("Transfer-Encoding: chunked\r\nConnection: close\r\n") + chunks,
        InferHead("Transfer-Encoding: Chunked\r\nConnection: close\r\n") + chunks}) {
    const Exchange e = Send(HttpPort(), request);
    EXPECT_THAT(e.received, StartsWith("HTTP/1.1 200 OK")) << request << "\n" << e.received;
  }
}

// Framing a proxy in front could read another way is refused and the connection closed after the
// answer: what followed on it (here a second request hidden in the body) is never served.
TEST_F(HttpServerTest, AmbiguousFramingIsRefusedAndClosesTheConnection) {
  const std::string body = InferBody();
  const std::string hidden = "GET /v2/models/demo HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string chunk = absl::StrCat(absl::Hex(body.size()), "\r\n", body, "\r\n0\r\n\r\n");
  struct Case {
    std::string what;
    std::string request;
    std::string status;
    std::string message;
  };
  const Case cases[] = {
      {"two lengths",
       InferHead(absl::StrCat("Content-Length: ", body.size(), "\r\nContent-Length: ",
                              body.size(), "\r\n")) +
           body + hidden,
       "400", "2 Content-Length headers"},
      {"two different lengths",
       InferHead(absl::StrCat("Content-Length: ", body.size(), "\r\nContent-Length: ",
                              body.size() + hidden.size(), "\r\n")) +
           body + hidden,
       "400", "2 Content-Length headers"},
      {"length and chunked",
       InferHead(absl::StrCat("Content-Length: ", chunk.size() + hidden.size(),
                              "\r\nTransfer-Encoding: chunked\r\n")) +
           chunk + hidden,
       "400", "both Content-Length and Transfer-Encoding"},
      {"chunked and length",
       InferHead(absl::StrCat("Transfer-Encoding: chunked\r\nContent-Length: ", 3, "\r\n")) +
           chunk + hidden,
       "400", "both Content-Length and Transfer-Encoding"},
      {"an unknown coding", InferHead("Transfer-Encoding: gzip, chunked\r\n") + chunk + hidden,
       "501", "Transfer-Encoding 'gzip, chunked' is not supported"},
      {"a signed length", InferHead(absl::StrCat("Content-Length: +", body.size(), "\r\n")) + body,
       "400", "is not a byte count"},
      {"a length with text", InferHead("Content-Length: 10abc\r\n") + body, "400",
       "is not a byte count"},
      // cpp-httplib reads no body for GET or HEAD: one announced would be read as a request.
      {"a GET with a body",
       absl::StrCat("GET /v2/models/demo HTTP/1.1\r\nHost: x\r\nContent-Length: ",
                    hidden.size(), "\r\n\r\n", hidden),
       "400", "GET request carries no body"},
      {"a HEAD with a body",
       absl::StrCat("HEAD /v2/models/demo HTTP/1.1\r\nHost: x\r\n",
                    "Transfer-Encoding: chunked\r\n\r\n", absl::Hex(hidden.size()), "\r\n",
                    hidden, "\r\n0\r\n\r\n", hidden),
       "400", "HEAD request carries no body"},
  };
  for (const Case& c : cases) {
    const Exchange e = Send(HttpPort(), c.request);
    EXPECT_THAT(e.received, StartsWith(absl::StrCat("HTTP/1.1 ", c.status))) << c.what;
    EXPECT_THAT(e.received, HasSubstr(c.message)) << c.what;
    EXPECT_EQ(CountOf(e.received, "HTTP/1.1 "), 1) << c.what << ": " << e.received;
    EXPECT_TRUE(e.closed) << c.what << ": the connection stayed open";
  }
}

// A length far above the limit is answered 413 from the headers alone, at once, naming the limit:
// the body is neither waited for nor read. One just above it is read and dropped first, so that a
// client that sends its whole body before reading the answer reads the 413.
TEST_F(HttpServerTest, OversizedContentLengthIsRefusedBeforeTheBody) {
  const std::string head =
      InferHead(absl::StrCat("Content-Length: ", kBodyLimit + (int64_t{4} << 20) + 1, "\r\n"));
  const Exchange e = Send(HttpPort(), head);
  EXPECT_THAT(e.received, StartsWith("HTTP/1.1 413")) << e.received;
  EXPECT_THAT(e.received, HasSubstr(absl::StrCat("limit of ", kBodyLimit, " bytes")));
  EXPECT_THAT(e.received, HasSubstr("--max_message_bytes"));
  EXPECT_TRUE(e.closed);
  const Exchange huge = Send(HttpPort(), InferHead("Content-Length: 999999999999999999\r\n"));
  EXPECT_THAT(huge.received, StartsWith("HTTP/1.1 413")) << huge.received;
  const std::string just_above = std::string(kBodyLimit + 1, ' ');
  const Exchange eager = Send(
      HttpPort(), InferHead(absl::StrCat("Content-Length: ", just_above.size(),
                                         "\r\nConnection: close\r\n")) +
                      just_above);
  EXPECT_THAT(eager.received, StartsWith("HTTP/1.1 413")) << eager.received;
  EXPECT_THAT(eager.received, HasSubstr("--max_message_bytes"));
}

// A feature name with a byte that is not UTF-8 is shown escaped by every metadata call, over gRPC
// (Grove and KServe) and REST, instead of failing them.
TEST_F(HttpServerTest, NamesThatAreNotUtf8AreShownEscapedEverywhere) {
  const grove::v1::ModelMetadata md = Metadata("latin1");
  ASSERT_GT(md.feature_names_size(), 0);
  EXPECT_EQ(md.feature_names(0), "caf\\xE9");
  auto kserve = inference::GRPCInferenceService::NewStub(*channel_);
  grpc::ClientContext metadata_ctx, config_ctx;
  inference::ModelMetadataRequest metadata_req;
  inference::ModelConfigRequest config_req;
  metadata_req.set_name("latin1");
  config_req.set_name("latin1");
  inference::ModelMetadataResponse metadata;
  inference::ModelConfigResponse config;
  const grpc::Status m = kserve->ModelMetadata(&metadata_ctx, metadata_req, &metadata);
  EXPECT_TRUE(m.ok()) << m.error_message();
  const grpc::Status c = kserve->ModelConfig(&config_ctx, config_req, &config);
  ASSERT_TRUE(c.ok()) << c.error_message();
  EXPECT_THAT(config.config().parameters().at("feature_names").string_value(),
              HasSubstr("caf\\\\xE9"));  // JSON escapes the backslash
  for (const char* path : {"/v2/models/latin1", "/v2/models/latin1/config"}) {
    const Exchange e = Send(HttpPort(), absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: x\r\n"
                                                     "Connection: close\r\n\r\n"));
    EXPECT_THAT(e.received, StartsWith("HTTP/1.1 200")) << path << ": " << e.received;
  }
}

// Callers are told where a model's files are within the repository, never the server's paths:
// in statuses and metadata, and in the errors of calls to a model that is not ready.
TEST_F(HttpServerTest, CallersSeePathsRelativeToTheRepository) {
  const std::string root = root_->string();
  const grove::v1::ModelMetadata md = Metadata("demo");
  ASSERT_EQ(md.versions_size(), 1);
  EXPECT_EQ(md.versions(0).path(), "demo/1/model.json");
  {
    grpc::ClientContext ctx;
    grove::v1::ListModelsResponse list;
    ASSERT_TRUE(grove::v1::Grove::NewStub(*channel_)
                    ->ListModels(&ctx, grove::v1::ListModelsRequest(), &list)
                    .ok());
    EXPECT_THAT(list.DebugString(), Not(HasSubstr(root)));
  }
  auto kserve = inference::GRPCInferenceService::NewStub(*channel_);
  {
    grpc::ClientContext ctx;
    inference::ModelInferRequest req;
    req.set_model_name("bad");
    AddInput0(&req, 1, 8)->mutable_contents()->mutable_fp32_contents()->Resize(8, 0.0f);
    inference::ModelInferResponse resp;
    const grpc::Status s = kserve->ModelInfer(&ctx, req, &resp);
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(s.error_message(), HasSubstr("bad/config.json"));
    EXPECT_THAT(s.error_message(), Not(HasSubstr(root)));
  }
  const std::string body = InferBody();
  const Exchange e = Send(
      HttpPort(), absl::StrCat("POST /v2/models/bad/infer HTTP/1.1\r\nHost: x\r\nContent-Length: ",
                               body.size(), "\r\nConnection: close\r\n\r\n", body));
  EXPECT_THAT(e.received, HasSubstr("bad/config.json")) << e.received;
  EXPECT_THAT(e.received, Not(HasSubstr(root)));
}

// With strict readiness, the REST readiness answer names the model that keeps the server from
// being ready (its status says why).
TEST_F(HttpServerTest, ServerReadinessNamesTheModelsNotReady) {
  ServerOptions o = LoopbackServerOptions(root_->string());
  o.strict_readiness = true;
  absl::StatusOr<std::unique_ptr<GroveServer>> strict = GroveServer::Start(std::move(o));
  ASSERT_TRUE(strict.ok()) << strict.status();
  (void)(*strict)->WaitUntilLoaded();
  const Exchange e = Send((*strict)->http_port(),
                          "GET /v2/health/ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(e.received, ::testing::StartsWith("HTTP/1.1 503")) << e.received;
  EXPECT_THAT(e.received, HasSubstr("model 'bad' is not ready")) << e.received;
  EXPECT_THAT(e.received, Not(HasSubstr("'demo'")));
}

}  // namespace
}  // namespace grove::server
