#include "core/model/double_rows.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

namespace grove {
namespace {

// Round-to-nearest double -> float without undefined behaviour out of the float range.
float ToFloat(double value) {
  // Beyond FLT_MAX + half an ulp, round-to-nearest gives infinity.
  constexpr double kOverflow = static_cast<double>(FLT_MAX) + 0x1p103;
  if (value >= kOverflow) return std::numeric_limits<float>::infinity();
  if (value <= -kOverflow) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(value);
}

}  // namespace

float DoubleRowConverter::Convert(int feature, double value) const {
  const float nearest = ToFloat(value);
  const auto& offsets = forest_.double_threshold_offsets;
  if (offsets.empty() || !std::isfinite(nearest) || static_cast<double>(nearest) == value) {
    return nearest;  // NaN, infinities, floats; and every value of an XGBoost model
  }
  constexpr float kInf = std::numeric_limits<float>::infinity();
  // lo < value < hi, adjacent floats.
  const float lo = static_cast<double>(nearest) < value ? nearest : std::nextafter(nearest, -kInf);
  const float hi = std::nextafter(lo, kInf);
  const double* begin = forest_.double_thresholds.data() + offsets[feature];
  const double* end = forest_.double_thresholds.data() + offsets[feature + 1];
  // Thresholds t in [lo, hi): with t >= value the row must go left (needs lo <= t); with t < value
  // it must go right (needs hi > t). Float thresholds route a float x left iff (double)x <= t.
  const double* first = std::lower_bound(begin, end, static_cast<double>(lo));
  bool need_lo = false, need_hi = false;
  for (const double* t = first; t != end && *t < static_cast<double>(hi); ++t) {
    (*t >= value ? need_lo : need_hi) = true;
  }
  if (need_lo && !need_hi) return lo;
  if (need_hi && !need_lo) return hi;
  return nearest;
}

void DoubleRowConverter::ConvertRows(const double* in, int64_t rows, float* out) const {
  const int64_t cols = forest_.num_features;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      out[r * cols + c] = Convert(static_cast<int>(c), in[r * cols + c]);
    }
  }
}

}  // namespace grove
