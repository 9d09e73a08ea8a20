#include "core/model/exp.h"

#include <cmath>

namespace grove {

__attribute__((target_clones("fma", "default"))) double HostExp(double x) {
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
