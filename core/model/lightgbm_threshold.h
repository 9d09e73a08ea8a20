// LightGBM numeric thresholds for float32 rows (the LightGBM loader's, and the Treelite loader's for
// its `<=` tests; private to the loaders and their tests).
//
// LightGBM sends a row left when the double `x <= t` (t a double threshold). Grove rows are float32
// and every engine routes `x < threshold` with a float threshold (core/model/decision.h). For every
// float x, `(double)x <= t` is exactly `x <= F` with F the largest float not above t, which is exactly
// `x < nextafterf(F, +inf)`. The single case with no exact float form is t = +inf (x = +inf then goes
// right instead of left); LightGBM does not write such thresholds.
#pragma once

#include <cfloat>
#include <cmath>
#include <limits>

namespace grove::lightgbm_internal {

// The float threshold that reproduces LightGBM's `(double)x <= t` as `x < result` for every
// non-NaN float x. NaN in, NaN out (callers reject it).
inline float LightgbmNumericThreshold(double t) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (std::isnan(t)) return std::numeric_limits<float>::quiet_NaN();
  float below;  // largest float <= t
  if (t >= static_cast<double>(FLT_MAX)) {
    below = t == std::numeric_limits<double>::infinity() ? kInf : FLT_MAX;
  } else if (t < -static_cast<double>(FLT_MAX)) {
    below = -kInf;  // converting t itself would be undefined behaviour
  } else {
    below = static_cast<float>(t);  // in range: rounds to a neighbour
    if (static_cast<double>(below) > t) below = std::nextafter(below, -kInf);
  }
  return std::nextafter(below, kInf);
}

}  // namespace grove::lightgbm_internal
