// `grove predict` / `grove explain` on every corpus case (shared testdata when present + the
// in-repo golden corpus), against the outputs the libraries computed:
//   margins and predictions within 1e-5 * max(1, |ref|), leaf indices exactly,
//   contributions and interaction values within 1e-5 * max(1, |margin|) (XGBoost references, which
//   the library computes in float32: a few entries may instead be within 32 float32 ulps of the
//   reference value, see CompareExplanations in tests/testing/corpus.h);
// LightGBM cases: X.csv is read as doubles and converted to float rows that route like the doubles
//   (core/model/double_rows.h), as LightGBM used the doubles;
// cases with category names (meta.json "category_names": CatBoost one-hot features, whose X.csv
//   holds codes) read X_names.csv, the frame the library predicted as pandas.to_csv writes it,
//   with --header: the names are mapped by grove itself (a background stays X.csv's codes);
// outputs the library refused (meta.json "unsupported") must be refused by grove with a clear
// one-line error and a non-zero exit.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/io/csv.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli/run_grove.h"
#include "tests/testing/corpus.h"

namespace grove::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr double kTolerance = 1e-5;

class CliCorpusTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    absl::StatusOr<CorpusCase> c = LoadCorpusCase(GetParam());
    ASSERT_TRUE(c.ok()) << c.status();
    case_ = *std::move(c);
    if (case_.meta->contains("category_names")) {
      names_ = case_.dir + "/" + (*case_.meta)["category_names"]["file"].get<std::string>();
    }
  }

  // The rows grove reads: X.csv, or its category names file (with a header line).
  std::string X() const { return names_.empty() ? case_.dir + "/X.csv" : names_; }

  // Runs grove, expects success, returns the output CSV as a matrix.
  absl::StatusOr<CsvMatrix<double>> Run(std::vector<std::string> args,
                                        const std::string& input = "") {
    args.insert(args.end(), {"--input", input.empty() ? X() : input, "--output",
                             scratch_.File("out.csv"), "--no-progress"});
    if (!names_.empty()) args.push_back("--header");
    GroveRun run = RunGrove(args, scratch_);
    if (run.exit_code != 0) {
      return absl::InternalError(absl::StrCat("grove failed: ", Describe(run)));
    }
    if (names_.empty()) return ReadCsvDoubles(scratch_.File("out.csv"));
    // --header puts a header line on the output too: the numbers follow it.
    std::ifstream out(scratch_.File("out.csv"));
    std::string header;
    std::getline(out, header);
    std::ofstream(scratch_.File("values.csv")) << out.rdbuf();
    return ReadCsvDoubles(scratch_.File("values.csv"));
  }

  // The first n rows of X() (and its header line), byte for byte.
  std::string HeadOfX(int64_t n) { return HeadOf(X(), n + (names_.empty() ? 0 : 1), "head.csv"); }
  // The first n rows of X.csv (numbers: category codes), as a background is given.
  std::string HeadOfCodes(int64_t n) { return HeadOf(case_.dir + "/X.csv", n, "codes.csv"); }

  std::string HeadOf(const std::string& file, int64_t lines, const std::string& name) {
    std::ifstream in(file);
    std::ofstream out(scratch_.File(name));
    std::string line;
    for (int64_t i = 0; i < lines && std::getline(in, line); ++i) out << line << "\n";
    return scratch_.File(name);
  }

  void ExpectRefused(const std::vector<std::string>& extra, const std::string& what) {
    std::vector<std::string> args = {"explain", "--model", case_.model_path, "--input", X(),
                                     "--output", scratch_.File("refused.csv")};
    args.insert(args.end(), extra.begin(), extra.end());
    GroveRun run = RunGrove(args, scratch_);
    EXPECT_NE(run.exit_code, 0) << what << " should be refused, as the library does ("
                                << case_.unsupported.at(what) << ")";
    EXPECT_THAT(run.err, StartsWith("grove: error: "));
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_THAT(run.err, HasSubstr(case_.model_path));
    EXPECT_FALSE(std::filesystem::exists(scratch_.File("refused.csv")));
  }

  // XGBoost computes SHAP values in float32 (tests/testing/corpus.h: CompareExplanations);
  // LightGBM, CatBoost and shap in double.
  bool Float32Reference() const { return case_.float32_reference; }

  CorpusCase case_;
  std::string names_;  // the category names file, when the case has one
  ScratchDir scratch_;
};

