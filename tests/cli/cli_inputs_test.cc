// What `grove` reads besides CSV numbers: category names in CSV cells (by the model's recorded
// categories, with and without --header; CatBoost's hashed one-hot categories), booleans as
// pandas.to_csv writes them, .npy arrays of every dtype numpy saves, Parquet files (the same rows
// as the same table's CSV); and `explain --top-k`.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli/run_grove.h"

namespace grove::testing {
namespace {

using ::testing::HasSubstr;

const std::string kCategories =
    std::string(GROVE_SOURCE_DIR) + "/tests/model/data/categories/";  // city, x, size
const std::string kDemo = std::string(GROVE_SOURCE_DIR) + "/examples/models/demo/1/model.json";

std::string Write(const ScratchDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.File(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

GroveRun Ok(const std::vector<std::string>& args, const ScratchDir& dir) {
  std::vector<std::string> all = args;
  all.push_back("--no-progress");
  GroveRun run = RunGrove(all, dir);
  EXPECT_EQ(run.exit_code, 0) << Describe(run);
  return run;
}

// A .npy file (format 1.0) of `values` (raw little-endian bytes) with numpy's header.
std::string Npy(const std::string& descr, const std::string& shape, const std::string& data) {
  std::string dict = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ",
                                  shape, ", }");
  while ((10 + dict.size() + 1) % 64 != 0) dict.push_back(' ');
  dict.push_back('\n');
  const uint16_t length = static_cast<uint16_t>(dict.size());
  std::string out("\x93NUMPY\x01\x00", 8);
  out.append(reinterpret_cast<const char*>(&length), 2);
  return out + dict + data;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

TEST(CliInputs, CategoryNamesGiveTheNumbersOfTheirCodes) {
  ScratchDir dir;
  // city's codes (paris=0 brest=1 lyon=2): a number that names no city is the code itself, as
  // files of codes were read before; size's categories are numbers (3, 10, 42), read by value.
  const std::string codes = Write(dir, "codes.csv", "2,0.5,10\n0,-1,42\n,2,3\n");
  const std::string names = Write(dir, "names.csv", "lyon,0.5,10\nparis,-1,42\n,2,3\n");
  const std::string header =
      Write(dir, "header.csv", "id,size,x,city\na,10,0.5,lyon\nb,42,-1,paris\nc,3.0,2,\n");
  for (const char* model : {"xgb.json", "lgb.txt"}) {
    SCOPED_TRACE(model);
    const std::string m = kCategories + model;
    const std::string want = Ok({"predict", "--model", m, "--input", codes}, dir).out;
    EXPECT_EQ(Ok({"predict", "--model", m, "--input", names}, dir).out, want);
    EXPECT_EQ(Ok({"predict", "--model", m, "--input", header, "--header"}, dir).out,
              "prediction\n" + want);
  }
  // An unknown category: an error naming the file, line, column and value for XGBoost (which
  // refuses it); missing for LightGBM.
  const std::string unknown = Write(dir, "unknown.csv", "city,x,size\ntokyo,0.5,10\n");
  GroveRun xgb = RunGrove({"predict", "--model", kCategories + "xgb.json", "--input", unknown,
                           "--header"}, dir);
  EXPECT_EQ(xgb.exit_code, 1);
  EXPECT_THAT(xgb.err, HasSubstr("unknown.csv:2: field 1 (column 'city'): feature 'city': "
                                 "'tokyo' is not one of the 4 categories"));
  const std::string missing = Write(dir, "missing.csv", "city,x,size\n,0.5,10\n");
  EXPECT_EQ(Ok({"predict", "--model", kCategories + "lgb.txt", "--input", unknown, "--header"},
               dir).out,
            Ok({"predict", "--model", kCategories + "lgb.txt", "--input", missing, "--header"},
               dir).out);
}

// CatBoost models with hashed categorical features (tests/golden/cb_onehot_regression: one-hot
// city, 12 strings of 0 to 130 bytes, and size, integers; cb_ctr_regression: CTRs of city and shop
// and one-hot grade): the CSV of the frame CatBoost predicted, columns reversed and an id added,
// gives CatBoost's predictions, unseen categories included. Every cell of those columns is a name,
// digits too (CatBoost hashes the integer 3 as "3").
TEST(CliInputs, CatboostCategoryNamesGiveCatboostsPredictions) {
  ScratchDir dir;
  for (const char* name : {"cb_onehot_regression", "cb_ctr_regression"}) {
    SCOPED_TRACE(name);
    const std::string golden = std::string(GROVE_SOURCE_DIR) + "/tests/golden/" + name + "/";
    std::ifstream names(golden + "X_names.csv");
    std::ifstream pred(golden + "pred.csv");
    std::string line;
    ASSERT_TRUE(std::getline(names, line));
    std::vector<std::string> header = absl::StrSplit(line, ',');
    ASSERT_EQ(header.size(), 5u);
    std::reverse(header.begin(), header.end());
    std::string csv = "id," + absl::StrJoin(header, ",") + "\n";
    std::vector<double> want;
    for (int r = 0; std::getline(names, line); ++r) {
      std::vector<std::string> cells = absl::StrSplit(line, ',');
      ASSERT_EQ(cells.size(), 5u) << line;
      std::reverse(cells.begin(), cells.end());
      absl::StrAppend(&csv, "row", r, ",", absl::StrJoin(cells, ","), "\n");
      std::string p;
      ASSERT_TRUE(std::getline(pred, p));
      want.push_back(std::stod(p));
    }
    ASSERT_EQ(want.size(), 100u);
    const std::string input = Write(dir, std::string(name) + ".csv", csv);
    const std::vector<std::string> got = absl::StrSplit(
        Ok({"predict", "--model", golden + "catboost.json", "--input", input, "--header"}, dir)
            .out,
        '\n', absl::SkipEmpty());
    ASSERT_EQ(got.size(), want.size() + 1);
    EXPECT_EQ(got[0], "prediction");
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(std::stod(got[i + 1]), want[i], 1e-5 * std::max(1.0, std::abs(want[i])))
          << "row " << i;
    }
  }
}

TEST(CliInputs, BooleansAsPandasWritesThem) {
  ScratchDir dir;
  const std::string words = Write(dir, "words.csv", "True,False,true,false,TRUE,FALSE,1.5,\n");
  const std::string numbers = Write(dir, "numbers.csv", "1,0,1,0,1,0,1.5,\n");
  EXPECT_EQ(Ok({"predict", "--model", kDemo, "--input", words}, dir).out,
            Ok({"predict", "--model", kDemo, "--input", numbers}, dir).out);
}

TEST(CliInputs, NpyArraysOfEveryDtypeAreRowsInOrder) {
  ScratchDir dir;
  const std::string csv = Write(dir, "rows.csv", "1,0,3,0,1,0,2,1\n0,1,0,2,1,1,0,3\n");
  const std::string want = Ok({"predict", "--model", kDemo, "--input", csv}, dir).out;
  const std::vector<double> f8 = {1, 0, 3, 0, 1, 0, 2, 1, 0, 1, 0, 2, 1, 1, 0, 3};
  const std::vector<float> f4(f8.begin(), f8.end());
  const std::vector<int64_t> i8(f8.begin(), f8.end());
  const std::vector<int32_t> i4(f8.begin(), f8.end());
  const std::vector<uint8_t> u1(f8.begin(), f8.end());
  const std::vector<uint16_t> u2(f8.begin(), f8.end());
  const std::vector<std::pair<std::string, std::string>> arrays = {
      {"<f8", Bytes(f8)}, {"<f4", Bytes(f4)}, {"<i8", Bytes(i8)},
      {"<i4", Bytes(i4)}, {"|u1", Bytes(u1)}, {"<u2", Bytes(u2)}};
  for (const auto& [descr, data] : arrays) {
    SCOPED_TRACE(descr);
    const std::string path = Write(dir, "rows.npy", Npy(descr, "(2, 8)", data));
    EXPECT_EQ(Ok({"predict", "--model", kDemo, "--input", path}, dir).out, want);
  }
  // A bool array, and a 1-D array as one row.
  const std::vector<uint8_t> flags = {1, 0, 1, 1, 0, 0, 1, 0};
  const std::string bools = Write(dir, "bools.npy", Npy("|b1", "(8,)", Bytes(flags)));
  const std::string bools_csv = Write(dir, "bools.csv", "1,0,1,1,0,0,1,0\n");
  EXPECT_EQ(Ok({"predict", "--model", kDemo, "--input", bools}, dir).out,
            Ok({"predict", "--model", kDemo, "--input", bools_csv}, dir).out);
  // The model takes 8 features.
  const std::string wide = Write(dir, "wide.npy", Npy("<f8", "(1, 16)", Bytes(f8)));
  GroveRun run = RunGrove({"predict", "--model", kDemo, "--input", wide}, dir);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("wide.npy: the array has shape (1, 16); the model takes rows of "
                                 "8 features: (rows, 8)"));
  run = RunGrove({"predict", "--model", kDemo, "--input", bools, "--header"}, dir);
  EXPECT_THAT(run.err, HasSubstr("a .npy array has no column names"));
}

const std::string kParquet = std::string(GROVE_SOURCE_DIR) + "/tests/common/data/parquet/";

// The files of scripts/make_parquet_corpus.py that have a CSV twin (the same table).
std::vector<std::string> ParquetStems(const std::string& prefix) {
  std::vector<std::string> stems;
  for (const char* codec : {"none", "snappy", "gzip", "zstd"}) {
    for (const char* rest : {"_dict_v1", "_dict_v2", "_plain_v1", "_plain_v2"}) {
      const std::string stem = kParquet + prefix + codec + rest;
      if (std::ifstream(stem + ".parquet").good()) stems.push_back(stem);
    }
  }
  return stems;
}

TEST(CliInputs, ParquetPredictsAndExplainsWhatTheSameTableAsCsvDoes) {
  ScratchDir dir;
  // Every type, nulls, codec, page version and dictionary or PLAIN pages, with the demo model's
  // features in another order, an id kept, a TIMESTAMP and a DECIMAL column unused.
  const std::vector<std::string> types = ParquetStems("types_");
  ASSERT_EQ(types.size(), 8u);
  for (const std::string& stem : types) {
    SCOPED_TRACE(stem);
    for (const char* command : {"predict", "explain"}) {
      const std::string want = Ok({command, "--model", kDemo, "--input", stem + ".csv",
                                   "--header", "--keep", "id"}, dir).out;
      EXPECT_EQ(Ok({command, "--model", kDemo, "--input", stem + ".parquet", "--header",
                    "--keep", "id"}, dir).out,
                want);
    }
  }
  // Category names with nulls, an XGBoost (float rows) and a LightGBM (double rows) model.
  const std::vector<std::string> cats = ParquetStems("cats_");
  ASSERT_EQ(cats.size(), 4u);
  for (const std::string& stem : cats) {
    for (const char* model : {"xgb.json", "lgb.txt"}) {
      SCOPED_TRACE(stem + " " + model);
      const std::string m = kCategories + model;
      // Without --header: no header line out (the columns are matched by name all the same).
      EXPECT_EQ("prediction\n" + Ok({"predict", "--model", m, "--input", stem + ".parquet"},
                                     dir).out,
                Ok({"predict", "--model", m, "--input", stem + ".csv", "--header"}, dir).out);
    }
  }
  // The content decides, whatever the name.
  const std::string renamed = dir.File("rows.dat");
  std::ifstream in(cats[0] + ".parquet", std::ios::binary);
  std::ofstream(renamed, std::ios::binary) << in.rdbuf();
  EXPECT_EQ(Ok({"predict", "--model", kCategories + "xgb.json", "--input", renamed, "--header"},
               dir).out,
            Ok({"predict", "--model", kCategories + "xgb.json", "--input", cats[0] + ".csv",
                "--header"}, dir).out);
}

TEST(CliInputs, ParquetRefusalsNameTheFileAndColumn) {
  ScratchDir dir;
  struct Case {
    std::string input;
    std::string message;
  };
  const Case cases[] = {
      {kParquet + "refused_decimal.parquet",
       "refused_decimal.parquet: column 'f2' is DECIMAL (convert it to FLOAT or DOUBLE)"},
      {kParquet + "refused_nested.parquet", "column 'f3' is a nested column"},
      {kParquet + "refused_lz4.parquet", "row group 0: page 0: compression LZ4_RAW is not supported"},
      {Write(dir, "short.parquet", "PAR1"), "short.parquet: not a Parquet file"},
  };
  for (const Case& c : cases) {
    GroveRun run = RunGrove({"predict", "--model", kDemo, "--input", c.input, "--no-progress"},
                            dir);
    EXPECT_EQ(run.exit_code, 1) << c.input;
    EXPECT_THAT(run.err, HasSubstr(c.message));
  }
  GroveRun missing = RunGrove({"predict", "--model", kDemo, "--input",
                               kParquet + "cats_none_dict_v1.parquet", "--no-progress"}, dir);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("lacks 8 of the model's 8 features: 'f0'"));
}

std::vector<std::vector<double>> Table(const std::string& text) {
  std::vector<std::vector<double>> rows;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<double> row;
    for (absl::string_view f : absl::StrSplit(line, ',')) {
      row.push_back(std::strtod(std::string(f).c_str(), nullptr));
    }
    rows.push_back(row);
  }
  return rows;
}

