// CPU reference predictor against the library corpus (/work/shared/testdata and tests/golden):
// margin and prediction within 1e-5 * max(1, |ref|), leaf indices exact, for every model file of
// every case (XGBoost JSON and UBJSON, LightGBM text).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "core/common/thread_pool.h"
#include "core/model/loader.h"
#include "core/predict/predict.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"

namespace grove {
namespace {

using testing::CorpusCase;
using testing::CorpusCaseDirs;
using testing::LoadCorpusCase;

constexpr double kTolerance = 1e-5;

std::vector<float> Run(const Forest& f, const CorpusCase& c, OutputKind kind, ThreadPool* pool) {
  PredictOptions o;
  o.kind = kind;
  const int64_t width = PredictWidth(f, o);
  std::vector<float> out(c.rows * width);
  absl::Status s = PredictCpu(f, MakeRowsView(c.X.data(), c.rows, c.num_features), o,
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
      if (c->margin) {
        const auto e = testing::MaxRelError(absl::MakeConstSpan(Run(**f, *c, OutputKind::kMargin, &pool)),
                                            *c->margin);
        EXPECT_LE(e.max_error, kTolerance) << "margin " << e.ToString();
        line += " margin " + e.ToString();
      }
      if (c->pred) {
        const auto e = testing::MaxRelError(
            absl::MakeConstSpan(Run(**f, *c, OutputKind::kPrediction, &pool)), *c->pred);
        EXPECT_LE(e.max_error, kTolerance) << "pred " << e.ToString();
        line += "; pred " + e.ToString();
      }
      if (c->leaf) {
        const std::vector<float> leaf = Run(**f, *c, OutputKind::kLeaf, &pool);
        const int64_t bad = testing::CountMismatches(absl::MakeConstSpan(leaf), *c->leaf);
        EXPECT_EQ(bad, 0) << "leaf mismatches";
        line += "; leaf mismatches " + std::to_string(bad);
      }
      std::printf("%s\n", line.c_str());
    }
  }
}

}  // namespace
}  // namespace grove
