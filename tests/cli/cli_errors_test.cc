// `grove` error paths, usage, streaming and inspect. References are the libraries' outputs in the
// golden corpus (tests/golden), never Grove's own output.
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/io/csv.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli/run_grove.h"
#include "tests/testing/corpus.h"

namespace grove::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kGolden = std::string(GROVE_SOURCE_DIR) + "/tests/golden";

CorpusCase Golden(const std::string& name) {
  absl::StatusOr<CorpusCase> c = LoadCorpusCase(kGolden + "/" + name);
  EXPECT_TRUE(c.ok()) << c.status() << " (run scripts/make_golden_corpus.py)";
  return c.ok() ? *std::move(c) : CorpusCase();
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A one-line error, "grove: error: ...", mentioning every string in `names`.
void ExpectOneLineError(const GroveRun& run, const std::vector<std::string>& names) {
  EXPECT_NE(run.exit_code, 0);
  EXPECT_THAT(run.err, StartsWith("grove: error: "));
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  for (const std::string& n : names) EXPECT_THAT(run.err, HasSubstr(n));
}

class CliTest : public ::testing::Test {
 protected:
  ScratchDir scratch_;
};

TEST_F(CliTest, HelpAndVersion) {
  GroveRun run = RunGrove({"--help"}, scratch_);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, HasSubstr("Usage: grove COMMAND"));
  EXPECT_THAT(run.out, HasSubstr("predict"));
  run = RunGrove({}, scratch_);  // no command: the usage on stderr, as a usage error
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("Usage: grove COMMAND"));
  run = RunGrove({"predict", "--help"}, scratch_);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, HasSubstr("--iteration-begin"));
  run = RunGrove({"help", "explain"}, scratch_);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, HasSubstr("--interactions"));
  run = RunGrove({"version"}, scratch_);
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, StartsWith("grove 0."));
}

TEST_F(CliTest, UsageErrorsExitWithTwo) {
  const std::string m = kGolden + "/xgb_regression/model.json";
  const std::string x = kGolden + "/xgb_regression/X.csv";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{"predict", "--input", x}, "needs --model"},
      {{"predict", "--model", m}, "needs --input"},
      {{"predict", "--model", m, "--input", x, "--kind", "probability"}, "--kind"},
      {{"predict", "--model", m, "--input", x, "--interactions"}, "unknown option '--interactions'"},
      {{"explain", "--model", m, "--input", x, "--kind", "leaf"}, "unknown option '--kind'"},
      {{"predict", "--model", m, "--input", x, "--threads", "two"}, "not an integer"},
      {{"predict", "--model", m, "--input", x, "--iteration-begin", "5", "--iteration-end", "3"},
       "must be greater"},
      {{"predict", "--model", m, "--input"}, "--input needs a value"},
      {{"predict", "--model", m, "--model", m, "--input", x}, "given twice"},
      {{"predict", "stray", "--model", m, "--input", x}, "unexpected argument 'stray'"},
  };
  for (const Case& c : cases) {
    GroveRun run = RunGrove(c.args, scratch_);
    EXPECT_EQ(run.exit_code, 2) << c.message << ": " << Describe(run);
    EXPECT_THAT(run.err, HasSubstr(c.message));
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_TRUE(run.out.empty());
  }
}

TEST_F(CliTest, MissingModelFile) {
  const std::string model = scratch_.File("no_such_model.json");
  GroveRun run = RunGrove({"predict", "--model", model, "--input",
                           kGolden + "/xgb_regression/X.csv"},
                          scratch_);
  ExpectOneLineError(run, {model});
  run = RunGrove({"inspect", "--model", model}, scratch_);
  ExpectOneLineError(run, {model});
}

TEST_F(CliTest, MissingInputFile) {
  const std::string input = scratch_.File("no_such_rows.csv");
  for (const char* cmd : {"predict", "explain"}) {
    GroveRun run = RunGrove(
        {cmd, "--model", kGolden + "/xgb_regression/model.json", "--input", input}, scratch_);
    ExpectOneLineError(run, {input});
  }
}

