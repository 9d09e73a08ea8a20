// The bounds of groved's REST port against clients that send too much, too slowly or nothing at
// all, from raw sockets: request heads bounded as they arrive, credentials and the memory budget
// checked before a body is read, one deadline per request, a bounded number of connections that
// idle and slow ones make way in, and a shutdown that no client holds up past its grace period.
// Each server here has its own small limits; waits are bounded by timeouts well above what the
// server should take.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "server/server.h"
#include "tests/server/server_testing.h"

namespace grove::server {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kDemo = std::string(GROVE_SOURCE_DIR) + "/examples/models/demo/1/model.json";
constexpr char kToken[] = "infer-token-0123456789abcdef";

// One client connection to 127.0.0.1:port, read and written with explicit timeouts.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    EXPECT_TRUE(connected_);
  }
  ~RawClient() {
    if (writer_.joinable()) {
      ::shutdown(fd_, SHUT_RDWR);
      writer_.join();
    }
    ::close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  // Sends all of `bytes` (false when the server closed the connection first).
  bool Send(const std::string& bytes) {
    for (size_t done = 0; done < bytes.size();) {
      const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }
  // Sends `bytes` from a thread of its own, `gap` between bytes (zero: all at once), until all
  // are sent or the server closes the connection.
  void SendInBackground(std::string bytes, absl::Duration gap = absl::ZeroDuration()) {
    writer_ = std::thread([this, bytes = std::move(bytes), gap] {
      if (gap == absl::ZeroDuration()) {
        Send(bytes);
        return;
      }
      for (char c : bytes) {
        if (!Send(std::string(1, c))) return;
        absl::SleepFor(gap);
      }
    });
  }
  // One whole answer (head and Content-Length body), or what arrived before the connection closed
  // or `timeout` passed ("" when nothing did).
  std::string ReadAnswer(absl::Duration timeout = absl::Seconds(10)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      const size_t head_end = received_.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        size_t length = 0;
        const size_t at = received_.find("Content-Length: ");
        if (at != std::string::npos && at < head_end) {
          const size_t eol = received_.find("\r\n", at);
          (void)absl::SimpleAtoi(received_.substr(at + 16, eol - at - 16), &length);
        }
        if (received_.size() >= head_end + 4 + length) {
          std::string answer = received_.substr(0, head_end + 4 + length);
          received_.erase(0, answer.size());
          return answer;
        }
      }
      if (!Receive(deadline)) {
        std::string partial = std::move(received_);
        received_.clear();
        return partial;
      }
    }
  }
  // True when the server closes the connection (nothing more arriving) within `timeout`.
  bool ClosedWithin(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (Receive(deadline)) {
    }
    return closed_;
  }
  bool connected() const { return connected_; }

 private:
  // Appends what arrives before `deadline`; false at the deadline or when the connection closed.
  bool Receive(absl::Time deadline) {
    if (closed_) return false;
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(ms)) <= 0) return false;
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) {
      closed_ = n == 0 || errno == ECONNRESET;
      return false;
    }
    received_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  std::string received_;
  std::thread writer_;
};

std::string Get(const std::string& path, const std::string& extra = "") {
  return absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: x\r\n", extra, "\r\n");
}

std::string InferHead(const std::string& extra) {
  return absl::StrCat("POST /v2/models/demo/infer HTTP/1.1\r\nHost: x\r\n", extra, "\r\n");
}

// A JSON infer body of about `bytes` bytes (one row, padded with spaces).
std::string InferBody(size_t bytes = 0) {
  std::string body = R"({"inputs":[{"name":"input__0","shape":[1,8],"datatype":"FP32",)"
                     R"("data":[0,0,0,0,0,0,0,0]}]})";
  if (body.size() < bytes) body.append(bytes - body.size(), ' ');
  return body;
}

class HttpBoundsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::temp_directory_path() /
                         absl::StrCat("grove_http_bounds_test_", ::getpid()));
    fs::remove_all(*root_);
    fs::create_directories(*root_ / "models" / "demo" / "1");
    fs::copy_file(kDemo, *root_ / "models" / "demo" / "1" / "model.json");
    std::ofstream(*root_ / "tokens") << "infer " << kToken << "\n";
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
  }

  // A server on loopback with the REST port's defaults but for what `options` changes.
  template <typename Change>
  void Start(Change change) {
    ServerOptions o = LoopbackServerOptions((*root_ / "models").string());
    change(o);
    loopback_ = StartLoopbackServer(std::move(o));
    ASSERT_NE(loopback_.server, nullptr);
  }
  void Start() {
    Start([](ServerOptions&) {});
  }
  int port() const { return loopback_.server->http_port(); }
  GroveServer& server() { return *loopback_.server; }
  // The value of the grove_requests_total series with these labels (0 when it has none yet).
  double Requests(const std::string& model, const std::string& method, const std::string& code) {
    for (const prometheus::MetricFamily& family : server().metrics().registry()->Collect()) {
      if (family.name != "grove_requests_total") continue;
      for (const prometheus::ClientMetric& m : family.metric) {
        int matched = 0;
        for (const prometheus::ClientMetric::Label& l : m.label) {
          matched += (l.name == "model" && l.value == model) ||
                     (l.name == "method" && l.value == method) ||
                     (l.name == "code" && l.value == code);
        }
        if (matched == 3) return m.counter.value;
      }
    }
    return 0;
  }

  static inline fs::path* root_ = nullptr;
  LoopbackServer loopback_;
};

// A header line without an end is refused once it passes the line limit, and nothing more of it
// is read: the answer comes while the client is still sending.
TEST_F(HttpBoundsTest, HeadLinesAreRefusedAtTheLimitNotBufferedWhole) {
  Start();
  RawClient endless(port());
  endless.SendInBackground("GET /v2/health/live HTTP/1.1\r\nX-Long: " +
                           std::string(32 << 20, 'a'));
  const std::string answer = endless.ReadAnswer();
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 431")) << answer.substr(0, 200);
  EXPECT_THAT(answer, HasSubstr("longer than 8192 bytes"));
  EXPECT_TRUE(endless.ClosedWithin(absl::Seconds(10)));

  RawClient long_line(port());
  long_line.SendInBackground(
      absl::StrCat("GET /v2/health/live?", std::string(10000, 'q'), " HTTP/1.1\r\n\r\n"));
  EXPECT_THAT(long_line.ReadAnswer(), StartsWith("HTTP/1.1 414"));
  // Refused before any handler: counted, under "REST" (the route was never read).
  EXPECT_EQ(Requests("", "REST", "INVALID_ARGUMENT"), 2);
}

TEST_F(HttpBoundsTest, HeaderFieldCountAndHeadSizeAreBounded) {
  Start();
  auto fields = [](int n, size_t value_bytes) {
    std::string out;
    for (int i = 0; i < n; ++i) {
      absl::StrAppend(&out, "X-F", i, ": ", std::string(value_bytes, 'v'), "\r\n");
    }
    return out;
  };
  {
    RawClient c(port());
    c.Send(Get("/v2/health/live", fields(99, 10)));  // and Host: 100 fields
    EXPECT_THAT(c.ReadAnswer(), StartsWith("HTTP/1.1 200"));
  }
  {
    RawClient c(port());
    c.SendInBackground(Get("/v2/health/live", fields(40000, 10)));
    const std::string answer = c.ReadAnswer();
    EXPECT_THAT(answer, StartsWith("HTTP/1.1 431"));
    EXPECT_THAT(answer, HasSubstr("more than 100 header fields"));
  }
  {
    RawClient c(port());
    c.SendInBackground(Get("/v2/health/live", fields(60, 1200)));
    const std::string answer = c.ReadAnswer();
    EXPECT_THAT(answer, StartsWith("HTTP/1.1 431"));
    EXPECT_THAT(answer, HasSubstr("larger than 65536 bytes"));
  }
}

