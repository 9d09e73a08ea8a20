// The k features with the largest |SHAP value| per row and output: what grove.v1's top_k answers
// (TopFeatures) and what `grove explain --top-k` writes, computed once here so both rank alike.
//
// Thread-safe: a pure function.
#pragma once

#include <cstdint>

namespace grove {

// `values`: SHAP values [rows, num_outputs, num_features + 1] (bias last, excluded from the
// ranking). Writes, per (row, output), the k feature indices ordered by |value| descending (ties:
// the lower index first) into `features` and their values into `top` (each [rows, num_outputs,
// k]). `k` must be in [0, num_features].
void TopKFeatures(const float* values, int64_t rows, int num_outputs, int num_features, int k,
                  int32_t* features, float* top);

}  // namespace grove
