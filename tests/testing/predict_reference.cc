#include "tests/testing/predict_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "core/common/rows.h"
#include "gtest/gtest.h"

namespace grove::testing {

PredictOptions Kind(OutputKind kind, int begin, int end) {
  PredictOptions o;
  o.kind = kind;
  o.iteration_begin = begin;
  o.iteration_end = end;
  return o;
}

std::vector<float> ReferencePrediction(const Forest& forest, const std::vector<float>& rows,
                                       const PredictOptions& options, ThreadPool* pool) {
  const int64_t n = static_cast<int64_t>(rows.size()) / forest.num_features;
  const int64_t width = PredictWidth(forest, options);
  std::vector<float> out(n * width, -12345.0f);
  const absl::Status s = PredictCpu(forest, MakeRowsView(rows.data(), n, forest.num_features),
                                    options, MakeMatrixView(out.data(), n, width), pool);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

double MaxRelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double e = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) || std::isnan(want[i])) {
      if (std::isnan(got[i]) != std::isnan(want[i])) return std::numeric_limits<double>::infinity();
      continue;
    }
    e = std::max(e, std::abs(double{got[i]} - want[i]) / std::max(1.0, std::abs(double{want[i]})));
  }
  return e;
}

}  // namespace grove::testing