// Without valid credentials a request is answered from its head: the body it announces is not
// waited for.
TEST_F(HttpBoundsTest, CredentialsAreCheckedBeforeTheBodyIsRead) {
  Start([](ServerOptions& o) { o.auth_token_file = (*root_ / "tokens").string(); });
  for (const std::string& auth : {std::string(), std::string("Authorization: Bearer wrong\r\n")}) {
    RawClient c(port());
    c.Send(InferHead(absl::StrCat(auth, "Content-Length: 8000000\r\n")));
    const std::string answer = c.ReadAnswer();
    EXPECT_THAT(answer, StartsWith("HTTP/1.1 401")) << auth;
    EXPECT_THAT(answer, ::testing::Not(HasSubstr("metadata"))) << auth;  // REST has headers
    EXPECT_TRUE(c.ClosedWithin(absl::Seconds(10)));
  }
  {
    RawClient c(port());
    c.Send(InferHead("Content-Length: 8000000\r\n"));
    EXPECT_THAT(c.ReadAnswer(), HasSubstr("send the header 'authorization: Bearer TOKEN'"));
  }
  // Refused from the head: counted under the route's method and model.
  EXPECT_EQ(Requests("demo", "ModelInfer", "UNAUTHENTICATED"), 3);
  RawClient ok(port());
  const std::string body = InferBody();
  ok.Send(InferHead(absl::StrCat("Authorization: Bearer ", kToken, "\r\nContent-Length: ",
                                 body.size(), "\r\n")) +
          body);
  EXPECT_THAT(ok.ReadAnswer(), StartsWith("HTTP/1.1 200"));
  // A client that asks before sending its body (Expect: 100-continue) is refused instead of
  // invited to send it; with credentials it is invited and served.
  RawClient asks(port());
  asks.Send(InferHead("Expect: 100-continue\r\nContent-Length: 8000000\r\n"));
  EXPECT_THAT(asks.ReadAnswer(), StartsWith("HTTP/1.1 401"));
  RawClient invited(port());
  invited.Send(InferHead(absl::StrCat("Authorization: Bearer ", kToken,
                                      "\r\nExpect: 100-continue\r\nContent-Length: ",
                                      body.size(), "\r\n")));
  EXPECT_THAT(invited.ReadAnswer(), StartsWith("HTTP/1.1 100"));
  invited.Send(body);
  EXPECT_THAT(invited.ReadAnswer(), StartsWith("HTTP/1.1 200"));
}

