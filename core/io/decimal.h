// An exact fast path for parsing short decimal numbers as double, for the CSV reader.
//
// ParseShortDecimal parses `[-]digits[.digits][(e|E)[+|-]digits]` (at least one mantissa digit)
// when the value can be computed exactly with one IEEE multiplication or division (Clinger's fast
// path): at most 19 significant digits whose integer value m is <= 2^53, times 10^k with
// |k| <= 22 (both m and 10^k are then exact doubles, so the one rounding of m * 10^k or m / 10^-k
// is the correct rounding of the decimal), or k up to 22 + 15 when m * 10^(k - 22) is still an
// integer <= 2^53. Zero mantissas give +-0 for any exponent. Everything else -- more digits, larger
// exponents, '+', "inf", "nan", an exponent without digits -- returns nullptr, and the caller
// falls back to std::from_chars. Whenever the result is not nullptr it equals, bit for bit,
// std::from_chars(p, e, value, std::chars_format::general), and it is the end std::from_chars
// would return.
//
// This relies on double arithmetic in round-to-nearest without excess precision (SSE2 on x86-64,
// every AArch64), the C++ default.
//
// Thread-safe (pure).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace grove {

namespace decimal_internal {

inline constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                    1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                    1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
inline constexpr uint64_t kPow10Int[] = {1,
                                         10,
                                         100,
                                         1000,
                                         10000,
                                         100000,
                                         1000000,
                                         10000000,
                                         100000000,
                                         1000000000,
                                         10000000000,
                                         100000000000,
                                         1000000000000,
                                         10000000000000,
                                         100000000000000,
                                         1000000000000000};
inline constexpr uint64_t kMaxExactInt = uint64_t{1} << 53;

inline bool IsDigit(char c) { return static_cast<unsigned char>(c - '0') < 10; }

// The value of eight digits 0-9, one per byte of a little-endian word, the first (most
// significant) in the lowest byte.
inline uint64_t EightDigitsValue(uint64_t v) {
  v = v * 10 + (v >> 8);  // pairs of digits in the even bytes
  constexpr uint64_t kMask = 0x000000FF000000FF;
  constexpr uint64_t kMul1 = 100 + (uint64_t{1000000} << 32);
  constexpr uint64_t kMul2 = 1 + (uint64_t{10000} << 32);
  return (((v & kMask) * kMul1) + (((v >> 16) & kMask) * kMul2)) >> 32;
}

// Appends the run of digits at `p` (up to `e`) to *m (wrapping modulo 2^64) and returns its end.
// Eight bytes at a time without a branch per digit: the lengths of the fields of a CSV file vary
// from one to the next, and a loop ending at an unpredictable digit costs more than the digits.
inline const char* AppendDigits(const char* p, const char* e, uint64_t* m) {
  if constexpr (std::endian::native == std::endian::little) {
    while (e - p >= 8) {
      uint64_t v;
      std::memcpy(&v, p, 8);
      const uint64_t d = v - 0x3030303030303030;
      // The high bit of each byte that is not a digit; no borrow or carry crosses the digits
      // before the first such byte, so its lowest set bit marks where the run ends.
      const uint64_t other = ((v + 0x4646464646464646) | d) & 0x8080808080808080;
      const int n = other == 0 ? 8 : std::countr_zero(other) >> 3;
      if (n == 0) return p;
      // The n digits moved to the top bytes, zeros (leading) below them.
      *m = *m * kPow10Int[n] + EightDigitsValue(d << (64 - 8 * n));
      p += n;
      if (n < 8) return p;
    }
  }
  while (p < e && IsDigit(*p)) *m = *m * 10 + static_cast<uint64_t>(*p++ - '0');
  return p;
}

}  // namespace decimal_internal

// See the file comment. `p` < `e` is not required (an empty range returns nullptr).
inline const char* ParseShortDecimal(const char* p, const char* e, double* value) {
  using decimal_internal::IsDigit;
  const bool negative = p < e && *p == '-';
  p += negative;
  const char* const digits_begin = p;
  uint64_t m = 0;  // wraps past 19 digits; checked below
  p = decimal_internal::AppendDigits(p, e, &m);
  int64_t digits = p - digits_begin;
  int64_t exp10 = 0;
  if (p < e && *p == '.') {
    const char* const frac_begin = ++p;
    p = decimal_internal::AppendDigits(p, e, &m);
    exp10 = -(p - frac_begin);
    digits += p - frac_begin;
  }
  if (digits == 0) return nullptr;  // "", "-", ".", "-.": not a number, or "inf" / "nan"
  if (digits > 19) {
    // Leading zeros add nothing to m; more than 19 digits after them may have wrapped it.
    int64_t significant = digits;
    for (const char* q = digits_begin; q < p && (*q == '0' || *q == '.'); ++q) {
      significant -= *q == '0';
    }
    if (significant > 19) return nullptr;
  }
  if (p < e && (*p == 'e' || *p == 'E')) {
    const char* q = p + 1;
    const bool exp_negative = q < e && *q == '-';
    q += q < e && (*q == '-' || *q == '+');
    if (q == e || !IsDigit(*q)) return nullptr;  // "1e", "1e+": from_chars stops before the 'e'
    int64_t exponent = 0;
    for (; q < e && IsDigit(*q); ++q) {
      if (exponent < 100000) exponent = exponent * 10 + (*q - '0');
    }
    exp10 += exp_negative ? -exponent : exponent;
    p = q;
  }
  using decimal_internal::kMaxExactInt;
  using decimal_internal::kPow10;
  double d;
  if (m == 0) {
    d = 0.0;
  } else if (m > kMaxExactInt) {
    return nullptr;
  } else if (exp10 < 0) {
    if (exp10 < -22) return nullptr;
    d = static_cast<double>(m) / kPow10[-exp10];
  } else if (exp10 <= 22) {
    d = static_cast<double>(m) * kPow10[exp10];
  } else {
    // m * 10^(exp10 - 22) may still be an exact integer: then one multiplication by 1e22 remains.
    const int64_t shift = exp10 - 22;
    if (shift > 15 || m > kMaxExactInt / decimal_internal::kPow10Int[shift]) return nullptr;
    d = static_cast<double>(m * decimal_internal::kPow10Int[shift]) * kPow10[22];
  }
  *value = negative ? -d : d;
  return p;
}

}  // namespace grove