TEST(CliInputs, TopKIsTheLargestAbsoluteShapValuesOfEachRowAndOutput) {
  ScratchDir dir;
  const std::string model = std::string(GROVE_SOURCE_DIR) + "/tests/golden/xgb_multiclass3/model.json";
  const std::string rows = std::string(GROVE_SOURCE_DIR) + "/tests/golden/xgb_multiclass3/X.csv";
  const auto full = Table(Ok({"explain", "--model", model, "--input", rows}, dir).out);
  GroveRun top = Ok({"explain", "--model", model, "--input", rows, "--top-k", "2",
                     "--output-header"}, dir);
  const std::string header = top.out.substr(0, top.out.find('\n'));
  EXPECT_EQ(header.substr(0, 58),
            "out0.top1_feature,out0.top1_value,out0.top2_feature,out0.t");
  const auto ranked = Table(top.out.substr(top.out.find('\n') + 1));
  ASSERT_EQ(ranked.size(), full.size());
  const int outputs = 3;
  const int f1 = static_cast<int>(full[0].size()) / outputs;  // F + 1
  for (size_t r = 0; r < full.size(); ++r) {
    ASSERT_EQ(ranked[r].size(), static_cast<size_t>(outputs * 4));
    for (int o = 0; o < outputs; ++o) {
      const double* v = full[r].data() + o * f1;
      const double* got = ranked[r].data() + o * 4;
      const int first = static_cast<int>(got[0]), second = static_cast<int>(got[2]);
      EXPECT_EQ(got[1], v[first]);
      EXPECT_EQ(got[3], v[second]);
      EXPECT_GE(std::fabs(got[1]), std::fabs(got[3]));
      for (int f = 0; f < f1 - 1; ++f) {  // no other feature outranks the second (bias excluded)
        if (f != first && f != second) EXPECT_LE(std::fabs(v[f]), std::fabs(got[3]));
      }
    }
  }
  GroveRun both = RunGrove({"explain", "--model", model, "--input", rows, "--top-k", "2",
                            "--interactions"}, dir);
  EXPECT_EQ(both.exit_code, 2) << Describe(both);
  EXPECT_THAT(both.err, HasSubstr("--top-k ranks SHAP values"));
}

}  // namespace
}  // namespace grove::testing
