// How groved reads an HTTP/1.1 request for cpp-httplib to parse (server/kserve/http_server.h says why):
// BoundedRequestStream hands the parser a connection's bytes under groved's bounds, whatever
// carries them (a socket in groved, memory in the fuzz target), and CheckFraming decides from a
// parsed head whether its body can be delimited safely.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "httplib.h"
#include "server/http/http_head.h"

namespace grove::server {

// What a JSON body is admitted at against the request memory budget, per byte: the peak of
// receiving, parsing, converting and answering it, measured at 7x its size with 9-digit numbers
// and at 22x with 1-digit ones ("0,0,..."), the densest JSON numbers can be.
inline constexpr int64_t kJsonBodyCost = 24;
// The same for a binary tensor byte: the body, and the request message's copy of its tensors
// (the rows converted for the engines are the call's own reservation): measured at 3x its size
// in all.
inline constexpr int64_t kBinaryBodyCost = 2;

// A body at most this much above the limit is still read (and dropped) before its 413, so that a
// client that sends its whole body before reading the answer (urllib, most simple clients) reads
// the 413 instead of a reset connection; a body announced larger than that is refused at once.
inline constexpr int64_t kDrainedExcessBytes = int64_t{4} << 20;

// A request whose body cannot be delimited safely, or that is refused from its head, and the
// status it is answered with.
struct FramingError {
  int status;
  std::string message;
};

// A body is delimited by one Content-Length of plain digits, or by Transfer-Encoding: chunked
// alone, and only a POST, PUT, PATCH or DELETE has one (cpp-httplib reads no other's body, which
// would then be read as the next request). Two lengths, a length beside chunked, a coding groved
// does not decode, or a body on another method are refused, never resolved one way: a proxy in
// front that resolved them another way would take the rest of the body for a request of its own
// (request smuggling, RFC 9112 section 6.3). A length more than kDrainedExcessBytes above
// `max_body_bytes` is refused from the headers, before any of the body is read (a body less far
// above it is read, dropped and answered 413 by cpp-httplib).
std::optional<FramingError> CheckFraming(const httplib::Request& request, int64_t max_body_bytes);

class BoundedRequestStream;

struct BodyLimits {
  int64_t max_body_bytes;       // --max_message_bytes
  int64_t max_json_body_bytes;  // --http_max_json_body_mb
};

// For a request whose head announced a body (`length` bytes, or `chunked`), what groved checks
// from the head before it reads the body -- the content coding (a compressed body would be
// inflated without a bound: 415), the JSON limit (413) -- and the body's admission to `stream`
// (AdmitBody; 429 when the budget is spent). A body with binary tensors starts with a JSON part of
// the length its Inference-Header-Content-Length names; one without is JSON whole. Nothing when
// the body may be read; a length above the limit (CheckFraming lets through at most
// kDrainedExcessBytes above it) is read and dropped by cpp-httplib, nothing of it admitted.
std::optional<FramingError> AdmitBodyFromHead(const httplib::Request& req, int64_t length,
                                              bool chunked, const BodyLimits& limits,
                                              BoundedRequestStream* stream);

// The reason phrase of the statuses a stream answers itself.
const char* ReasonPhrase(int status);

// One connection's bytes for cpp-httplib to parse, one request after another. Every byte of a
// request head passes through a HeadScanner as it is handed over (414 / 431 past its bounds), so
// that the parser never buffers more than the bounds; body bytes are counted against the body's
// limit (413) and admitted against the memory budget (429) as they are handed over. A bound passed
// is answered here at once, the connection marked to close after it, and every later read and
// write fails, so that cpp-httplib's own answer is dropped.
//
// A subclass supplies the bytes (Receive), takes the answer's (Send) and admits body bytes to the
// memory budget (Admit). Not thread-safe (the connection's worker).
class BoundedRequestStream : public httplib::Stream {
 public:
  explicit BoundedRequestStream(const HeadLimits& limits) : scanner_(limits) {}

  // Starts the next request on the connection; bytes already received stay buffered.
  void BeginRequest();
  // Bytes of the next request were received already (pipelined).
  bool buffered() const { return begin_ != end_; }

  // The request's body is admitted before it is read: `announced` bytes (0: chunked, admitted as
  // they arrive), at most `limit` (-1: what Content-Length announced, which cpp-httplib reads
  // exactly), held against the memory budget until the next request begins. Its first
  // `json_bytes` bytes are JSON, each costing kJsonBodyCost, the rest kBinaryBodyCost.
  // `limit_flag` names the limit in the 413 answer. The error of Admit when the budget is spent.
  absl::Status AdmitBody(int64_t announced, int64_t limit, int64_t json_bytes,
                         const char* limit_flag);

  bool head_done() const { return head_done_; }
  int64_t body_bytes() const { return body_bytes_; }
  // The connection closes after this answer (its request was not read whole).
  void CloseAfterAnswer() { close_ = true; }
  bool close_after_answer() const { return close_; }
  // A bound was passed and answered here.
  bool refused() const { return refused_; }

  // httplib::Stream.
  bool is_readable() const override { return !refused_; }
  bool is_writable() const override { return !refused_; }
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;

 protected:
  // Receives what is available into [buffer, buffer + size), waiting as the transport allows:
  // bytes received, 0 at the end of the stream, -1 on an error or timeout (after Refuse, when it
  // is one to answer).
  virtual ssize_t Receive(char* buffer, size_t size) = 0;
  // Sends some of [data, data + size): the bytes sent, or -1.
  virtual ssize_t Send(const char* data, size_t size) = 0;
  // Takes `cost` bytes more from the memory budget (held until the next request begins).
  virtual absl::Status Admit(int64_t cost) = 0;
  // The request's head has been handed over whole.
  virtual void OnHeadDone() {}
  // A bound was passed and answered with `status` (Refuse), once per request.
  virtual void OnRefused(int status) {}

  // Answers `status` with `message` (JSON) at once and marks the connection to close after it;
  // reads and writes fail from now on.
  void Refuse(int status, absl::string_view message);

 private:
  // What the first `bytes` bytes of the body cost the memory budget.
  int64_t Cost(int64_t bytes) const;
  // Extends the body's admission to its first `bytes` bytes.
  absl::Status Reserve(int64_t bytes);

  std::array<char, 16384> buffer_;
  size_t begin_ = 0;
  size_t end_ = 0;
  HeadScanner scanner_;
  bool head_done_ = false;
  bool refused_ = false;
  bool close_ = false;
  // The body is held against the memory budget (not one that cpp-httplib reads only to drop it).
  bool admitted_ = false;
  int64_t body_limit_ = -1;
  int64_t json_bytes_ = 0;  // the body's first bytes that are JSON
  const char* limit_flag_ = "";
  int64_t body_bytes_ = 0;
  int64_t reserved_ = 0;  // body bytes admitted
};

}  // namespace grove::server