TEST_F(CliTest, WrongColumnCountNamesFileAndLine) {
  const CorpusCase c = Golden("xgb_regression");  // 6 features
  const std::string input = scratch_.File("rows.csv");
  WriteText(input, "1,2,3,4,5,6\n1,2,3,4,5,6\n1,2,3,4,5\n");
  for (const char* cmd : {"predict", "explain"}) {
    GroveRun run = RunGrove({cmd, "--model", c.model_path, "--input", input}, scratch_);
    ExpectOneLineError(run, {input + ":3", "expected 6 fields, found 5"});
  }
  WriteText(input, "1,2,3,4,5,6,7\n");
  GroveRun run = RunGrove({"predict", "--model", c.model_path, "--input", input}, scratch_);
  ExpectOneLineError(run, {input + ":1", "expected 6 fields, found 7"});
}

TEST_F(CliTest, TextInANumberFieldNamesFileAndLine) {
  const CorpusCase c = Golden("lgb_binary_nan");  // 6 features
  const std::string input = scratch_.File("rows.csv");
  WriteText(input, "1,2,3,4,5,6\nnan,,3,4,5,6\n1,2,three,4,5,6\n");
  for (const char* cmd : {"predict", "explain"}) {
    GroveRun run = RunGrove({cmd, "--model", c.model_path, "--input", input}, scratch_);
    ExpectOneLineError(run, {input + ":3", "field 3", "three"});
  }
}

TEST_F(CliTest, ErrorRemovesThePartialOutput) {
  const CorpusCase c = Golden("xgb_regression");
  // Many good rows first, so that several chunks are written before the bad line.
  std::string text;
  std::ifstream in(c.dir + "/X.csv");
  std::string xs((std::istreambuf_iterator<char>(in)), {});
  for (int i = 0; i < 50; ++i) text += xs;
  text += "1,2,3\n";
  const std::string input = scratch_.File("rows.csv");
  WriteText(input, text);
  const std::string output = scratch_.File("out.csv");
  GroveRun run = RunGrove({"predict", "--model", c.model_path, "--input", input, "--output", output,
                           "--chunk-rows", "64"},
                          scratch_);
  ExpectOneLineError(run, {input + ":" + std::to_string(50 * c.rows + 1)});
  EXPECT_FALSE(std::filesystem::exists(output));
}

TEST_F(CliTest, UnwritableOutputNamesIt) {
  const CorpusCase c = Golden("xgb_regression");
  const std::string output = scratch_.File("no/such/dir/out.csv");
  GroveRun run = RunGrove({"predict", "--model", c.model_path, "--input", c.dir + "/X.csv",
                           "--output", output},
                          scratch_);
  ExpectOneLineError(run, {output});
}

TEST_F(CliTest, RefusedModels) {
  // gblinear: XGBoost serves it, Grove does not (no trees).
  const std::string gblinear = kGolden + "/refused/xgb_gblinear.json";
  ASSERT_TRUE(std::filesystem::exists(gblinear));
  for (const char* cmd : {"predict", "explain"}) {
    GroveRun run = RunGrove({cmd, "--model", gblinear, "--input", kGolden + "/xgb_regression/X.csv"},
                            scratch_);
    ExpectOneLineError(run, {gblinear});
  }
  GroveRun run = RunGrove({"inspect", "--model", gblinear}, scratch_);
  ExpectOneLineError(run, {gblinear});

  // Not a model at all, and a truncated model.
  const std::string junk = scratch_.File("junk.json");
  WriteText(junk, "this is not a model\n");
  run = RunGrove({"predict", "--model", junk, "--input", kGolden + "/xgb_regression/X.csv"},
                 scratch_);
  ExpectOneLineError(run, {junk});
  const std::string truncated = scratch_.File("truncated.json");
  const std::string full = ReadWholeFile(kGolden + "/xgb_regression/model.json");
  WriteText(truncated, full.substr(0, full.size() / 2));
  run = RunGrove({"predict", "--model", truncated, "--input", kGolden + "/xgb_regression/X.csv"},
                 scratch_);
  ExpectOneLineError(run, {truncated});
}

TEST_F(CliTest, IterationRangeBeyondTheModelIsRefused) {
  const CorpusCase c = Golden("xgb_regression");  // 12 rounds
  GroveRun run = RunGrove({"predict", "--model", c.model_path, "--input", c.dir + "/X.csv",
                           "--iteration-begin", "50"},
                          scratch_);
  ExpectOneLineError(run, {});
}