// A body is admitted against --max_request_memory_mb before it is read (Content-Length) or as it
// arrives (chunked), a JSON body at kJsonBodyCost per byte; a JSON body has a limit of its own.
TEST_F(HttpBoundsTest, BodiesAreAdmittedAgainstTheMemoryBudgetBeforeTheyAreRead) {
  Start([](ServerOptions& o) {
    o.runtime.serving.memory_budget_bytes = 4 << 20;
    o.http.max_json_body_bytes = 1 << 20;
  });
  {
    // 512 KiB of JSON costs 12 MiB: refused from the head.
    RawClient c(port());
    c.Send(InferHead(absl::StrCat("Content-Length: ", 512 << 10, "\r\n")));
    const std::string answer = c.ReadAnswer();
    EXPECT_THAT(answer, StartsWith("HTTP/1.1 429"));
    EXPECT_THAT(answer, HasSubstr("--max_request_memory_mb"));
  }
  // Chunked: refused as it arrives, once the JSON received costs more than the budget. The client
  // stays connected (the server drops what it still sends), holding nothing of the budget.
  RawClient chunked(port());
  std::string chunks;
  for (int i = 0; i < 64; ++i) {
    absl::StrAppend(&chunks, "4000\r\n", std::string(0x4000, ' '), "\r\n");
  }
  chunked.SendInBackground(InferHead("Transfer-Encoding: chunked\r\n") + chunks);
  const std::string refused = chunked.ReadAnswer();
  EXPECT_THAT(refused, StartsWith("HTTP/1.1 429"));
  EXPECT_THAT(refused, HasSubstr("--max_request_memory_mb"));
  {
    // A client that sends its whole request before it reads still reads its answer: the body it
    // sends after the refusal is dropped, not cut off with a reset connection.
    RawClient c(port());
    const std::string raw(32 << 20, '\0');
    const bool sent = c.Send(InferHead(absl::StrCat("Inference-Header-Content-Length: 100",
                                                    "\r\nContent-Length: ", raw.size(), "\r\n")) +
                             raw);
    EXPECT_TRUE(sent);
    EXPECT_THAT(c.ReadAnswer(), StartsWith("HTTP/1.1 429"));
  }
  {
    // Above the JSON limit: 413 from the head, for a JSON body and a binary body's JSON part.
    RawClient c(port());
    c.Send(InferHead(absl::StrCat("Content-Length: ", (1 << 20) + 1, "\r\n")));
    const std::string answer = c.ReadAnswer();
    EXPECT_THAT(answer, StartsWith("HTTP/1.1 413"));
    EXPECT_THAT(answer, HasSubstr("--http_max_json_body_mb"));
    RawClient binary(port());
    binary.Send(InferHead(absl::StrCat("Inference-Header-Content-Length: ", (1 << 20) + 1,
                                       "\r\nContent-Length: ", (2 << 20), "\r\n")));
    EXPECT_THAT(binary.ReadAnswer(), StartsWith("HTTP/1.1 413"));
  }
  {
    // Within both, served: the budget is whole again after each request.
    for (int i = 0; i < 3; ++i) {
      RawClient c(port());
      const std::string body = InferBody(60 << 10);  // 1.4 MiB admitted: two fit
      c.Send(InferHead(absl::StrCat("Content-Length: ", body.size(), "\r\n")) + body);
      EXPECT_THAT(c.ReadAnswer(), StartsWith("HTTP/1.1 200"));
    }
  }
  // A compressed body would be inflated without a bound: refused.
  RawClient gzip(port());
  gzip.Send(InferHead("Content-Encoding: gzip\r\nContent-Length: 10\r\n") + "0123456789");
  EXPECT_THAT(gzip.ReadAnswer(), StartsWith("HTTP/1.1 415"));
}

// --http_timeout_seconds bounds a whole request, not one read: a request trickled in is answered
// 408 at the deadline.
TEST_F(HttpBoundsTest, ARequestMustArriveWithinTheTimeout) {
  Start([](ServerOptions& o) { o.http.request_timeout = absl::Seconds(1); });
  RawClient head(port());
  const absl::Time start = absl::Now();
  head.SendInBackground(Get("/v2/health/live", "X-Slow: 0123456789012345678901234567890\r\n"),
                        absl::Milliseconds(200));  // ~15 s in all
  const std::string answer = head.ReadAnswer();
  const absl::Duration took = absl::Now() - start;
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 408"));
  EXPECT_THAT(answer, HasSubstr("--http_timeout_seconds"));
  EXPECT_GE(took, absl::Milliseconds(900));
  EXPECT_LT(took, absl::Seconds(5));

  RawClient body(port());
  const std::string json = InferBody();
  body.Send(InferHead(absl::StrCat("Content-Length: ", json.size(), "\r\n")));
  body.SendInBackground(json, absl::Milliseconds(100));  // ~9 s in all
  EXPECT_THAT(body.ReadAnswer(), StartsWith("HTTP/1.1 408"));
}

