// CPU reference TreeSHAP against the library corpus (/work/shared/testdata and tests/golden):
// contributions and interaction values, and what the library refused (LightGBM linear trees) is
// refused too.
//
// Tolerance: the brief's measure, |got - ref| <= 1e-5 * max(1, |margin|), with the float32
// allowance of CompareExplanations (tests/testing/corpus.h) for XGBoost references, which the
// library computes in float32.
//
// Rows: X.csv's doubles through DoubleRowConverter (testing::GroveRows), so that LightGBM models
// route every value as LightGBM routed the double -- at every split, which TreeSHAP visits all of.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/io/csv.h"
#include "core/model/loader.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"

namespace grove {
namespace {

using testing::CorpusCase;
using testing::CorpusCaseDirs;
using testing::CorpusModel;
using testing::LoadCorpusModel;
using testing::RefMatrix;

constexpr double kTolerance = 1e-5;

TEST(ExplainCorpusTest, EveryCaseMatchesTheLibrary) {
  const std::vector<std::string> dirs = CorpusCaseDirs();
  if (dirs.empty()) GTEST_SKIP() << "no corpus found (GROVE_SOURCE_DIR/../shared/testdata)";
  ThreadPool pool(2);
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    absl::StatusOr<CorpusModel> m = LoadCorpusModel(dir);
    ASSERT_TRUE(m.ok()) << m.status();
    const CorpusCase& c = m->c;
    const ForestPtr& f = m->forest;
    const Forest& forest = *f;
    const std::vector<float> rows = testing::GroveRows(c, forest);
    std::string line = c.name;

    if (c.unsupported.count("contribs")) {
      absl::Status s = CheckExplainable(forest);
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
      const int64_t width = ExplainWidth(forest, false);
      std::vector<float> out(width);
      s = ExplainCpuReference(forest, MakeRowsView(rows.data(), 1, c.num_features), {},
                              MakeMatrixView(out.data(), 1, width), &pool);
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
      line += " contribs refused: " + std::string(s.message());
    }
    for (bool interactions : {false, true}) {
      const std::optional<RefMatrix>& ref = interactions ? c.interactions : c.contribs;
      if (!ref) continue;
      ASSERT_TRUE(c.margin.has_value());
      const int64_t n = ref->rows;
      const int64_t width = ExplainWidth(forest, interactions);
      ASSERT_EQ(width, ref->cols);
      std::vector<float> out(n * width);
      ExplainOptions o;
      o.interactions = interactions;
      absl::Status s = ExplainCpuReference(forest, MakeRowsView(rows.data(), n, c.num_features),
                                           o, MakeMatrixView(out.data(), n, width), &pool);
      ASSERT_TRUE(s.ok()) << s;
      const testing::ExplainComparison e =
          testing::CompareExplanations(absl::Span<const float>(out), *ref, *c.margin,
                                       c.num_outputs, kTolerance, c.float32_reference);
      const char* name = interactions ? "interactions" : "contribs";
      EXPECT_TRUE(e.ok()) << name << " " << e.ToString();
      line += absl::StrCat("; ", name, " ", e.ToString());
    }
    std::printf("%s\n", line.c_str());
  }
}

}  // namespace
}  // namespace grove
