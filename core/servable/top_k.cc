#include "core/servable/top_k.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace grove {

void TopKFeatures(const float* values, int64_t rows, int num_outputs, int num_features, int k,
                  int32_t* features, float* top) {
  const int64_t f1 = num_features + 1;
  std::vector<int32_t> order(static_cast<size_t>(num_features));
  for (int64_t r = 0; r < rows; ++r) {
    for (int o = 0; o < num_outputs; ++o) {
      const int64_t at = r * num_outputs + o;
      const float* v = values + at * f1;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [v](int32_t a, int32_t b) {
        const float x = std::fabs(v[a]), y = std::fabs(v[b]);
        return x != y ? x > y : a < b;
      });
      for (int i = 0; i < k; ++i) {
        features[at * k + i] = order[static_cast<size_t>(i)];
        top[at * k + i] = v[order[static_cast<size_t>(i)]];
      }
    }
  }
}

}  // namespace grove
