#include "core/common/utf8.h"

#include <string>
#include <vector>

#include "core/io/csv.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

TEST(EscapeInvalidUtf8, KeepsValidUtf8AndEscapesEveryOtherByte) {
  EXPECT_EQ(EscapeInvalidUtf8("plain"), "plain");
  EXPECT_EQ(EscapeInvalidUtf8(""), "");
  // Two, three and four byte sequences, the highest code point.
  const std::string valid = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x8C\xB2 \xF4\x8F\xBF\xBF";
  EXPECT_EQ(EscapeInvalidUtf8(valid), valid);
  EXPECT_EQ(EscapeInvalidUtf8("caf\xE9"), "caf\\xE9");  // Latin-1
  EXPECT_EQ(EscapeInvalidUtf8("x\xC3"), "x\\xC3");      // cut short
  EXPECT_EQ(EscapeInvalidUtf8("\xC0\xAF"), "\\xC0\\xAF");          // overlong '/'
  EXPECT_EQ(EscapeInvalidUtf8("\xED\xA0\x80"), "\\xED\\xA0\\x80");  // a surrogate
  EXPECT_EQ(EscapeInvalidUtf8("\xF4\x90\x80\x80"), "\\xF4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(EscapeInvalidUtf8(std::string("a\0b", 3)), std::string("a\0b", 3));
}

// A CSV header names its columns as a model names its features, so that Latin-1 names written by
// the same tool still match.
TEST(EscapeInvalidUtf8, CsvHeaderNamesAreEscapedAsFeatureNamesAre) {
  absl::StatusOr<std::vector<std::string>> names = ParseCsvHeader("caf\xE9,b", "h.csv", 1);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, (std::vector<std::string>{"caf\\xE9", "b"}));
}

}  // namespace
}  // namespace grove
