// `grove explain --groups FILE`: values of feature groups, path-dependent and interventional,
// against their definition over every coalition of groups (tests/testing/coalition_games.h) on a
// golden model of 6 features; the output header names the groups; a bad file is refused naming it.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/io/csv.h"
#include "core/model/feature_groups.h"
#include "core/model/loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli/run_grove.h"
#include "tests/testing/coalition_games.h"
#include "tests/testing/naive_predict.h"
#include "tests/testing/random_forest.h"

namespace grove::testing {
namespace {

constexpr const char* kGroups = R"({"pair": [0, 3], "triple": [1, 4, 5]})";

class CliGroupsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = absl::StrCat(GROVE_SOURCE_DIR, "/tests/golden/xgb_regression/model.json");
    absl::StatusOr<ForestPtr> f = LoadModelFile(model_);
    ASSERT_TRUE(f.ok()) << f.status();
    forest_ = *f;
    ASSERT_EQ(forest_->num_features, 6);
    rows_ = MakeRandomRows(*forest_, 5, /*seed=*/31, /*nan_fraction=*/0.2);
    background_ = MakeRandomRows(*forest_, 4, /*seed=*/32, /*nan_fraction=*/0.2);
    absl::StatusOr<std::vector<GroupSpec>> spec = ParseFeatureGroupsJson(kGroups, "test");
    ASSERT_TRUE(spec.ok());
    absl::StatusOr<FeatureGroupsPtr> groups =
        ResolveFeatureGroups(*spec, 6, forest_->feature_names);
    ASSERT_TRUE(groups.ok()) << groups.status();
    groups_ = *groups;
    std::ofstream(scratch_.File("groups.json")) << kGroups;
  }

  std::string Write(const std::string& name, const std::vector<float>& rows) {
    return WriteRows(scratch_, name, rows, 6);
  }

  // `grove explain --groups` of rows_ with `extra`, as doubles.
  std::vector<double> Explain(std::vector<std::string> extra) {
    std::vector<std::string> args = {"explain", "--model", model_, "--input",
                                     Write("x.csv", rows_), "--output", scratch_.File("out.csv"),
                                     "--groups", scratch_.File("groups.json"), "--no-progress"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunGroveForCsv(args, scratch_, scratch_.File("out.csv")).values;
  }

  std::string model_;
  ForestPtr forest_;
  FeatureGroupsPtr groups_;
  std::vector<float> rows_, background_;
  ScratchDir scratch_;
};

TEST_F(CliGroupsTest, PathDependentValuesAndInteractions) {
  const int G = groups_->num_groups(), K = forest_->num_outputs;
  ASSERT_EQ(G, 3);  // by smallest member: pair (0), triple (1), feature 2 (its own)
  std::vector<double> values, interactions;
  for (int r = 0; r < 5; ++r) {
    const std::vector<double> game =
        GroupedGame(PathDependentGame(*forest_, rows_.data() + r * 6), K, *groups_);
    const std::vector<double> v = ShapleyOfGame(game, G, K);
    const std::vector<double> m = ShapleyInteractionsOfGame(game, G, K);
    values.insert(values.end(), v.begin(), v.end());
    interactions.insert(interactions.end(), m.begin(), m.end());
  }
  ExpectNearRelative(Explain({}), values, "values");
  ExpectNearRelative(Explain({"--interactions"}), interactions, "interactions");
}

// --residuals and --top-k over groups: each row's block is its G groups and the bias, so the
// residual sums those G + 1 columns against the model's margin, and the top k are among the G.
TEST_F(CliGroupsTest, ResidualsAndTopKCountTheGroups) {
  const int G = groups_->num_groups();
  ASSERT_EQ(forest_->num_outputs, 1);
  const std::vector<double> checked = Explain({"--residuals"});
  ASSERT_EQ(checked.size(), static_cast<size_t>(5 * (G + 2)));
  for (int r = 0; r < 5; ++r) {
    double margin = 0;
    NaiveMargins(*forest_, rows_.data() + r * 6, &margin);
    const double* row = checked.data() + r * (G + 2);
    double sum = 0;
    for (int c = 0; c <= G; ++c) sum += row[c];
    EXPECT_NEAR(row[G + 1], sum - margin, 1e-5 * std::max(1.0, std::abs(margin))) << "row " << r;
  }
  const std::vector<double> top = Explain({"--top-k", "5"});  // more than the 3 groups
  ASSERT_EQ(top.size(), static_cast<size_t>(5 * 2 * G));
  for (size_t i = 0; i < top.size(); i += 2) {
    EXPECT_GE(top[i], 0);
    EXPECT_LT(top[i], G) << "a top-k column names a group by its index";
  }
}

TEST_F(CliGroupsTest, InterventionalValuesOverTheBackground) {
  const int G = groups_->num_groups(), K = forest_->num_outputs;
  std::vector<double> want;
  for (int r = 0; r < 5; ++r) {
    std::vector<double> game;
    for (int j = 0; j < 4; ++j) {
      const std::vector<double> pair = GroupedGame(
          PairGame(*forest_, rows_.data() + r * 6, background_.data() + j * 6,
                   OutputSpace::kMargin),
          K, *groups_);
      game.resize(pair.size(), 0.0);
      for (size_t c = 0; c < pair.size(); ++c) game[c] += pair[c] / 4;
    }
    const std::vector<double> v = ShapleyOfGame(game, G, K);
    want.insert(want.end(), v.begin(), v.end());
  }
  ExpectNearRelative(Explain({"--background", Write("bg.csv", background_)}), want, "interventional");
}

TEST_F(CliGroupsTest, HeaderNamesTheGroupsAndBadFilesAreNamed) {
  GroveRun named = RunGrove({"explain", "--model", model_, "--input", Write("x.csv", rows_),
                             "--groups", scratch_.File("groups.json"), "--output-header",
                             "--no-progress"},
                            scratch_);
  ASSERT_EQ(named.exit_code, 0) << named.err;
  const std::string& text = named.out;
  EXPECT_EQ(text.substr(0, text.find('\n')),
            absl::StrCat("pair,triple,", groups_->names[2], ",bias"));
  std::ofstream(scratch_.File("bad.json")) << R"({"pair": [0, 3], "other": [3]})";
  GroveRun run = RunGrove({"explain", "--model", model_, "--input", Write("x.csv", rows_),
                           "--groups", scratch_.File("bad.json"), "--no-progress"},
                          scratch_);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, ::testing::HasSubstr("bad.json: feature 3"));
}

}  // namespace
}  // namespace grove::testing