// A PUT, PATCH or DELETE without Content-Length or chunked encoding has no body: it is answered
// at once instead of read until the client closes.
TEST_F(HttpBoundsTest, ARequestWithoutLengthHasNoBody) {
  Start();
  for (const char* method : {"PUT", "DELETE", "PATCH"}) {
    RawClient c(port());
    c.Send(absl::StrCat(method, " /v2/models/demo HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_THAT(c.ReadAnswer(), StartsWith("HTTP/1.1 4")) << method;
  }
}

// With every worker held by an idle kept-alive client, or by a client sending its head slowly, a
// new client is still served: one of them is closed for it.
TEST_F(HttpBoundsTest, IdleAndSlowConnectionsMakeWayForNewOnes) {
  Start([](ServerOptions& o) { o.http.threads = 4; });
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(std::make_unique<RawClient>(port()));
    idle.back()->Send(Get("/v2/health/live"));
    EXPECT_THAT(idle.back()->ReadAnswer(), StartsWith("HTTP/1.1 200"));
  }
  for (int round = 0; round < 2; ++round) {
    RawClient fresh(port());
    const absl::Time start = absl::Now();
    fresh.Send(Get("/v2/health/live"));
    EXPECT_THAT(fresh.ReadAnswer(absl::Seconds(10)), StartsWith("HTTP/1.1 200"));
    EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  }
  int closed = 0;
  for (auto& c : idle) closed += c->ClosedWithin(absl::Milliseconds(100)) ? 1 : 0;
  EXPECT_GE(closed, 1);
  idle.clear();

  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 6; ++i) {  // 4 served, 2 waiting for a worker
    slow.push_back(std::make_unique<RawClient>(port()));
    slow.back()->Send("GET /v2/health/live HTTP/1.1\r\nX-Slow: ");
  }
  RawClient fresh(port());
  const absl::Time start = absl::Now();
  fresh.Send(Get("/v2/health/live"));
  EXPECT_THAT(fresh.ReadAnswer(absl::Seconds(20)), StartsWith("HTTP/1.1 200"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));  // a slow one may be closed after 1 s
}

// A refused client that keeps sending holds its worker only while no other connection needs it:
// the server drops what it sends (so that it reads its answer) until a new client arrives.
TEST_F(HttpBoundsTest, ARefusedClientStillSendingMakesWayForNewOnes) {
  Start([](ServerOptions& o) { o.http.threads = 1; });
  RawClient refused(port());
  refused.SendInBackground("GET /v2/health/live HTTP/1.1\r\nX-Long: " + std::string(1 << 20, 'a'),
                           absl::ZeroDuration());
  EXPECT_THAT(refused.ReadAnswer(), StartsWith("HTTP/1.1 431"));
  RawClient fresh(port());
  const absl::Time start = absl::Now();
  fresh.Send(Get("/v2/health/live"));
  EXPECT_THAT(fresh.ReadAnswer(), StartsWith("HTTP/1.1 200"));
  // At once: not after the refused connection lingered (2 s) or counted as slow (1 s).
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500));
  EXPECT_TRUE(refused.ClosedWithin(absl::Seconds(1)));
}

// A REST port in use is a start error naming it (the half-started REST server is taken down
// cleanly).
TEST_F(HttpBoundsTest, ARestPortInUseFailsToStart) {
  Start();
  ServerOptions o = LoopbackServerOptions((*root_ / "models").string());
  o.http.port = port();
  absl::StatusOr<std::unique_ptr<GroveServer>> second = GroveServer::Start(std::move(o));
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr(absl::StrCat("cannot bind the REST port 127.0.0.1:", port())));
}

// Shutdown closes idle kept-alive connections at once, answers what is in flight and cuts what
// is left at the grace deadline: no client holds it up.
TEST_F(HttpBoundsTest, ShutdownEndsWithinTheGracePeriodWhateverClientsDo) {
  Start([](ServerOptions& o) { o.shutdown_grace = absl::Seconds(2); });
  RawClient idle(port());
  idle.Send(Get("/v2/health/live"));
  EXPECT_THAT(idle.ReadAnswer(), StartsWith("HTTP/1.1 200"));
  RawClient slow(port());
  slow.Send("GET /v2/health/live HTTP/1.1\r\nX-Slow: ");
  RawClient silent(port());
  absl::SleepFor(absl::Milliseconds(100));  // the three are accepted

  const absl::Time start = absl::Now();
  absl::Notification done;
  std::thread stopper([&] {
    server().Shutdown();
    done.Notify();
  });
  EXPECT_TRUE(idle.ClosedWithin(absl::Seconds(1)));
  EXPECT_TRUE(silent.ClosedWithin(absl::Seconds(1)));
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  const absl::Duration took = absl::Now() - start;
  stopper.join();
  EXPECT_TRUE(slow.ClosedWithin(absl::Seconds(1)));
  EXPECT_LT(took, absl::Seconds(2) + absl::Seconds(1)) << took;
}

}  // namespace
}  // namespace grove::server
