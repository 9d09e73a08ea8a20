// CPU reference predictor against the library corpus (/work/shared/testdata and tests/golden):
// margin and prediction within 1e-5 * max(1, |ref|), leaf indices exact, for every model file of
// every case (XGBoost JSON and UBJSON, LightGBM text).
//
// float32 rows: Grove takes float32 rows (as XGBoost does internally), while the LightGBM references
// were computed from the float64 values of X.csv. The rows are X.csv's doubles through
// DoubleRowConverter (testing::GroveRows, as `grove` reads CSV), which picks for every value the
// float on the double's side of every LightGBM threshold: no row is excluded.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "core/common/thread_pool.h"
#include "core/io/csv.h"
#include "core/model/loader.h"
#include "core/predict/predict.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"

namespace grove {
namespace {

using testing::CorpusCase;
using testing::CorpusCaseDirs;
using testing::LoadCorpusCase;
using testing::RefMatrix;

constexpr double kTolerance = 1e-5;

std::vector<float> RunPredict(const Forest& f, const CorpusCase& c, OutputKind kind,
                              ThreadPool* pool) {
  const std::vector<float> rows = testing::GroveRows(c, f);
  PredictOptions o;
  o.kind = kind;
  const int64_t width = PredictWidth(f, o);
  std::vector<float> out(c.rows * width);
  absl::Status s = PredictCpu(f, MakeRowsView(rows.data(), c.rows, c.num_features), o,
                              MakeMatrixView(out.data(), c.rows, width), pool);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(PredictCorpusTest, EveryCaseMatchesTheLibrary) {
  const std::vector<std::string> dirs = CorpusCaseDirs();
  if (dirs.empty()) GTEST_SKIP() << "no corpus found (GROVE_SOURCE_DIR/../shared/testdata)";
  ThreadPool pool(2);
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    absl::StatusOr<CorpusCase> c = LoadCorpusCase(dir);
    ASSERT_TRUE(c.ok()) << c.status();
    for (const std::string& path : c->model_paths) {
      SCOPED_TRACE(path);
      absl::StatusOr<ForestPtr> f = LoadModelFile(path);
      ASSERT_TRUE(f.ok()) << f.status();
      std::string line = c->name + " [" + path.substr(path.rfind('/') + 1) + "]";
      const std::pair<const char*, OutputKind> outputs[] = {{"margin", OutputKind::kMargin},
                                                             {"pred", OutputKind::kPrediction},
                                                             {"leaf", OutputKind::kLeaf}};
      for (const auto& [name, kind] : outputs) {
        const std::optional<RefMatrix>& ref = kind == OutputKind::kMargin       ? c->margin
                                              : kind == OutputKind::kPrediction ? c->pred
                                                                                : c->leaf;
        if (!ref) continue;
        RefMatrix want = *ref;
        std::vector<float> got = RunPredict(**f, *c, kind, &pool);
        ASSERT_EQ(static_cast<int64_t>(got.size()), want.rows * want.cols) << name;
        if (kind == OutputKind::kLeaf) {
          const int64_t bad = testing::CountMismatches(absl::MakeConstSpan(got), want);
          EXPECT_EQ(bad, 0) << "leaf mismatches";
          line += "; leaf mismatches " + std::to_string(bad);
        } else {
          const auto e = testing::MaxRelError(absl::MakeConstSpan(got), want);
          EXPECT_LE(e.max_error, kTolerance) << name << " " << e.ToString();
          line += std::string("; ") + name + " " + e.ToString();
        }
      }
      std::printf("%s\n", line.c_str());
    }
  }
}

}  // namespace
}  // namespace grove
