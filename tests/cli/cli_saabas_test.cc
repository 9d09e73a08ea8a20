// `grove explain --attribution saabas`: the Saabas attributions of the in-process Servable
// (printed %.9g), which its own tests check against their definition and XGBoost's
// approx_contribs; the combinations no operation computes are refused saying why.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/model/loader.h"
#include "core/servable/servable.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli/run_grove.h"
#include "tests/testing/random_forest.h"

namespace grove::testing {
namespace {

using ::testing::HasSubstr;

TEST(CliSaabasTest, ValuesAreTheServablesAndTheRefusalsSayWhy) {
  const std::string model =
      absl::StrCat(GROVE_SOURCE_DIR, "/tests/golden/xgb_multiclass3/model.json");
  absl::StatusOr<ForestPtr> f = LoadModelFile(model);
  ASSERT_TRUE(f.ok()) << f.status();
  const int F = (*f)->num_features;
  const std::vector<float> rows = MakeRandomRows(**f, 6, /*seed=*/31, /*nan_fraction=*/0.2);
  absl::StatusOr<ServablePtr> s = BuildServable(*f, nullptr, EngineOptions(), nullptr);
  ASSERT_TRUE(s.ok()) << s.status();
  const int64_t width = (*s)->Width(Operation::kSaabas, RunParams());
  std::vector<float> want(6 * width);
  ASSERT_TRUE((*s)->Run(Operation::kSaabas, RunParams(), MakeRowsView(rows.data(), 6, F),
                        MakeMatrixView(want.data(), 6, width), nullptr)
                  .ok());

  ScratchDir scratch;
  const std::string x = WriteRows(scratch, "x.csv", rows, F);
  const std::vector<double> got =
      RunGroveForCsv({"explain", "--model", model, "--input", x, "--output",
                      scratch.File("out.csv"), "--no-progress", "--attribution", "saabas"},
                     scratch, scratch.File("out.csv"))
          .values;
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(static_cast<float>(got[i]), want[i]) << i;  // %.9g round-trips a float
  }

  GroveRun inter = RunGrove({"explain", "--model", model, "--input", x, "--no-progress",
                             "--attribution", "saabas", "--interactions"},
                            scratch);
  EXPECT_NE(inter.exit_code, 0);
  EXPECT_THAT(inter.err, HasSubstr("no interaction values"));
  GroveRun bg = RunGrove({"explain", "--model", model, "--input", x, "--no-progress",
                          "--attribution", "saabas", "--background", x},
                         scratch);
  EXPECT_NE(bg.exit_code, 0);
  EXPECT_THAT(bg.err, HasSubstr("path-dependent only"));
}

}  // namespace
}  // namespace grove::testing
