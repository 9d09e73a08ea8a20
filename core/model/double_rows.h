// Inputs given as doubles (CSV text, pandas float64) -> Grove's float32 rows, routed exactly as
// the library routes the doubles.
//
// Grove's engines take float32 rows (core/common/rows.h). XGBoost casts its inputs to float32
// itself, so for XGBoost models a plain cast is exact. LightGBM compares the double `x <= t` with
// double thresholds: a double d that is not a float lies between two floats lo < d < hi, and a
// threshold t in [lo, hi) can separate d from its nearest float (d = 1.325 <= t =
// 1.3250000000000002, but the nearest float 1.32500005f > t). For each value, the converter picks
// the nearest float unless one of the feature's thresholds (Forest::double_thresholds) lies between
// d and that float, in which case it picks the other neighbour, which lies on d's side of every
// threshold (when thresholds of one feature fall on both sides of d inside one float ulp, no float
// can; the nearest is kept). Non-finite values, NaN and values that are floats pass unchanged.
//
// Thread-safe (const); holds a pointer to the forest, which must outlive it.
#pragma once

#include <cstdint>

#include "core/model/forest.h"

namespace grove {

class DoubleRowConverter {
 public:
  explicit DoubleRowConverter(const Forest& forest) : forest_(forest) {}

  // The float to give the engines for `value` of `feature` (0 <= feature < num_features).
  float Convert(int feature, double value) const;
  // `rows` rows of num_features doubles -> floats (`in` and `out` row-major, dense).
  void ConvertRows(const double* in, int64_t rows, float* out) const;

 private:
  const Forest& forest_;
};

}  // namespace grove