// Many chunks, standard input and output, one thread: still the library's margins, row for row.
TEST_F(CliTest, StreamsLargeInputsInChunks) {
  const CorpusCase c = Golden("xgb_multiclass3");
  ASSERT_TRUE(c.margin.has_value());
  std::ifstream in(c.dir + "/X.csv");
  const std::string xs((std::istreambuf_iterator<char>(in)), {});
  const int kCopies = 300;
  std::string text;
  for (int i = 0; i < kCopies; ++i) text += xs;
  const std::string input = scratch_.File("big.csv");
  WriteText(input, text);
  RefMatrix want{{}, c.rows * kCopies, c.margin->cols};
  for (int i = 0; i < kCopies; ++i) {
    want.values.insert(want.values.end(), c.margin->values.begin(), c.margin->values.end());
  }
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--input", input, "--chunk-rows", "997", "--threads", "1"},
        std::vector<std::string>{"--input", "-", "--threads", "2"}}) {
    std::vector<std::string> args = {"predict", "--model", c.model_path, "--kind", "margin"};
    args.insert(args.end(), extra.begin(), extra.end());
    GroveRun run = RunGrove(args, scratch_, input);
    ASSERT_EQ(run.exit_code, 0) << Describe(run);
    std::vector<double> got;
    int64_t cols = 0;
    ASSERT_TRUE(ParseCsvDoubles(run.out, "stdout", &cols, &got).ok());
    ErrorReport e = MaxRelError(absl::Span<const double>(got), want);
    EXPECT_LE(e.max_error, 1e-5) << e.ToString();
  }
}

TEST_F(CliTest, EmptyInputGivesEmptyOutput) {
  const CorpusCase c = Golden("xgb_regression");
  const std::string input = scratch_.File("empty.csv");
  WriteText(input, "");
  const std::string output = scratch_.File("out.csv");
  GroveRun run = RunGrove({"explain", "--model", c.model_path, "--input", input, "--output", output},
                          scratch_);
  EXPECT_EQ(run.exit_code, 0) << Describe(run);
  EXPECT_TRUE(std::filesystem::exists(output));
  EXPECT_EQ(ReadWholeFile(output), "");
}

TEST_F(CliTest, InspectMatchesTheLibrarysModelStatistics) {
  for (const std::string& name : {"xgb_multiclass3", "xgb_dart", "lgb_multiclass4",
                                  "lgb_linear_tree"}) {
    SCOPED_TRACE(name);
    const CorpusCase c = Golden(name);
    for (const std::string& model : c.model_paths) {
      GroveRun run = RunGrove({"inspect", "--model", model, "--json"}, scratch_);
      ASSERT_EQ(run.exit_code, 0) << Describe(run);
      nlohmann::json j = nlohmann::json::parse(run.out, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << run.out;
      const nlohmann::json& meta = *c.meta;
      EXPECT_EQ(j["trees"].get<int64_t>(), meta["num_trees"].get<int64_t>());
      EXPECT_EQ(j["leaves"].get<int64_t>(), meta["num_leaves_total"].get<int64_t>());
      EXPECT_EQ(j["features"].get<int>(), c.num_features);
      EXPECT_EQ(j["outputs"].get<int>(), c.num_outputs);
      EXPECT_EQ(j["iterations"].get<int>(), meta["num_boost_round"].get<int>());
      EXPECT_EQ(j["file_bytes"].get<int64_t>(),
                static_cast<int64_t>(std::filesystem::file_size(model)));
      EXPECT_GE(j["load_seconds"].get<double>(), 0.0);
      EXPECT_GT(j["memory_bytes"].get<int64_t>(), 0);
      EXPECT_EQ(j["linear_leaves"].get<bool>(), name == "lgb_linear_tree");  // a JSON boolean
      EXPECT_TRUE(j["categorical_splits"].is_boolean());
    }
    GroveRun text = RunGrove({"inspect", "--model", c.model_path}, scratch_);
    ASSERT_EQ(text.exit_code, 0) << Describe(text);
    EXPECT_THAT(text.out, HasSubstr("trees"));
    EXPECT_THAT(text.out, HasSubstr("objective"));
  }
}

}  // namespace
}  // namespace grove::testing
