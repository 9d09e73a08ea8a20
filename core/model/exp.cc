#include "core/model/exp.h"

#include <cmath>

// An FMA clone beside the baseline, picked at run time (GCC function multi-versioning, where the
// toolchain has it): the fused multiply-adds are one instruction each there and libm calls in the
// baseline, with the same results either way (a fused multiply-add is exact before rounding).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define GROVE_EXP_CLONES __attribute__((target_clones("fma", "default")))
#else
#define GROVE_EXP_CLONES
#endif

namespace grove {

GROVE_EXP_CLONES double HostExp(double x) {
  using namespace exp_internal;
  if (x != x) return x + x;
  const double xc = x > kMaxX ? kMaxX : (x < kMinX ? kMinX : x);
  const double kd = std::nearbyint(xc * kLog2e);
  double r = std::fma(-kd, kLn2Hi, xc);
  r = std::fma(-kd, kLn2Lo, r);
  double p = kTaylor[0];
  for (int i = 1; i < kTerms; ++i) p = std::fma(p, r, kTaylor[i]);
  const int k = static_cast<int>(kd);
  const int k1 = k >> 1;  // floor(k / 2): an arithmetic shift (C++20)
  return p * PowerOfTwo(k1) * PowerOfTwo(k - k1);
}

}  // namespace grove
