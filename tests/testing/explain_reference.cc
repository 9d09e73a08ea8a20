#include "tests/testing/explain_reference.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "core/common/rows.h"
#include "gtest/gtest.h"

namespace grove::testing {

std::vector<float> ReferenceExplanation(const Forest& forest, const std::vector<float>& rows,
                                        const ExplainOptions& options, ThreadPool* pool,
                                        int64_t num_rows) {
  const int64_t n =
      num_rows >= 0 ? num_rows : static_cast<int64_t>(rows.size()) / forest.num_features;
  const int64_t width = ExplainWidth(forest, options.interactions);
  std::vector<float> out(n * width, -12345.0f);
  const absl::Status s = ExplainCpuReference(forest, MakeRowsView(rows.data(), n, forest.num_features),
                                             options, MakeMatrixView(out.data(), n, width), pool);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

std::vector<float> ReferenceExplanation(const Forest& forest, const std::vector<float>& rows,
                                        bool interactions, ThreadPool* pool, int iteration_begin,
                                        int iteration_end, int64_t num_rows) {
  ExplainOptions o;
  o.interactions = interactions;
  o.iteration_begin = iteration_begin;
  o.iteration_end = iteration_end;
  return ReferenceExplanation(forest, rows, o, pool, num_rows);
}

double MaxMarginError(const std::vector<float>& got, const std::vector<float>& want, int64_t rows,
                      int num_outputs) {
  if (got.size() != want.size()) return INFINITY;
  if (rows == 0) return 0;
  const int64_t width = static_cast<int64_t>(want.size()) / rows;
  const int64_t block = width / num_outputs;
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int k = 0; k < num_outputs; ++k) {
      const float* w = want.data() + r * width + k * block;
      const float* g = got.data() + r * width + k * block;
      double margin = 0;
      for (int64_t c = 0; c < block; ++c) margin += w[c];
      for (int64_t c = 0; c < block; ++c) {
        const double diff = std::isfinite(g[c]) ? std::abs(double{g[c]} - w[c]) : INFINITY;
        worst = std::max(worst, diff / std::max(1.0, std::abs(margin)));
      }
    }
  }
  return worst;
}

}  // namespace grove::testing