TEST_P(CliCorpusTest, PredictMargin) {
  ASSERT_TRUE(case_.margin.has_value());
  for (const std::string& model : case_.model_paths) {  // JSON and UBJSON for XGBoost
    SCOPED_TRACE(model);
    auto got = Run({"predict", "--model", model, "--kind", "margin"});
    ASSERT_TRUE(got.ok()) << got.status();
    ErrorReport e = MaxRelError(absl::Span<const double>(got->values), *case_.margin);
    EXPECT_LE(e.max_error, kTolerance) << e.ToString();
  }
}

TEST_P(CliCorpusTest, PredictPrediction) {
  ASSERT_TRUE(case_.pred.has_value());
  auto got = Run({"predict", "--model", case_.model_path});  // --kind prediction is the default
  ASSERT_TRUE(got.ok()) << got.status();
  ErrorReport e = MaxRelError(absl::Span<const double>(got->values), *case_.pred);
  EXPECT_LE(e.max_error, kTolerance) << e.ToString();
}

TEST_P(CliCorpusTest, PredictLeaf) {
  ASSERT_TRUE(case_.leaf.has_value());
  for (const std::string& model : case_.model_paths) {
    SCOPED_TRACE(model);
    auto got = Run({"predict", "--model", model, "--kind", "leaf"});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->cols, case_.leaf->cols);
    EXPECT_EQ(CountMismatches(absl::Span<const double>(got->values), *case_.leaf), 0);
  }
}

TEST_P(CliCorpusTest, PredictIterationRange) {
  const nlohmann::json& outputs = case_.meta->at("outputs");
  if (!outputs.contains("margin_range")) GTEST_SKIP() << "no margin_range.csv reference";
  const nlohmann::json& spec = outputs["margin_range"];
  auto ref = ReadCsvDoubles(case_.dir + "/" + spec["file"].get<std::string>());
  ASSERT_TRUE(ref.ok()) << ref.status();
  const RefMatrix want{ref->values, ref->rows, ref->cols};
  auto got = Run({"predict", "--model", case_.model_path, "--kind", "margin", "--iteration-begin",
                  std::to_string(spec["iteration_begin"].get<int>()), "--iteration-end",
                  std::to_string(spec["iteration_end"].get<int>())});
  ASSERT_TRUE(got.ok()) << got.status();
  ErrorReport e = MaxRelError(absl::Span<const double>(got->values), want);
  EXPECT_LE(e.max_error, kTolerance) << e.ToString();
}

TEST_P(CliCorpusTest, ExplainContributions) {
  if (case_.unsupported.count("contribs")) {
    ExpectRefused({}, "contribs");
    return;
  }
  if (!case_.contribs.has_value()) GTEST_SKIP() << "no contribs.csv";
  auto got = Run({"explain", "--model", case_.model_path});
  ASSERT_TRUE(got.ok()) << got.status();
  const ExplainComparison e =
      CompareExplanations(absl::Span<const double>(got->values), *case_.contribs, *case_.margin,
                          case_.num_outputs, kTolerance, Float32Reference());
  EXPECT_TRUE(e.ok()) << e.ToString();
  std::printf("[ %s contribs ] %s\n", case_.name.c_str(), e.ToString().c_str());
}

