// `grove --header`, `--keep` and `--output-header`: columns matched by name give the numbers of the
// header-less input, and the output's header names the model's features.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli/run_grove.h"

namespace grove::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kGolden = std::string(GROVE_SOURCE_DIR) + "/tests/golden";
// Five features named Column_0 .. Column_4, four classes.
const std::string kModel = kGolden + "/lgb_multiclass4/model.txt";
const std::string kRows = kGolden + "/lgb_multiclass4/X.csv";

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// kRows with a header, the columns in the order `order` (indices into the model's features), an
// `id` column of text first and a `label` column last.
std::string WithHeader(const std::vector<int>& order) {
  std::vector<std::string> header = {"id"};
  for (int c : order) header.push_back("Column_" + std::to_string(c));
  header.push_back("label");
  std::string out = absl::StrJoin(header, ",") + "\n";
  int row = 0;
  for (const std::string& line : Lines(ReadWholeFile(kRows))) {
    std::vector<std::string> fields = absl::StrSplit(line, ',');
    std::vector<std::string> reordered = {"row-" + std::to_string(row)};
    for (int c : order) reordered.push_back(fields[c]);
    reordered.push_back(std::to_string(row++ % 4));
    out += absl::StrJoin(reordered, ",") + "\n";
  }
  return out;
}

class CliHeaderTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = scratch_.File(name);
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  ScratchDir scratch_;
};

TEST_F(CliHeaderTest, ReorderedColumnsAndALabelGiveTheSameNumbers) {
  const std::string with_header = Write("h.csv", WithHeader({3, 0, 4, 2, 1}));
  for (const std::string& command : {"predict", "explain"}) {
    SCOPED_TRACE(command);
    GroveRun plain = RunGrove({command, "--model", kModel, "--input", kRows}, scratch_);
    ASSERT_EQ(plain.exit_code, 0) << Describe(plain);
    GroveRun named = RunGrove({command, "--model", kModel, "--input", with_header, "--header"},
                              scratch_);
    ASSERT_EQ(named.exit_code, 0) << Describe(named);
    std::vector<std::string> lines = Lines(named.out);
    ASSERT_FALSE(lines.empty());
    lines.erase(lines.begin());  // the output header
    EXPECT_EQ(lines, Lines(plain.out));
  }
}

TEST_F(CliHeaderTest, OutputHeadersNameOutputsAndFeatures) {
  const std::string input = Write("h.csv", WithHeader({0, 1, 2, 3, 4}));
  GroveRun pred = RunGrove({"predict", "--model", kModel, "--input", input, "--header"}, scratch_);
  ASSERT_EQ(pred.exit_code, 0) << Describe(pred);
  EXPECT_EQ(Lines(pred.out)[0], "prediction_0,prediction_1,prediction_2,prediction_3");
  GroveRun margin = RunGrove({"predict", "--model", kModel, "--input", kRows, "--kind", "margin",
                              "--output-header"},
                             scratch_);
  ASSERT_EQ(margin.exit_code, 0) << Describe(margin);
  EXPECT_EQ(Lines(margin.out)[0], "margin_0,margin_1,margin_2,margin_3");
  GroveRun shap = RunGrove({"explain", "--model", kModel, "--input", input, "--header"}, scratch_);
  ASSERT_EQ(shap.exit_code, 0) << Describe(shap);
  const std::vector<std::string> names = absl::StrSplit(Lines(shap.out)[0], ',');
  ASSERT_EQ(names.size(), 4u * 6u);
  EXPECT_THAT(std::vector<std::string>(names.begin(), names.begin() + 6),
              ElementsAre("out0.Column_0", "out0.Column_1", "out0.Column_2", "out0.Column_3",
                          "out0.Column_4", "out0.bias"));
  EXPECT_EQ(names.back(), "out3.bias");
  GroveRun inter = RunGrove(
      {"explain", "--model", kModel, "--input", input, "--header", "--interactions"}, scratch_);
  ASSERT_EQ(inter.exit_code, 0) << Describe(inter);
  const std::vector<std::string> pairs = absl::StrSplit(Lines(inter.out)[0], ',');
  ASSERT_EQ(pairs.size(), 4u * 36u);
  EXPECT_EQ(pairs[1], "out0.Column_0*Column_1");
  EXPECT_EQ(pairs.back(), "out3.bias*bias");
}

TEST_F(CliHeaderTest, KeptColumnsComeFirstAsWritten) {
  const std::string input = Write("h.csv", WithHeader({4, 3, 2, 1, 0}));
  GroveRun plain = RunGrove({"predict", "--model", kModel, "--input", kRows}, scratch_);
  ASSERT_EQ(plain.exit_code, 0) << Describe(plain);
  GroveRun kept = RunGrove(
      {"predict", "--model", kModel, "--input", input, "--header", "--keep", "id,label"},
      scratch_);
  ASSERT_EQ(kept.exit_code, 0) << Describe(kept);
  const std::vector<std::string> lines = Lines(kept.out);
  const std::vector<std::string> expected = Lines(plain.out);
  ASSERT_EQ(lines.size(), expected.size() + 1);
  EXPECT_EQ(lines[0], "id,label,prediction_0,prediction_1,prediction_2,prediction_3");
  for (size_t r = 0; r < expected.size(); ++r) {
    EXPECT_EQ(lines[r + 1], "row-" + std::to_string(r) + "," + std::to_string(r % 4) + "," +
                                expected[r]);
  }
}

TEST_F(CliHeaderTest, HeaderErrorsNameTheColumn) {
  struct Case {
    std::string text;
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {"Column_0,Column_1,Column_2,Column_3\n1,2,3,4\n", {}, "lacks 1 of the model's 5 features"},
      {"Column_0,Column_1,Column_2,Column_3,Column_4,Column_0\n", {}, "already named"},
      {"Column_0,Column_1,Column_2,Column_3,Column_4\n1,2,x,4,5\n", {}, "column 'Column_2'"},
      {"Column_0,Column_1,Column_2,Column_3,Column_4\n1,2,3,4,5\n", {"--keep", "id"},
       "--keep column 'id' is not in the header"},
      {"Column_0,Column_1,Column_2,Column_3,Column_4\n1,2,3,4\n", {}, "expected 5 fields"},
      {"", {}, "empty input"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    const std::string input = Write("bad.csv", c.text);
    std::vector<std::string> args = {"predict", "--model", kModel, "--input", input, "--header"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    GroveRun run = RunGrove(args, scratch_);
    EXPECT_EQ(run.exit_code, 1) << Describe(run);
    EXPECT_THAT(run.err, HasSubstr(c.message));
    EXPECT_THAT(run.err, HasSubstr("bad.csv"));
  }
  GroveRun usage = RunGrove({"predict", "--model", kModel, "--input", kRows, "--keep", "id"},
                            scratch_);
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_THAT(usage.err, HasSubstr("--keep needs --header"));
}

TEST_F(CliHeaderTest, InspectListsFeatureNamesAndTypes) {
  GroveRun json = RunGrove({"inspect", "--model", kModel, "--json"}, scratch_);
  ASSERT_EQ(json.exit_code, 0) << Describe(json);
  nlohmann::json j = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json.out;
  EXPECT_EQ(j["feature_names"],
            nlohmann::json({"Column_0", "Column_1", "Column_2", "Column_3", "Column_4"}));
  EXPECT_TRUE(j["feature_types"].is_array());
  GroveRun text = RunGrove({"inspect", "--model", kModel}, scratch_);
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  EXPECT_THAT(text.out, HasSubstr("Column_0, Column_1, Column_2, Column_3, Column_4"));
}

}  // namespace
}  // namespace grove::testing
