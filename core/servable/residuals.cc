#include "core/servable/residuals.h"

#include <algorithm>
#include <cmath>

namespace grove {

int64_t AdditivityResiduals(const float* values, int64_t n, int num_outputs, int num_features,
                            const float* outputs, float* residuals) {
  const int64_t block = num_features + 1;
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

int64_t InteractionResiduals(const float* interactions, int64_t n, int num_outputs,
                             int num_features, const float* outputs, float* residuals) {
  const int64_t f1 = num_features + 1;
  // A block of f1^2 entries is AdditivityResiduals' block of (f1^2 - 1) + 1.
  return AdditivityResiduals(interactions, n, num_outputs, static_cast<int>(f1 * f1 - 1), outputs,
                             residuals);
}

}  // namespace grove
