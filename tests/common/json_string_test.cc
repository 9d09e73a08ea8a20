// JsonString / AppendJsonString: quotes, backslashes and control characters escaped, other bytes
// (UTF-8 included) kept, appended after what the string already holds.
#include "core/common/json_string.h"

#include <string>

#include "gtest/gtest.h"

namespace grove {
namespace {

TEST(JsonStringTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonString(""), "\"\"");
  EXPECT_EQ(JsonString("plain"), "\"plain\"");
  EXPECT_EQ(JsonString("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonString("\n\t\r"), "\"\\n\\t\\r\"");
  EXPECT_EQ(JsonString(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(JsonString(std::string("nul\0x", 5)), "\"nul\\u0000x\"");
  EXPECT_EQ(JsonString("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
}

TEST(JsonStringTest, AppendsAfterWhatIsThere) {
  std::string out = "{\"k\":";
  AppendJsonString(out, "v");
  EXPECT_EQ(out, "{\"k\":\"v\"");
}

}  // namespace
}  // namespace grove
