// `grove explain --residuals`: K more columns, each the row's values and bias summed in double
// minus the model's output in the explained space, recomputed here from the same output's values
// and `grove predict`; path-dependent, interventional (margin and probability), interaction
// values, and a multi-output model.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/io/csv.h"
#include "core/model/loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli/run_grove.h"
#include "tests/testing/random_forest.h"

namespace grove::testing {
namespace {

class CliResidualsTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    model_ = absl::StrCat(GROVE_SOURCE_DIR, "/tests/golden/", GetParam(), "/model.json");
    absl::StatusOr<ForestPtr> f = LoadModelFile(model_);
    ASSERT_TRUE(f.ok()) << f.status();
    forest_ = *f;
    const int F = forest_->num_features;
    rows_ = WriteRows(scratch_, "x.csv", MakeRandomRows(*forest_, 7, 31), F);
    background_ = WriteRows(scratch_, "bg.csv", MakeRandomRows(*forest_, 5, 32), F);
  }

  // `grove` with `args` (--output to a file), the CSV it wrote.
  CsvMatrix<double> Run(std::vector<std::string> args) {
    args.insert(args.end(), {"--model", model_, "--input", rows_, "--output",
                             scratch_.File("out.csv"), "--no-progress"});
    return RunGroveForCsv(args, scratch_, scratch_.File("out.csv"));
  }

  // Explains with `extra` and --residuals; checks the K last columns against the sum of the
  // output's other columns minus `grove predict --kind kind`. Returns the largest |residual|.
  double ExpectResiduals(std::vector<std::string> extra, const char* kind, bool interactions) {
    const int K = forest_->num_outputs;
    const int64_t f1 = forest_->num_features + 1;
    const int64_t block = interactions ? f1 * f1 : f1;
    extra.insert(extra.begin(), "explain");
    const CsvMatrix<double> plain = Run(extra);
    extra.push_back("--residuals");
    const CsvMatrix<double> got = Run(extra);
    const CsvMatrix<double> output = Run({"predict", "--kind", kind});
    const std::string what = absl::StrCat(GetParam(), " ", kind, interactions ? " interactions" : "");
    EXPECT_EQ(got.cols, K * block + K) << what;
    EXPECT_EQ(output.cols, K) << what;
    EXPECT_EQ(got.rows, 7) << what;
    double largest = 0;
    for (int64_t r = 0; r < got.rows && got.cols == K * block + K; ++r) {
      for (int k = 0; k < K; ++k) {
        double sum = 0;
        for (int64_t c = 0; c < block; ++c) {
          const double v = got.values[r * got.cols + k * block + c];
          // The values are those of the call without --residuals.
          EXPECT_EQ(v, plain.values[r * plain.cols + k * block + c]) << what;
          sum += static_cast<float>(v);
        }
        const double want = sum - static_cast<float>(output.values[r * K + k]);
        const double residual = got.values[r * got.cols + K * block + k];
        EXPECT_NEAR(residual, want, 1e-6 * std::max(1.0, std::abs(want))) << what << " row " << r;
        largest = std::max(largest, std::abs(residual));
      }
    }
    return largest;
  }

  std::string model_, rows_, background_;
  ForestPtr forest_;
  ScratchDir scratch_;
};

TEST_P(CliResidualsTest, MatchARecomputation) {
  EXPECT_LT(ExpectResiduals({}, "margin", false), 1e-4);
  EXPECT_LT(ExpectResiduals({"--interactions"}, "margin", true), 1e-4);
  EXPECT_LT(ExpectResiduals({"--background", background_}, "margin", false), 1e-4);
  EXPECT_LT(ExpectResiduals({"--background", background_, "--interactions"}, "margin", true),
            1e-4);
  if (forest_->objective.link != Link::kIdentity) {
    EXPECT_LT(ExpectResiduals({"--background", background_, "--output-space", "probability"},
                              "prediction", false),
              1e-5);
  }
  // Banzhaf values are not additive: the residuals say so.
  EXPECT_GT(ExpectResiduals({"--attribution", "banzhaf"}, "margin", false), 1e-4);
}

TEST_P(CliResidualsTest, HeaderNamesTheResidualColumns) {
  GroveRun run = RunGrove({"explain", "--model", model_, "--input", rows_, "--output-header",
                           "--residuals", "--no-progress"},
                          scratch_);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string header = run.out.substr(0, run.out.find('\n'));
  if (forest_->num_outputs == 1) {
    EXPECT_THAT(header, ::testing::EndsWith(",bias,residual"));
  } else {
    EXPECT_THAT(header, ::testing::EndsWith(
                            absl::StrCat(",out", forest_->num_outputs - 1, ".residual")));
    EXPECT_THAT(header, ::testing::HasSubstr(",out0.residual,"));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CliResidualsTest,
                         ::testing::Values("xgb_regression", "xgb_binary_nan", "xgb_multiclass3"));

TEST(CliResidualsArgs, OnlyForExplain) {
  ScratchDir scratch;
  GroveRun run = RunGrove({"predict", "--model", "m.json", "--input", "x.csv", "--residuals"},
                          scratch);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, ::testing::HasSubstr("--residuals"));
}

}  // namespace
}  // namespace grove::testing
