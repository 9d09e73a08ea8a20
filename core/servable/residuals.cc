#include "core/servable/residuals.h"

#include <algorithm>
#include <cmath>

namespace grove {

namespace {

// Residuals of rows of num_outputs blocks of `block` values each (the sum of a block is the
// output it explains).
int64_t BlockResiduals(const float* values, int64_t n, int num_outputs, int64_t block,
                       const float* outputs, float* residuals) {
  const int64_t width = num_outputs * block;
  int64_t exceeded = 0;
  for (int64_t r = 0; r < n; ++r) {
    bool over = false;
    for (int k = 0; k < num_outputs; ++k) {
      const float* v = values + r * width + k * block;
      double sum = 0;
      for (int64_t c = 0; c < block; ++c) sum += v[c];
      const double output = outputs[r * num_outputs + k];
      const double residual = sum - output;
      residuals[r * num_outputs + k] = static_cast<float>(residual);
      if (!(std::abs(residual) <= kResidualBound * std::max(1.0, std::abs(output)))) over = true;
    }
    if (over) ++exceeded;
  }
  return exceeded;
}

}  // namespace

int64_t AdditivityResiduals(const float* values, int64_t n, int num_outputs, int num_features,
                            const float* outputs, float* residuals) {
  return BlockResiduals(values, n, num_outputs, int64_t{num_features} + 1, outputs, residuals);
}

int64_t InteractionResiduals(const float* interactions, int64_t n, int num_outputs,
                             int num_features, const float* outputs, float* residuals) {
  // 64-bit: (F + 1)^2 passes int's range from F = 46,340.
  const int64_t f1 = int64_t{num_features} + 1;
  return BlockResiduals(interactions, n, num_outputs, f1 * f1, outputs, residuals);
}

}  // namespace grove
