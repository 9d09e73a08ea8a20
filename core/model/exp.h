// exp(x) in double with the same bits on every host and at every vector width: the exponential
// of the link functions on the CPU (TransformRow's on the host), so that the CPU engine's vector
// form (cpu::Exp512, core/predict/cpu/cpu_transform_simd.cc, the same operations eight lanes at a
// time) and the CPU reference agree bit for bit. libm's exp is not used there: its bits are its
// own, and no vector form of it gives them.
//
// Contract: within one unit in the last place of exp(x) (tests/model/exp_test.cc measures it
// against long double); a NaN gives a NaN, x above 710 gives +inf, x below -746 gives 0; results
// in the subnormal range are rounded once. Rounds k by the thread's rounding mode, as every other
// step does (the vector form likewise). Host only (device code keeps CUDA's exp). Thread-safe.
// Built with its multiply-adds fused only where written (exp.cc), and with a clone for processors
// with FMA, where the fused multiply-adds are one instruction each.
//
// Method: x = k ln2 + r, k the nearest integer to x log2(e) and r by two fused multiply-adds with
// ln2 in two parts (|r| <= ln2 / 2); exp(r) by its Taylor polynomial to r^13 (truncation below
// 1e-17 relative), evaluated by Horner's rule with fused multiply-adds; times 2^k as two powers of
// two, 2^floor(k/2) then 2^(k - floor(k/2)), so that k = 1024 overflows to inf and a subnormal
// result rounds in the last product only.
#pragma once

#include <cstdint>
#include <cstring>

namespace grove {
namespace exp_internal {

inline constexpr double kLog2e = 0x1.71547652b82fep0;
inline constexpr double kLn2Hi = 0x1.62e42fefa39efp-1;  // ln2 rounded to double
inline constexpr double kLn2Lo = 0x1.abc9e3b39803fp-56;  // ln2 - kLn2Hi
inline constexpr double kMaxX = 710.0;                   // exp(710) > DBL_MAX
inline constexpr double kMinX = -746.0;                  // exp(-746) < half the least subnormal
// 1/n! for n = 13 down to 0: Horner's coefficients.
inline constexpr int kTerms = 14;
inline constexpr double kTaylor[kTerms] = {
    1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0,
    1.0 / 40320.0,      1.0 / 5040.0,      1.0 / 720.0,      1.0 / 120.0,     1.0 / 24.0,
    1.0 / 6.0,          0.5,               1.0,              1.0};

// 2^k for -1022 <= k <= 1023.
inline double PowerOfTwo(int k) {
  const uint64_t bits = static_cast<uint64_t>(k + 1023) << 52;
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

}  // namespace exp_internal

double HostExp(double x);

}  // namespace grove
