// CPU reference TreeSHAP against the library corpus (/work/shared/testdata and tests/golden):
// contributions and interaction values within 1e-5 * max(1, |margin|); what the library refused
// (LightGBM linear trees) is refused too.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/model/loader.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"

namespace grove {
namespace {

using testing::CorpusCase;
using testing::CorpusCaseDirs;
using testing::LoadCorpusCase;

constexpr double kTolerance = 1e-5;

TEST(ExplainCorpusTest, EveryCaseMatchesTheLibrary) {
  const std::vector<std::string> dirs = CorpusCaseDirs();
  if (dirs.empty()) GTEST_SKIP() << "no corpus found (GROVE_SOURCE_DIR/../shared/testdata)";
  ThreadPool pool(2);
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    absl::StatusOr<CorpusCase> c = LoadCorpusCase(dir);
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<ForestPtr> f = LoadModelFile(c->model_path);
    ASSERT_TRUE(f.ok()) << f.status();
    const Forest& forest = **f;
    const RowsView rows = MakeRowsView(c->X.data(), c->rows, c->num_features);
    std::string line = c->name;

    if (c->unsupported.count("contribs")) {
      absl::Status s = CheckExplainable(forest);
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
      std::vector<float> out(ExplainWidth(forest, false));
      s = ExplainCpuReference(forest, MakeRowsView(c->X.data(), 1, c->num_features), {},
                              MakeMatrixView(out.data(), 1, ExplainWidth(forest, false)), &pool);
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
      line += " contribs refused: " + std::string(s.message());
    }
    if (c->contribs) {
      ASSERT_TRUE(c->margin.has_value());
      const int64_t width = ExplainWidth(forest, false);
      std::vector<float> out(c->rows * width);
      absl::Status s = ExplainCpuReference(forest, rows, {}, MakeMatrixView(out.data(), c->rows, width),
                                           &pool);
      ASSERT_TRUE(s.ok()) << s;
      const auto e = testing::MaxMarginRelError(absl::MakeConstSpan(out), *c->contribs, *c->margin,
                                                c->num_outputs);
      EXPECT_LE(e.max_error, kTolerance) << "contribs " << e.ToString();
      line += " contribs " + e.ToString();
    }
    if (c->interactions) {
      ASSERT_TRUE(c->margin.has_value());
      const int64_t n = c->interactions->rows;
      const int64_t width = ExplainWidth(forest, true);
      std::vector<float> out(n * width);
      ExplainOptions o;
      o.interactions = true;
      absl::Status s = ExplainCpuReference(forest, MakeRowsView(c->X.data(), n, c->num_features), o,
                                           MakeMatrixView(out.data(), n, width), &pool);
      ASSERT_TRUE(s.ok()) << s;
      const auto e = testing::MaxMarginRelError(absl::MakeConstSpan(out), *c->interactions,
                                                *c->margin, c->num_outputs);
      EXPECT_LE(e.max_error, kTolerance) << "interactions " << e.ToString();
      line += "; interactions " + e.ToString();
    }
    std::printf("%s\n", line.c_str());
  }
}

}  // namespace
}  // namespace grove
