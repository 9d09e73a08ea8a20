#include "server/http/http_stream.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace grove::server {
namespace {

// RestError's JSON (server/kserve/kserve_rest.h), made here so that the reader builds without the
// request converters (its fuzz target links nothing else).
std::string ErrorBody(absl::string_view message) {
  return nlohmann::json({{"error", std::string(message)}})
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::optional<FramingError> CheckFraming(const httplib::Request& request, int64_t max_body_bytes) {
  const size_t lengths = request.get_header_value_count("Content-Length");
  const size_t codings = request.get_header_value_count("Transfer-Encoding");
  const std::string& method = request.method;
  if ((codings > 0 || (lengths > 0 && request.get_header_value("Content-Length") != "0")) &&
      method != "POST" && method != "PUT" && method != "PATCH" && method != "DELETE") {
    return FramingError{400, absl::StrCat("a ", method, " request carries no body; send it "
                                          "without Content-Length and Transfer-Encoding")};
  }
  if (lengths > 1) {
    return FramingError{400, absl::StrCat("the request has ", lengths,
                                          " Content-Length headers; send one")};
  }
  if (lengths == 1 && codings > 0) {
    return FramingError{400,
                        "the request has both Content-Length and Transfer-Encoding; send one"};
  }
  if (codings > 0) {
    const std::string coding = request.get_header_value("Transfer-Encoding");
    if (codings > 1 || !absl::EqualsIgnoreCase(coding, "chunked")) {
      return FramingError{501, absl::StrCat("Transfer-Encoding '", coding,
                                            "' is not supported; send the body chunked "
                                            "(Transfer-Encoding: chunked) or with Content-Length")};
    }
    return std::nullopt;
  }
  if (lengths == 0) return std::nullopt;
  const std::string text = request.get_header_value("Content-Length");
  int64_t length = 0;
  const bool digits = !text.empty() && text.size() <= 18 &&
                      std::all_of(text.begin(), text.end(), absl::ascii_isdigit);
  if (!digits || !absl::SimpleAtoi(text, &length)) {
    return FramingError{400, absl::StrCat("Content-Length '", text,
                                          "' is not a byte count (digits only)")};
  }
  if (length > max_body_bytes && length - max_body_bytes > kDrainedExcessBytes) {
    return FramingError{413, absl::StrCat("the request body of ", length,
                                          " bytes is larger than the limit of ", max_body_bytes,
                                          " bytes (--max_message_bytes)")};
  }
  return std::nullopt;
}

std::optional<FramingError> AdmitBodyFromHead(const httplib::Request& req, int64_t length,
                                              bool chunked, const BodyLimits& limits,
                                              BoundedRequestStream* stream) {
  if (req.has_header("Content-Encoding") &&
      !absl::EqualsIgnoreCase(req.get_header_value("Content-Encoding"), "identity")) {
    return FramingError{415, absl::StrCat("Content-Encoding '",
                                          req.get_header_value("Content-Encoding"),
                                          "' is not supported; send the body uncompressed")};
  }
  // A header that is not a byte count is answered 400 once the body is read.
  const int64_t json_limit = std::min(limits.max_json_body_bytes, limits.max_body_bytes);
  int64_t json_bytes = INT64_MAX;
  if (req.has_header("Inference-Header-Content-Length")) {
    int64_t v = 0;
    if (absl::SimpleAtoi(req.get_header_value("Inference-Header-Content-Length"), &v) &&
        v >= 0) {
      json_bytes = v;
    }
  }
  const bool binary = json_bytes != INT64_MAX;
  const bool json_flag = limits.max_json_body_bytes <= limits.max_body_bytes;
  if (binary ? json_bytes > json_limit : (!chunked && length > json_limit)) {
    return FramingError{
        413, absl::StrCat("the JSON ", binary ? "part of the request body" : "request body",
                          " is larger than the limit of ", json_limit, " bytes for JSON (",
                          json_flag ? "--http_max_json_body_mb" : "--max_message_bytes",
                          "); send tensors as binary data (Inference-Header-Content-Length) or "
                          "fewer rows per request")};
  }
  const int64_t limit = binary ? limits.max_body_bytes : json_limit;
  if (!chunked && length > limit) return std::nullopt;
  const absl::Status admitted = stream->AdmitBody(
      chunked ? 0 : length, chunked ? limit : -1, json_bytes,
      !binary && json_flag ? "--http_max_json_body_mb" : "--max_message_bytes");
  if (!admitted.ok()) return FramingError{429, std::string(admitted.message())};
  return std::nullopt;
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    default: return "Bad Request";
  }
}

void BoundedRequestStream::BeginRequest() {
  scanner_.Reset();
  head_done_ = false;
  admitted_ = false;
  body_limit_ = -1;
  json_bytes_ = 0;
  limit_flag_ = "";
  body_bytes_ = 0;
  reserved_ = 0;
}

absl::Status BoundedRequestStream::AdmitBody(int64_t announced, int64_t limit, int64_t json_bytes,
                                             const char* limit_flag) {
  admitted_ = true;
  body_limit_ = limit;
  json_bytes_ = json_bytes;
  limit_flag_ = limit_flag;
  return announced > 0 ? Reserve(announced) : absl::OkStatus();
}

ssize_t BoundedRequestStream::read(char* ptr, size_t size) {
  if (refused_) return -1;
  if (begin_ == end_) {
    const ssize_t got = Receive(buffer_.data(), buffer_.size());
    if (got <= 0 || refused_) return refused_ ? -1 : got;
    begin_ = 0;
    end_ = static_cast<size_t>(got);
  }
  size_t n = std::min(size, end_ - begin_);
  if (!head_done_) {
    for (size_t i = 0; i < n; ++i) {
      const HeadScanner::State s = scanner_.Feed(buffer_[begin_ + i]);
      if (s == HeadScanner::State::kRefused) {
        Refuse(scanner_.status(), scanner_.message());
        return -1;
      }
      if (s == HeadScanner::State::kDone) {
        n = i + 1;
        head_done_ = true;
        OnHeadDone();
        break;
      }
    }
  } else {
    body_bytes_ += static_cast<int64_t>(n);
    if (body_limit_ >= 0 && body_bytes_ > body_limit_) {
      Refuse(413, absl::StrCat("the request body is larger than the limit of ", body_limit_,
                               " bytes (", limit_flag_, ")"));
      return -1;
    }
    if (admitted_ && body_bytes_ > reserved_) {
      // Grown by doubling (from 64 KiB), so that a chunked body takes few admissions.
      const int64_t want = std::max({body_bytes_, 2 * reserved_, int64_t{64} << 10});
      if (absl::Status s = Reserve(want); !s.ok()) {
        Refuse(429, s.message());
        return -1;
      }
    }
  }
  std::memcpy(ptr, buffer_.data() + begin_, n);
  begin_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t BoundedRequestStream::write(const char* ptr, size_t size) {
  if (refused_) return -1;
  return Send(ptr, size);
}

void BoundedRequestStream::Refuse(int status, absl::string_view message) {
  if (refused_) return;
  refused_ = true;
  close_ = true;
  OnRefused(status);
  const std::string body = ErrorBody(message);
  const std::string answer =
      absl::StrCat("HTTP/1.1 ", status, " ", ReasonPhrase(status),
                   "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                   "\r\nConnection: close\r\n\r\n", body);
  for (size_t done = 0; done < answer.size();) {
    const ssize_t n = Send(answer.data() + done, answer.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
}

int64_t BoundedRequestStream::Cost(int64_t bytes) const {
  const int64_t json = std::min(bytes, json_bytes_);
  if (bytes > INT64_MAX / (2 * kJsonBodyCost)) return INT64_MAX / 2;
  return json * kJsonBodyCost + (bytes - json) * kBinaryBodyCost;
}

absl::Status BoundedRequestStream::Reserve(int64_t bytes) {
  if (absl::Status s = Admit(Cost(bytes) - Cost(reserved_)); !s.ok()) return s;
  reserved_ = bytes;
  return absl::OkStatus();
}

}  // namespace grove::server