TEST_P(CliCorpusTest, ExplainInteractions) {
  if (case_.unsupported.count("contribs")) {
    ExpectRefused({"--interactions"}, "contribs");
    return;
  }
  const int64_t F1 = case_.num_features + 1;
  const int K = case_.num_outputs;
  if (case_.interactions.has_value()) {
    auto got = Run({"explain", "--model", case_.model_path, "--interactions"},
                   HeadOfX(case_.interactions->rows));
    ASSERT_TRUE(got.ok()) << got.status();
    const ExplainComparison e =
        CompareExplanations(absl::Span<const double>(got->values), *case_.interactions,
                            *case_.margin, K, kTolerance, Float32Reference());
    EXPECT_TRUE(e.ok()) << e.ToString();
    std::printf("[ %s interactions ] %s\n", case_.name.c_str(), e.ToString().c_str());
    return;
  }
  // The library has no interaction API (LightGBM) or did not generate them (F > 30): check what
  // the library does give. Each row of an interaction matrix sums to the library's SHAP value and
  // the matrix sums to its margin.
  if (!case_.contribs.has_value()) GTEST_SKIP() << "no reference for interactions";
  if (K * F1 * F1 > 20000) GTEST_SKIP() << "interaction matrices too large for a quick test";
  const int64_t rows = std::min<int64_t>(case_.rows, 20);
  auto got = Run({"explain", "--model", case_.model_path, "--interactions"}, HeadOfX(rows));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->rows, rows);
  ASSERT_EQ(got->cols, K * F1 * F1);
  RefMatrix row_sums{std::vector<double>(rows * K * F1), rows, K * F1};
  std::vector<double> sums(rows * K * F1);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t i = 0; i < F1; ++i) {
        double s = 0;
        for (int64_t j = 0; j < F1; ++j) s += got->values[((r * K + k) * F1 + i) * F1 + j];
        sums[(r * K + k) * F1 + i] = s;
        row_sums.values[(r * K + k) * F1 + i] = case_.contribs->At(r, k * F1 + i);
      }
    }
  }
  ErrorReport e =
      MaxMarginRelError(absl::Span<const double>(sums), row_sums, *case_.margin, K);
  EXPECT_LE(e.max_error, kTolerance) << "interaction row sums vs the library's SHAP values: "
                                     << e.ToString();
}

// Interventional interaction values (`--background FILE --interactions`, the first 10 rows of
// X.csv as background): rows of each matrix sum to `--background` SHAP values of the same rows.
TEST_P(CliCorpusTest, ExplainInterventionalInteractions) {
  if (case_.unsupported.count("contribs")) {
    ExpectRefused({"--background", X(), "--interactions"}, "contribs");
    return;
  }
  const int64_t F1 = case_.num_features + 1;
  const int K = case_.num_outputs;
  if (K * F1 * F1 > 20000) GTEST_SKIP() << "interaction matrices too large for a quick test";
  const std::string background = scratch_.File("background.csv");
  std::filesystem::copy_file(HeadOfCodes(10), background);
  const int64_t rows = std::min<int64_t>(case_.rows, 6);
  const std::string input = HeadOfX(rows);
  auto values = Run({"explain", "--model", case_.model_path, "--background", background}, input);
  ASSERT_TRUE(values.ok()) << values.status();
  auto got = Run({"explain", "--model", case_.model_path, "--background", background,
                  "--interactions"}, input);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->cols, K * F1 * F1);
  std::vector<double> sums(rows * K * F1);
  for (int64_t block = 0; block < rows * K; ++block) {
    for (int64_t i = 0; i < F1; ++i) {
      double s = 0;
      for (int64_t j = 0; j < F1; ++j) s += got->values[(block * F1 + i) * F1 + j];
      sums[block * F1 + i] = s;
    }
  }
  RefMatrix want{values->values, rows, K * F1};
  ErrorReport e = MaxMarginRelError(absl::Span<const double>(sums), want, *case_.margin, K);
  EXPECT_LE(e.max_error, kTolerance) << e.ToString();
  // --strategy with --background names an interventional strategy; each gives the same values.
  for (const char* strategy : {"paths_cpu", "reference", "cpu"}) {
    auto forced = Run({"explain", "--model", case_.model_path, "--background", background,
                       "--strategy", strategy}, input);
    if (!forced.ok() && std::string(strategy) == "paths_cpu") {
      // The bitmask form refuses models with paths longer than its masks, and says so.
      EXPECT_THAT(std::string(forced.status().message()), HasSubstr("cannot serve this model"));
      continue;
    }
    ASSERT_TRUE(forced.ok()) << strategy << ": " << forced.status();
    ErrorReport f = MaxMarginRelError(absl::Span<const double>(forced->values), want,
                                      *case_.margin, K);
    EXPECT_LE(f.max_error, kTolerance) << strategy << ": " << f.ToString();
  }
  auto wrong = Run({"explain", "--model", case_.model_path, "--background", background,
                    "--strategy", "treeshap_cpu"}, input);
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(std::string(wrong.status().message()),
              ::testing::HasSubstr("interventional strategy 'treeshap_cpu'"));
}

