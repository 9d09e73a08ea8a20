// Background files (core/servable/background.h): CSV and .npy, the bounds and their messages.
#include "core/servable/background.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/model/double_rows.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A version 1.0 .npy file of float64 values.
std::string NpyF8(const std::string& shape, const std::vector<double>& v, bool fortran = false) {
  std::string header = absl::StrCat("{'descr': '<f8', 'fortran_order': ",
                                    fortran ? "True" : "False", ", 'shape': ", shape, ", }");
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(header.size() & 255);
  out += static_cast<char>(header.size() >> 8);
  return out + header +
         std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
}

absl::Status ParseError(const std::string& bytes, const std::string& source, int features = 2) {
  return ParseBackgroundValues(bytes, source, features).status();
}

TEST(Background, CsvAndNpyGiveTheSameValues) {
  absl::StatusOr<BackgroundValues> csv = ParseBackgroundValues("1,2\n3,nan\n\n", "bg.csv", 2);
  ASSERT_TRUE(csv.ok()) << csv.status();
  absl::StatusOr<BackgroundValues> npy =
      ParseBackgroundValues(NpyF8("(2, 2)", {1, 3, 2, NAN}, true), "bg.npy", 2);
  ASSERT_TRUE(npy.ok()) << npy.status();
  for (const BackgroundValues* b : {&*csv, &*npy}) {
    EXPECT_EQ(b->rows, 2);
    EXPECT_EQ(b->cols, 2);
    ASSERT_EQ(b->values.size(), 4u);
    EXPECT_EQ(b->values[0], 1);
    EXPECT_EQ(b->values[1], 2);
    EXPECT_EQ(b->values[2], 3);
    EXPECT_TRUE(std::isnan(b->values[3]));
  }
}

TEST(Background, BoundsAndValuesAreChecked) {
  EXPECT_THAT(ParseError("", "bg.csv").message(),
              HasSubstr("bg.csv: holds 0 rows; a background holds 1 to 10000 rows"));
  std::string many;
  for (int i = 0; i <= kMaxBackgroundRows; ++i) many += "1,2\n";
  EXPECT_THAT(ParseError(many, "bg.csv").message(), HasSubstr("holds 10001 rows"));
  EXPECT_THAT(ParseError("1,2\n3\n", "bg.csv").message(), HasSubstr("bg.csv:2"));
  EXPECT_THAT(ParseError("1,2\n3,inf\n", "bg.csv").message(),
              HasSubstr("bg.csv: row 2, column 2 is inf; background values are finite or NaN"));
  EXPECT_THAT(ParseError(NpyF8("(2,)", {1, 2}), "bg.npy").message(),
              HasSubstr("bg.npy: shape (2,); a background is 2-D: (rows, 2)"));
  EXPECT_THAT(ParseError(NpyF8("(1, 3)", {1, 2, 3}), "bg.npy").message(),
              HasSubstr("shape (1, 3); a background is 2-D: (rows, 2)"));
  EXPECT_THAT(ParseError(NpyF8("(0, 2)", {}), "bg.npy").message(), HasSubstr("holds 0 rows"));
  EXPECT_THAT(ParseError(NpyF8("(10001, 2)", {}), "bg.npy").message(),
              HasSubstr("more than 20000 values"));
  EXPECT_THAT(ParseError(NpyF8("(1, 2)", {-INFINITY, 0}), "bg.npy").message(),
              HasSubstr("row 1, column 1 is -inf"));
  for (const std::string& name : {"bg.csv", "bg.npy"}) {
    EXPECT_EQ(ParseError("1,2\n3,inf\n", name).code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(Background, LoadConvertsDoublesAsRequestRows) {
  ForestPtr f = MakeRandomForest(RandomForestOptions{.num_trees = 3, .num_features = 2});
  const std::string path = (std::filesystem::path(::testing::TempDir()) /
                            absl::StrCat(::getpid(), "_background.csv"))
                               .string();
  std::ofstream(path) << "0.1,1.325\n,7\n";
  absl::StatusOr<Background> bg = LoadBackgroundFile(*f, path);
  ASSERT_TRUE(bg.ok()) << bg.status();
  EXPECT_EQ(bg->path, path);
  EXPECT_EQ(bg->rows, 2);
  EXPECT_EQ(bg->view().cols, 2);
  const double in[] = {0.1, 1.325, NAN, 7};
  float want[4];
  DoubleRowConverter(*f).ConvertRows(in, 2, want);
  EXPECT_EQ(std::memcmp(bg->values.data(), want, sizeof(want)), 0);
  std::filesystem::remove(path);
  EXPECT_EQ(LoadBackgroundFile(*f, path).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace grove
