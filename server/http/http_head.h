// HeadScanner: the bounds of an HTTP/1.1 request head (request line and header fields), checked
// byte by byte as the bytes arrive, before anything is kept. groved's REST port feeds it every
// byte of a request head (server/kserve/http_server.cc) so that a line without an end, a flood of fields
// or an oversized head is refused after at most the limit's bytes instead of growing a buffer.
//
// Lines are split where cpp-httplib splits them (at '\n'), and the head ends where it ends: at
// the first line after the request line that is exactly "\r\n" (a line without the '\r' is
// skipped by cpp-httplib, and counted here as a field line). The scanner never looks inside a
// line, so that it agrees with the parser on where the body begins whatever the line holds.
//
// Not thread-safe (one per connection).
#pragma once

#include <cstdint>
#include <string>

namespace grove::server {

struct HeadLimits {
  // A line with its line end; cpp-httplib refuses longer ones too, once it has read them whole.
  int64_t max_line_bytes = 8192;
  int max_fields = 100;               // header field lines
  int64_t max_head_bytes = 64 << 10;  // the request line, the fields and the empty line
};

class HeadScanner {
 public:
  enum class State { kMore, kDone, kRefused };

  explicit HeadScanner(const HeadLimits& limits) : limits_(limits) {}

  // Takes the next byte of the head. kDone: the byte ended the head (the next one is the body's or
  // the next request's); kRefused: a bound was passed, see status() and message(). Bytes fed after
  // kDone or kRefused are not looked at.
  State Feed(char c);
  // Starts a new head (the next request on the connection).
  void Reset();

  State state() const { return state_; }
  int64_t bytes() const { return bytes_; }
  // After kRefused: 414 (the request line), 431 (a field line, the field count or the head size),
  // and a message naming the bound.
  int status() const { return status_; }
  const std::string& message() const { return message_; }

 private:
  State Refuse(int status, std::string message);

  const HeadLimits limits_;
  State state_ = State::kMore;
  int64_t bytes_ = 0;
  int64_t line_bytes_ = 0;  // of the current line, so far
  bool line_cr_only_ = false;  // the current line so far is exactly "\r"
  int lines_ = 0;              // finished lines
  int status_ = 0;
  std::string message_;
};

}  // namespace grove::server
