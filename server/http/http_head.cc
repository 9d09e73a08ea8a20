#include "server/http/http_head.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace grove::server {

HeadScanner::State HeadScanner::Feed(char c) {
  if (state_ != State::kMore) return state_;
  ++bytes_;
  ++line_bytes_;
  if (line_bytes_ > limits_.max_line_bytes) {
    if (lines_ == 0) {
      return Refuse(414, absl::StrCat("the request line is longer than ", limits_.max_line_bytes,
                                      " bytes"));
    }
    return Refuse(431, absl::StrCat("a header field line is longer than ",
                                    limits_.max_line_bytes, " bytes"));
  }
  if (bytes_ > limits_.max_head_bytes) {
    return Refuse(431, absl::StrCat("the request head (request line and header fields) is "
                                    "larger than ",
                                    limits_.max_head_bytes, " bytes"));
  }
  if (c != '\n') {
    line_cr_only_ = line_bytes_ == 1 && c == '\r';
    return state_;
  }
  const bool blank = line_cr_only_;
  const int line = lines_++;
  line_bytes_ = 0;
  line_cr_only_ = false;
  if (line == 0) return state_;  // the request line
  if (blank) {
    state_ = State::kDone;
    return state_;
  }
  if (line > limits_.max_fields) {
    return Refuse(431, absl::StrCat("the request has more than ", limits_.max_fields,
                                    " header fields"));
  }
  return state_;
}

void HeadScanner::Reset() {
  state_ = State::kMore;
  bytes_ = 0;
  line_bytes_ = 0;
  line_cr_only_ = false;
  lines_ = 0;
  status_ = 0;
  message_.clear();
}

HeadScanner::State HeadScanner::Refuse(int status, std::string message) {
  state_ = State::kRefused;
  status_ = status;
  message_ = std::move(message);
  return state_;
}

}  // namespace grove::server
