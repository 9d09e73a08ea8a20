// libFuzzer target for groved's REST request reader: arbitrary bytes as what a client sends on one
// connection, read request after request by cpp-httplib (its request parser, as groved links it)
// through BoundedRequestStream (server/http/http_stream.h) with the framing check and the body
// admission groved's REST port applies before a body is read (CheckFraming, AdmitBodyFromHead),
// handed over in pieces whose size the first byte chooses. Small bounds, so that the fuzzer
// reaches them.
// Checked, besides never a crash, a sanitizer report or an unbounded allocation:
//   * the head scanner and the parser agree on where a head ends: the parser has a request only
//     once the scanner has seen its whole head, and it holds no more fields and no longer lines
//     than the bounds;
//   * a body a handler sees is within its limit and was admitted to the memory budget;
//   * the stream's answers start with a status line.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "httplib.h"
#include "server/http/http_stream.h"

namespace {

using grove::server::BoundedRequestStream;
using grove::server::HeadLimits;

constexpr HeadLimits kLimits{.max_line_bytes = 256, .max_fields = 8, .max_head_bytes = 1024};
constexpr int64_t kBodyLimit = 4096;
constexpr int64_t kJsonLimit = 1024;
constexpr int64_t kBudget = 16384;
// cpp-httplib adds these to every request's headers.
constexpr size_t kAddedFields = 4;  // REMOTE_ADDR, REMOTE_PORT, LOCAL_ADDR, LOCAL_PORT

// The client's bytes, in pieces of `piece` bytes; the answers collected.
class MemoryStream final : public BoundedRequestStream {
 public:
  MemoryStream(absl::string_view in, size_t piece)
      : BoundedRequestStream(kLimits), in_(in), piece_(piece) {}

  void Next() {
    BeginRequest();
    admitted_ = 0;
  }
  bool exhausted() const { return in_.empty() && !buffered(); }
  int64_t admitted() const { return admitted_; }
  const std::string& out() const { return out_; }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 1;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 2;
  }
  socket_t socket() const override { return 0; }

 private:
  ssize_t Receive(char* buffer, size_t size) override {
    const size_t n = std::min({size, piece_, in_.size()});
    std::copy(in_.begin(), in_.begin() + static_cast<ptrdiff_t>(n), buffer);
    in_.remove_prefix(n);
    return static_cast<ssize_t>(n);
  }
  ssize_t Send(const char* data, size_t size) override {
    out_.append(data, size);
    return static_cast<ssize_t>(size);
  }
  absl::Status Admit(int64_t cost) override {
    if (cost < 0) std::abort();
    if (admitted_ + cost > kBudget) return absl::ResourceExhaustedError("budget spent");
    admitted_ += cost;
    return absl::OkStatus();
  }

  absl::string_view in_;
  const size_t piece_;
  int64_t admitted_ = 0;
  std::string out_;
};

// process_request is protected: the one way in.
class FuzzServer final : public httplib::Server {
 public:
  bool Process(httplib::Stream& stream, bool& closed) {
    return process_request(stream, false, closed, nullptr);
  }
};

// What a handler may see of a request whose head passed the bounds.
void CheckHead(const httplib::Request& req, const MemoryStream& stream) {
  if (!stream.head_done()) std::abort();  // the parser read past the end the scanner saw
  if (req.headers.size() > static_cast<size_t>(kLimits.max_fields) + kAddedFields) std::abort();
  for (const auto& [key, value] : req.headers) {
    if (static_cast<int64_t>(key.size() + value.size()) > kLimits.max_line_bytes) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = data[0] == 0 ? size : data[0];
  MemoryStream stream(absl::string_view(reinterpret_cast<const char*>(data) + 1, size - 1),
                      piece);
  FuzzServer server;
  server.set_payload_max_length(kBodyLimit);
  int64_t limit = -1;  // of the body being read
  server.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    CheckHead(req, stream);
    if (std::optional<grove::server::FramingError> e =
            grove::server::CheckFraming(req, kBodyLimit)) {
      stream.CloseAfterAnswer();
      res.status = e->status;
      return httplib::Server::HandlerResponse::Handled;
    }
    const bool chunked = req.has_header("Transfer-Encoding");
    int64_t length = 0;
    if (req.has_header("Content-Length")) {
      (void)absl::SimpleAtoi(req.get_header_value("Content-Length"), &length);
    }
    if (!chunked && length == 0) {
      res.status = 204;
      return httplib::Server::HandlerResponse::Handled;
    }
    // The limit the body is read under, as AdmitBodyFromHead sets it.
    limit = req.has_header("Inference-Header-Content-Length") ? kBodyLimit : kJsonLimit;
    if (std::optional<grove::server::FramingError> e = grove::server::AdmitBodyFromHead(
            req, length, chunked,
            {.max_body_bytes = kBodyLimit, .max_json_body_bytes = kJsonLimit}, &stream)) {
      stream.CloseAfterAnswer();
      res.status = e->status;
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  auto handler = [&](const httplib::Request& req, httplib::Response& res) {
    CheckHead(req, stream);
    if (static_cast<int64_t>(req.body.size()) > std::max(limit, int64_t{0})) std::abort();
    if (!req.body.empty() && stream.admitted() < static_cast<int64_t>(req.body.size())) {
      std::abort();  // a body kept without its admission
    }
    res.status = 200;
  };
  for (auto method : {&httplib::Server::Get, &httplib::Server::Post, &httplib::Server::Put,
                      &httplib::Server::Delete, &httplib::Server::Patch}) {
    (server.*method)(".*", handler);
  }
  // Requests one after another on the connection, as groved serves them (at most 64 here).
  for (int served = 0; served < 64 && !stream.exhausted(); ++served) {
    stream.Next();
    limit = -1;
    bool closed = false;
    if (!server.Process(stream, closed) || closed || stream.close_after_answer()) break;
  }
  if (!stream.out().empty() && stream.out().rfind("HTTP/1.1 ", 0) != 0) std::abort();
  return 0;
}