// Self-contained (no shared corpus needed): LightGBM compares the float64 of a CSV field with its
// double thresholds; `grove` must route 1.325 left of the threshold 1.3250000000000002 (a LightGBM
// bin boundary: midpoint nudged up one ulp), although the float nearest 1.325 lies above it.
TEST(CliLightgbmRows, CsvValuesRouteAsLightgbmRoutesTheDoubles) {
  ScratchDir scratch;
  std::string model =
      "tree\nversion=v4\nnum_class=1\nnum_tree_per_iteration=1\nlabel_index=0\n"
      "max_feature_idx=0\nobjective=regression\nfeature_names=a\n\n";
  const char* thresholds[] = {"1.3250000000000002", "0.2800000000000001", "-1.8036999999999999"};
  for (int t = 0; t < 3; ++t) {
    model += absl::StrCat("Tree=", t, "\nnum_leaves=2\nnum_cat=0\nsplit_feature=0\nthreshold=",
                          thresholds[t],
                          "\ndecision_type=2\nleft_child=-1\nright_child=-2\nleaf_value=1 2\n"
                          "leaf_count=5 5\ninternal_count=10\nshrinkage=1\n\n");
  }
  model += "end of trees\n";
  {
    std::ofstream(scratch.File("model.txt")) << model;
    std::ofstream(scratch.File("x.csv")) << "1.325\n0.28\n-1.8037\n1.3250001\n0.2800001\n-1.8036\n";
  }
  GroveRun run = RunGrove({"predict", "--model", scratch.File("model.txt"), "--input",
                           scratch.File("x.csv"), "--kind", "leaf", "--output", "-",
                           "--no-progress"},
                          scratch);
  ASSERT_EQ(run.exit_code, 0) << Describe(run);
  // Leaf 0 = left (x <= t compared as doubles), one column per tree (t0 = 1.325+, t1 = 0.28+,
  // t2 = -1.8037).
  EXPECT_EQ(run.out,
            "0,1,1\n"    // 1.325 <= t0 (its nearest float is above t0)
            "0,0,1\n"    // 0.28 <= t1
            "0,0,0\n"    // -1.8037 == t2
            "1,1,1\n"    // 1.3250001 > t0
            "0,1,1\n"    // 0.2800001 > t1
            "0,0,1\n");  // -1.8036 > t2
}

std::string CaseName(const ::testing::TestParamInfo<std::string>& info) {
  std::string dir = info.param;
  std::string name = std::filesystem::path(dir).filename().string();
  if (dir.find("/tests/golden/") != std::string::npos) name = "golden_" + name;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Corpus, CliCorpusTest, ::testing::ValuesIn(CorpusCaseDirs()), CaseName);

}  // namespace
}  // namespace grove::testing
