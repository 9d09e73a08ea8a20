// The categories a model file records (Forest::categories): XGBoost 3.1+ JSON and UBJSON
// (cats.enc: strings as UTF-8 bytes cut at offsets, numbers), LightGBM's pandas_categorical; files
// without them record none; malformed entries are refused naming the file; a feature records one
// kind of categories.
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_replace.h"
#include "core/model/forest.h"
#include "core/model/loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kData = std::string(GROVE_SOURCE_DIR) + "/tests/model/data/categories/";

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// city (strings, one not ASCII), x (numeric), size (integers), as make_categories.py trains them.
// `last_city` is what the file records of "orléans": XGBoost 3.2 cuts a string's UTF-8 bytes at
// its length in characters ("orléan"), and reads the file back so; LightGBM keeps it whole.
void ExpectTrainedCategories(const Forest& f, const std::string& last_city) {
  ASSERT_EQ(f.categories.size(), 3u);
  EXPECT_THAT(f.categories[0].strings, ElementsAre("paris", "brest", "lyon", last_city));
  EXPECT_TRUE(f.categories[0].numbers.empty());
  EXPECT_TRUE(f.categories[1].empty());
  EXPECT_THAT(f.categories[2].numbers, ElementsAre(3, 10, 42));
  EXPECT_TRUE(f.categories[2].strings.empty());
}

TEST(CategoriesTest, XgboostJsonAndUbjsonRecordTheirCategories) {
  for (const char* file : {"xgb.json", "xgb.ubj"}) {
    SCOPED_TRACE(file);
    absl::StatusOr<ForestPtr> f = LoadModelFile(kData + file);
    ASSERT_TRUE(f.ok()) << f.status();
    ExpectTrainedCategories(**f, "orl\xC3\xA9" "an");
  }
}

TEST(CategoriesTest, LightgbmPandasCategorical) {
  absl::StatusOr<ForestPtr> f = LoadModelFile(kData + "lgb.txt");
  ASSERT_TRUE(f.ok()) << f.status();
  ExpectTrainedCategories(**f, "orl\xC3\xA9" "ans");
}

TEST(CategoriesTest, ModelsTrainedWithoutADataFrameRecordNone) {
  for (const char* file : {"/tests/golden/xgb_categorical/model.json",
                           "/tests/golden/lgb_binary_nan/model.txt"}) {
    absl::StatusOr<ForestPtr> f = LoadModelFile(std::string(GROVE_SOURCE_DIR) + file);
    ASSERT_TRUE(f.ok()) << file << ": " << f.status();
    EXPECT_TRUE((*f)->categories.empty()) << file;
  }
  // pandas_categorical:null, or lists for columns given by name: nothing can be placed.
  const std::string lgb = Read(kData + "lgb.txt");
  const std::string null_lists = absl::StrReplaceAll(
      lgb, {{"pandas_categorical:[[", "pandas_categorical:null\nunused:[["}});
  absl::StatusOr<ForestPtr> f = LoadLightgbmText(null_lists, "null.txt");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->categories.empty());
  f = LoadLightgbmText(
      absl::StrReplaceAll(lgb, {{"[categorical_feature: 0,2]", "[categorical_feature: city,size]"}}),
      "named.txt");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->categories.empty());
}

TEST(CategoriesTest, MalformedEntriesAreRefusedNamingTheFile) {
  const std::string json = Read(kData + "xgb.json");
  struct Case {
    std::string from, to, message;
  } cases[] = {
      {"\"offsets\":[0,5,10,14,21]", "\"offsets\":[0,5,10,14,22]", "offsets must run"},
      {"\"offsets\":[0,5,10,14,21]", "\"offsets\":[0,10,5,14,21]", "offsets decrease"},
      // An offset past the values, followed by a smaller one: refused before any byte is read.
      {"\"offsets\":[0,5,10,14,21]", "\"offsets\":[0,5,900,14,21]", "offsets decrease"},
      {"\"values\":[112,", "\"values\":[912,", "is not a byte"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.to);
    const std::string bad = absl::StrReplaceAll(json, {{c.from, c.to}});
    ASSERT_NE(bad, json) << "the fixture no longer holds " << c.from;
    absl::StatusOr<ForestPtr> f = LoadXgboostJson(bad, "bad.json");
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(f.status().message(), HasSubstr("bad.json"));
    EXPECT_THAT(f.status().message(), HasSubstr(c.message));
  }
  const std::string lgb = Read(kData + "lgb.txt");
  absl::StatusOr<ForestPtr> f = LoadLightgbmText(
      absl::StrReplaceAll(lgb, {{"[3, 10, 42]", "[3, \"x\", 42]"}}), "mixed.txt");
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f.status().message(), HasSubstr("mixed.txt: pandas_categorical"));
}

TEST(CategoriesTest, AFeatureRecordsOneKindOfCategories) {
  // A forest whose feature records both names and hashes (no loader writes one) is refused: a
  // name would have two codes.
  absl::StatusOr<ForestPtr> loaded = LoadModelFile(kData + "xgb.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  Forest f = **loaded;
  ASSERT_FALSE(f.categories[0].strings.empty());
  f.categories[0].hashes = {1u, 2u};
  absl::StatusOr<ForestPtr> built = BuildForest(f);
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(built.status().message(), HasSubstr("of more than one kind"));
  f.categories[0].strings.clear();
  built = BuildForest(f);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_TRUE((*built)->categories[0].hashed());
  EXPECT_EQ((*built)->categories[0].size(), 2u);
}

}  // namespace
}  // namespace grove
