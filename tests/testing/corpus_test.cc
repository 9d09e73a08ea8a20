#include "tests/testing/corpus.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"

namespace grove::testing {
namespace {

TEST(Corpus, FindsTheGoldenCases) {
  const std::vector<std::string> golden = GoldenCaseDirs();
  EXPECT_GE(golden.size(), 10u) << "tests/golden is missing: run scripts/make_golden_corpus.py";
  const std::vector<std::string> all = CorpusCaseDirs();
  EXPECT_GE(all.size(), golden.size() + SharedCaseDirs().size());
  if (std::filesystem::exists(std::string(GROVE_SOURCE_DIR) + "/../shared/testdata/real")) {
    bool has_real = false;
    for (const auto& d : all) has_real |= d.find("/real/") != std::string::npos;
    EXPECT_TRUE(has_real);
  }
}

// Every case loads, its shapes agree with meta.json, and the library's own outputs are consistent
// (contribution blocks sum to the margin): this checks the reader, not Grove's engines.
TEST(Corpus, EveryCaseLoadsConsistently) {
  for (const std::string& dir : CorpusCaseDirs()) {
    SCOPED_TRACE(dir);
    absl::StatusOr<CorpusCase> c = LoadCorpusCase(dir);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_FALSE(c->name.empty());
    EXPECT_TRUE(c->library == "xgboost" || c->library == "lightgbm" || c->library == "catboost" ||
                c->library == "treelite")
        << c->library;
    EXPECT_TRUE(std::filesystem::exists(c->model_path));
    ASSERT_GT(c->rows, 0);
    EXPECT_EQ(static_cast<int64_t>(c->X.size()), c->rows * c->num_features);
    ASSERT_TRUE(c->margin.has_value());
    EXPECT_EQ(c->margin->rows, c->rows);
    EXPECT_EQ(c->margin->cols, c->num_outputs);
    EXPECT_EQ(c->meta->at("num_features").get<int>(), c->num_features);
    if (c->contribs.has_value()) {
      const int64_t block = c->num_features + 1;
      ASSERT_EQ(c->contribs->cols, c->num_outputs * block);
      for (int64_t r = 0; r < c->rows; ++r) {
        for (int k = 0; k < c->num_outputs; ++k) {
          double sum = 0;
          for (int64_t j = 0; j < block; ++j) sum += c->contribs->At(r, k * block + j);
          const double m = c->margin->At(r, k);
          ASSERT_NEAR(sum, m, 1e-4 * std::max(1.0, std::abs(m))) << "row " << r;
        }
      }
    } else {
      EXPECT_TRUE(c->unsupported.count("contribs") || c->meta->at("not_generated").contains("contribs"));
    }
    if (c->interactions.has_value()) {
      EXPECT_EQ(c->interactions->rows, c->n_interaction_rows);
      EXPECT_EQ(c->interactions->cols,
                int64_t{c->num_outputs} * (c->num_features + 1) * (c->num_features + 1));
    }
  }
}

TEST(Corpus, MissingCaseIsAnError) {
  EXPECT_FALSE(LoadCorpusCase("/nonexistent/case").ok());
}

TEST(ErrorHelpers, RelativeToReferenceAndToMargin) {
  RefMatrix ref{{0.5, 100.0, -2.0, 0.0}, 2, 2};
  std::vector<float> got = {0.5f, 101.0f, -2.0f, 0.0f};
  ErrorReport e = MaxRelError(absl::Span<const float>(got), ref);
  EXPECT_NEAR(e.max_error, 0.01, 1e-12);
  EXPECT_EQ(e.row, 0);
  EXPECT_EQ(e.col, 1);

  got = {0.5f, 100.0f, -2.0f, 0.001f};  // |ref| < 1: absolute error
  e = MaxRelError(absl::Span<const float>(got), ref);
  EXPECT_NEAR(e.max_error, 0.001, 1e-9);
  EXPECT_EQ(e.row, 1);
  EXPECT_EQ(e.col, 1);

  // Two outputs, blocks of one column: row 1 block 1 is scaled by |margin| = 10.
  RefMatrix margin{{1.0, 1.0, 1.0, 10.0}, 2, 2};
  got = {0.5f, 100.0f, -2.0f, 0.5f};
  e = MaxMarginRelError(absl::Span<const float>(got), ref, margin, 2);
  EXPECT_NEAR(e.max_error, 0.05, 1e-12);  // row 1 col 1: |0.5 - 0| / 10
  EXPECT_EQ(e.row, 1);
  EXPECT_EQ(e.col, 1);
  ref.values[1] = 99.0;
  e = MaxMarginRelError(absl::Span<const float>(got), ref, margin, 2);
  EXPECT_NEAR(e.max_error, 1.0, 1e-12);
  EXPECT_EQ(e.row, 0);

  std::vector<double> nan_got = {0.5, 99.0, std::nan(""), 0.0};
  e = MaxRelError(absl::Span<const double>(nan_got), ref);
  EXPECT_TRUE(std::isinf(e.max_error));
  EXPECT_EQ(CountMismatches(absl::Span<const double>(nan_got), ref), 1);
  std::vector<double> short_got = {1.0};
  EXPECT_TRUE(std::isinf(MaxRelError(absl::Span<const double>(short_got), ref).max_error));
}

}  // namespace
}  // namespace grove::testing
