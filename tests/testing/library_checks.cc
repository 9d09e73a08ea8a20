#include "tests/testing/library_checks.h"

#include <gtest/gtest.h>

#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "tests/testing/predict_reference.h"

namespace grove::testing {

void ExpectCaseMatchesLibrary(const CorpusCase& c, const Forest& f, const std::vector<float>& rows,
                              ThreadPool* pool) {
  if (c.margin) {
    const std::vector<float> got = ReferencePrediction(f, rows, Kind(OutputKind::kMargin), pool);
    const ErrorReport e = MaxRelError(absl::Span<const float>(got), *c.margin);
    EXPECT_LE(e.max_error, kCorpusTolerance) << "margin " << e.ToString();
  }
  if (c.pred) {
    const std::vector<float> got =
        ReferencePrediction(f, rows, Kind(OutputKind::kPrediction), pool);
    const ErrorReport e = MaxRelError(absl::Span<const float>(got), *c.pred);
    EXPECT_LE(e.max_error, kCorpusTolerance) << "prediction " << e.ToString();
  }
  if (c.leaf) {
    const std::vector<float> got = ReferencePrediction(f, rows, Kind(OutputKind::kLeaf), pool);
    EXPECT_EQ(CountMismatches(absl::Span<const float>(got), *c.leaf), 0) << "leaf";
  }
  for (bool interactions : {false, true}) {
    const std::optional<RefMatrix>& ref = interactions ? c.interactions : c.contribs;
    if (!ref) continue;
    ASSERT_TRUE(c.margin.has_value());
    const int64_t width = ExplainWidth(f, interactions);
    ASSERT_EQ(width, ref->cols);
    std::vector<float> got(ref->rows * width);
    ExplainOptions options;
    options.interactions = interactions;
    const absl::Status s = ExplainCpuReference(
        f, MakeRowsView(rows.data(), ref->rows, c.num_features), options,
        MakeMatrixView(got.data(), ref->rows, width), pool);
    ASSERT_TRUE(s.ok()) << s;
    const ExplainComparison e =
        CompareExplanations(absl::Span<const float>(got), *ref, *c.margin, c.num_outputs,
                            kCorpusTolerance, c.float32_reference);
    EXPECT_TRUE(e.ok()) << (interactions ? "interactions " : "contribs ") << e.ToString();
  }
}

}  // namespace grove::testing
