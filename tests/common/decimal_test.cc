#include "core/io/decimal.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace grove {
namespace {

uint64_t Bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}

// The contract: whenever ParseShortDecimal answers, std::from_chars answers the same, bit for
// bit, and ends at the same character. Returns whether the fast path answered.
bool MatchesFromChars(const std::string& s) {
  const char* b = s.data();
  const char* e = b + s.size();
  double fast = -12345.0;
  const char* end = ParseShortDecimal(b, e, &fast);
  if (end == nullptr) return false;
  double want = 0;
  const auto [ptr, ec] = std::from_chars(b, e, want, std::chars_format::general);
  EXPECT_EQ(ec, std::errc()) << "'" << s << "'";
  EXPECT_EQ(ptr, end) << "'" << s << "'";
  EXPECT_EQ(Bits(fast), Bits(want)) << "'" << s << "': " << fast << " vs " << want;
  return true;
}

std::string Format(const char* format, double v) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

TEST(ParseShortDecimal, RandomDoublesInEveryFormatMatchFromChars) {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> exponent(-30, 30);
  std::uniform_real_distribution<double> unit(-1, 1);
  int64_t fast = 0, total = 0;
  for (int i = 0; i < 200000; ++i) {
    double v;
    if (i % 3 == 0) {
      const uint64_t b = rng();  // any finite double, subnormals included
      std::memcpy(&v, &b, 8);
      if (!std::isfinite(v)) continue;
    } else {
      v = unit(rng) * std::pow(10.0, exponent(rng));
    }
    if (i % 2 == 0) v = static_cast<float>(v);  // values written from float32, as grove writes
    for (const char* format : {"%.9g", "%.17g", "%.15g", "%.6g", "%.3e", "%.20e", "%.12f"}) {
      ++total;
      fast += MatchesFromChars(Format(format, v));
    }
  }
  // Most of them take the fast path: the test checks the fast path, not just the fallback.
  EXPECT_GT(fast, total / 3);
}

TEST(ParseShortDecimal, GrovesOwnOutputTakesTheFastPath) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  int fast = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float f = normal(rng) * std::pow(10.0f, static_cast<float>(i % 9 - 3));
    fast += MatchesFromChars(Format("%.9g", f));
  }
  EXPECT_GT(fast, n * 95 / 100);
}

TEST(ParseShortDecimal, RandomStringsOfNumberCharactersMatchFromChars) {
  std::mt19937 rng(13);
  // Digits, what a number may hold, the bytes either side of '0'-'9' and bytes past ASCII.
  const std::string alphabet = "0123456789000000000.-+eE5/:\xb0\x80\xff";
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  std::uniform_int_distribution<int> length(0, 28);
  for (int i = 0; i < 300000; ++i) {
    std::string s;
    const int n = length(rng);
    for (int k = 0; k < n; ++k) s += alphabet[pick(rng)];
    MatchesFromChars(s);
    MatchesFromChars(s + ",1");  // stops at the comma, as in a CSV line
  }
}

TEST(ParseShortDecimal, EdgeCases) {
  struct Case {
    const char* text;
    bool fast;  // whether the fast path answers
  };
  const Case cases[] = {
      // 19 significant digits fit; a 20th falls back, as do mantissas above 2^53.
      {"1234567890123456", true},
      {"9007199254740992", true},   // 2^53
      {"9007199254740993", false},  // 2^53 + 1: not exact
      {"1234567890123456789", false},
      {"12345678901234567890", false},
      {"18446744073709551617", false},  // 2^64 + 1: wraps to 1 in 64 bits
      {"-00000.18446744073709551617", false},
      {"0.000000000000000000000000000000001", false},
      {"00000000000000000000000000000000001", true},  // leading zeros are not digits of m
      {"0.0000000000000000001", true},                // 1e-19
      {"1.0000000000000000000", false},               // 20 digits
      {"100000000000000000000", false},
      // Exponents: |k| <= 22 directly, up to 37 through an exact integer, beyond falls back.
      {"1e22", true},
      {"1e-22", true},
      {"1e-23", false},
      {"1e23", true},
      {"123e30", true},
      {"9007199254740992e22", true},
      {"9007199254740992e23", false},
      {"1e37", true},
      {"1e38", false},
      {"1E5", true},
      {"1e+05", true},
      {"1.5e-05", true},
      {"1e0000000000000000000005", true},
      {"1e99999999999999999999", false},
      {"0e99999999999999999999", true},
      // Subnormals and overflow are from_chars's (and strtod's) business.
      {"4.9406564584124654e-324", false},
      {"2.2250738585072011e-308", false},
      {"1e309", false},
      {"1.7976931348623157e308", false},
      // Signs, zeros and dots.
      {"-0", true},
      {"-0.0", true},
      {"0", true},
      {".5", true},
      {"5.", true},
      {"-.5", true},
      {"-5.", true},
      {"+1", false},
      {"--1", false},
      {"-", false},
      {".", false},
      {"-.", false},
      {"", false},
      // Words and malformed exponents.
      {"inf", false},
      {"-infinity", false},
      {"nan", false},
      {"1e", false},
      {"1e+", false},
      {"1e-", false},
      {"1ex", false},
      // A number followed by more text: the end is where from_chars stops.
      {"1.2.3", true},
      {"0x10", true},
      {"12 ", true},
      {"7,8", true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(MatchesFromChars(c.text), c.fast) << "'" << c.text << "'";
  }
  double v = 1;
  ASSERT_NE(ParseShortDecimal("-0", "-0" + 2, &v), nullptr);
  EXPECT_TRUE(std::signbit(v));
  EXPECT_EQ(v, 0.0);
  const std::string s = "5.,";
  EXPECT_EQ(ParseShortDecimal(s.data(), s.data() + s.size(), &v), s.data() + 2);
  EXPECT_EQ(v, 5.0);
}

// The eight-at-a-time digit reader sees runs of every length at every position.
TEST(ParseShortDecimal, DigitRunsOfEveryLength) {
  for (int int_digits = 0; int_digits <= 20; ++int_digits) {
    for (int frac_digits = -1; frac_digits <= 20; ++frac_digits) {
      std::string s;
      for (int i = 0; i < int_digits; ++i) s += static_cast<char>('1' + (i * 7) % 9);
      if (frac_digits >= 0) s += '.';
      for (int i = 0; i < frac_digits; ++i) s += static_cast<char>('0' + (i * 3) % 10);
      const bool fast = MatchesFromChars(s);
      const int digits = int_digits + std::max(frac_digits, 0);
      if (digits > 0 && digits <= 15) EXPECT_TRUE(fast) << s;
      MatchesFromChars(s + "e-3,4");
      MatchesFromChars("-" + s + "x");
    }
  }
}

}  // namespace
}  // namespace grove
