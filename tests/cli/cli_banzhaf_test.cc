// `grove explain --attribution banzhaf`: path-dependent Banzhaf values and interaction values,
// and interventional ones with --background, against their definitions over every feature subset
// (tests/testing/coalition_games.h) on a golden model of 6 features.
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
#include "tests/testing/coalition_games.h"
#include "tests/testing/random_forest.h"

namespace grove::testing {
namespace {

class CliBanzhafTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = absl::StrCat(GROVE_SOURCE_DIR, "/tests/golden/xgb_regression/model.json");
    absl::StatusOr<ForestPtr> f = LoadModelFile(model_);
    ASSERT_TRUE(f.ok()) << f.status();
    forest_ = *f;
    rows_ = MakeRandomRows(*forest_, 5, /*seed=*/21, /*nan_fraction=*/0.2);
    background_ = MakeRandomRows(*forest_, 4, /*seed=*/22, /*nan_fraction=*/0.2);
  }

  // `grove explain` of rows_ with `extra`, as doubles.
  std::vector<double> Explain(std::vector<std::string> extra) {
    std::vector<std::string> args = {
        "explain", "--model", model_, "--input",
        WriteRows(scratch_, "x.csv", rows_, forest_->num_features), "--output",
        scratch_.File("out.csv"), "--no-progress"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunGroveForCsv(args, scratch_, scratch_.File("out.csv")).values;
  }

  std::string model_;
  ForestPtr forest_;
  std::vector<float> rows_, background_;
  ScratchDir scratch_;
};

TEST_F(CliBanzhafTest, PathDependentValuesAndInteractions) {
  const int F = forest_->num_features, K = forest_->num_outputs;
  std::vector<double> values, interactions;
  for (int r = 0; r < 5; ++r) {
    const std::vector<double> game = PathDependentGame(*forest_, rows_.data() + r * F);
    const std::vector<double> v = BanzhafOfGame(game, F, K);
    const std::vector<double> m = BanzhafInteractionsOfGame(game, F, K);
    values.insert(values.end(), v.begin(), v.end());
    interactions.insert(interactions.end(), m.begin(), m.end());
  }
  ExpectNearRelative(Explain({"--attribution", "banzhaf"}), values, "values");
  ExpectNearRelative(Explain({"--attribution", "banzhaf", "--interactions"}), interactions,
             "interactions");
}

TEST_F(CliBanzhafTest, InterventionalValues) {
  const int F = forest_->num_features, K = forest_->num_outputs;
  std::vector<double> values(5 * K * (F + 1), 0.0);
  for (int r = 0; r < 5; ++r) {
    for (int j = 0; j < 4; ++j) {
      const std::vector<double> v = BanzhafOfGame(
          PairGame(*forest_, rows_.data() + r * F, background_.data() + j * F,
                   OutputSpace::kMargin),
          F, K);
      for (size_t c = 0; c < v.size(); ++c) values[r * v.size() + c] += v[c] / 4;
    }
  }
  const std::string bg = WriteRows(scratch_, "bg.csv", background_, F);
  ExpectNearRelative(Explain({"--background", bg, "--attribution", "banzhaf"}), values, "interventional");
}

}  // namespace
}  // namespace grove::testing
