// The request head bounds (server/http/http_head.h): where a head ends, and each bound refused at its
// first byte over.
#include "server/http/http_head.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grove::server {
namespace {

using ::testing::HasSubstr;
using State = HeadScanner::State;

// Feeds `bytes` until the scanner stops asking for more; the bytes it took.
int64_t FeedAll(HeadScanner& s, const std::string& bytes) {
  for (char c : bytes) {
    if (s.Feed(c) != State::kMore) break;
  }
  return s.bytes();
}

TEST(HeadScannerTest, EndsAtTheFirstEmptyLineAfterTheRequestLine) {
  HeadLimits limits;
  HeadScanner s(limits);
  const std::string head = "POST /v2 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n";
  EXPECT_EQ(FeedAll(s, head + "abc"), static_cast<int64_t>(head.size()));
  EXPECT_EQ(s.state(), State::kDone);
  // A bare "\n" line is a line cpp-httplib skips, not the end; an empty request line is a request
  // line.
  s.Reset();
  const std::string odd = "\r\nGET / HTTP/1.1\r\n\nX: y\r\n\r\n";
  EXPECT_EQ(FeedAll(s, odd), static_cast<int64_t>(odd.size()));
  EXPECT_EQ(s.state(), State::kDone);
  s.Reset();
  EXPECT_EQ(FeedAll(s, "GET / HTTP/1.1\r\nX: \r\r\n"), 22);
  EXPECT_EQ(s.state(), State::kMore);
}

TEST(HeadScannerTest, RefusesALongLineAtItsFirstByteOver) {
  HeadLimits limits;
  limits.max_line_bytes = 100;
  HeadScanner s(limits);
  const std::string line(98, 'a');
  EXPECT_EQ(FeedAll(s, line + "\r\n" + "X: " + std::string(500, 'b')), 100 + 101);
  EXPECT_EQ(s.state(), State::kRefused);
  EXPECT_EQ(s.status(), 431);
  EXPECT_THAT(s.message(), HasSubstr("longer than 100 bytes"));
  s.Reset();
  EXPECT_EQ(FeedAll(s, std::string(1000, 'a')), 101);
  EXPECT_EQ(s.status(), 414);
  EXPECT_THAT(s.message(), HasSubstr("request line"));
}

TEST(HeadScannerTest, RefusesTooManyFieldsAndTooLargeAHead) {
  HeadLimits limits;
  limits.max_fields = 3;
  HeadScanner s(limits);
  EXPECT_EQ(FeedAll(s, "GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\n\r\n"), 36);
  EXPECT_EQ(s.state(), State::kDone);
  s.Reset();
  FeedAll(s, "GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\nd: 4\r\n\r\n");
  EXPECT_EQ(s.state(), State::kRefused);
  EXPECT_EQ(s.status(), 431);
  EXPECT_THAT(s.message(), HasSubstr("more than 3 header fields"));

  limits = HeadLimits{};
  limits.max_head_bytes = 200;
  HeadScanner small(limits);
  std::string head = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 20; ++i) absl::StrAppend(&head, "x", i, ": 0123456789\r\n");
  EXPECT_EQ(FeedAll(small, head), 201);
  EXPECT_EQ(small.status(), 431);
  EXPECT_THAT(small.message(), HasSubstr("larger than 200 bytes"));
}

}  // namespace
}  // namespace grove::server
