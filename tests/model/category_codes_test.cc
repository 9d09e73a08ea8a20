// CategoryCodes (core/model/category_codes.h): names to codes by the recorded categories, the
// empty string as missing, number categories by value, each library's rule for an unknown name,
// hashed categories (CatBoost one-hot) and the bound on a name's length.
#include "core/model/category_codes.h"

#include <cmath>
#include <string>
#include <vector>

#include "core/model/catboost_hash.h"
#include "core/model/loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

using ::testing::HasSubstr;

const std::string kData = std::string(GROVE_SOURCE_DIR) + "/tests/model/data/categories/";

ForestPtr Load(const char* file) {
  absl::StatusOr<ForestPtr> f = LoadModelFile(kData + file);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? *f : nullptr;
}

TEST(CategoryCodesTest, NamesAreTheirPositionInTheRecordedCategories) {
  ForestPtr f = Load("xgb.json");
  ASSERT_NE(f, nullptr);
  absl::StatusOr<CategoryCodes> city = CategoryCodesFor(*f, 0);
  ASSERT_TRUE(city.ok()) << city.status();
  EXPECT_EQ(city->feature(), "city");
  EXPECT_EQ(*city->Code("paris"), 0.0f);
  EXPECT_EQ(*city->Code("lyon"), 2.0f);
  EXPECT_EQ(*city->Code("brest"), 1.0f);
  EXPECT_TRUE(std::isnan(*city->Code("")));
  EXPECT_EQ(city->Find("Paris"), -1);  // exact bytes, as pandas compares
}

TEST(CategoryCodesTest, NumberCategoriesAreLookedUpByValue) {
  ForestPtr f = Load("lgb.txt");
  ASSERT_NE(f, nullptr);
  absl::StatusOr<CategoryCodes> size = CategoryCodesFor(*f, 2);  // categories 3, 10, 42
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size->Code("10"), 1.0f);
  EXPECT_EQ(*size->Code("10.0"), 1.0f);
  EXPECT_EQ(*size->Code("+42"), 2.0f);
  EXPECT_EQ(size->Find("1e1"), 1);
  EXPECT_EQ(size->Find("ten"), -1);
}

TEST(CategoryCodesTest, XgboostRefusesAnUnknownCategory) {
  ForestPtr f = Load("xgb.ubj");
  ASSERT_NE(f, nullptr);
  absl::StatusOr<CategoryCodes> city = CategoryCodesFor(*f, 0);
  ASSERT_TRUE(city.ok()) << city.status();
  EXPECT_EQ(city->unknown(), UnknownCategory::kError);
  absl::StatusOr<float> code = city->Code("tokyo");
  EXPECT_EQ(code.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(code.status().message(), HasSubstr("feature 'city': 'tokyo' is not one of the 4"));
  std::vector<absl::string_view> names = {"lyon", "", "tokyo"};
  std::vector<float> out(6);
  absl::Status s = city->CodeColumn(names, out.data(), 2);
  EXPECT_THAT(s.message(), HasSubstr("row 2: feature 'city'"));
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_TRUE(std::isnan(out[2]));
}

TEST(CategoryCodesTest, LightgbmMakesAnUnknownCategoryMissing) {
  ForestPtr f = Load("lgb.txt");
  ASSERT_NE(f, nullptr);
  absl::StatusOr<CategoryCodes> city = CategoryCodesFor(*f, 0);
  ASSERT_TRUE(city.ok()) << city.status();
  EXPECT_EQ(city->unknown(), UnknownCategory::kMissing);
  EXPECT_TRUE(std::isnan(*city->Code("tokyo")));
  std::vector<absl::string_view> names = {"tokyo", "orl\xC3\xA9" "ans", "paris"};
  std::vector<float> out(3);
  ASSERT_TRUE(city->CodeColumn(names, out.data(), 1).ok());
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], 3.0f);
  EXPECT_EQ(out[2], 0.0f);
}

TEST(CategoryCodesTest, ANameBeyondTheBoundIsRefusedWhateverTheRule) {
  ForestPtr f = Load("lgb.txt");
  ASSERT_NE(f, nullptr);
  absl::StatusOr<CategoryCodes> city = CategoryCodesFor(*f, 0);
  ASSERT_TRUE(city.ok());
  const std::string long_name(kMaxCategoryNameBytes + 1, 'a');
  absl::StatusOr<float> code = city->Code(long_name);
  EXPECT_EQ(code.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(code.status().message(), HasSubstr("longer than the 65536 bytes"));
}

TEST(CategoryCodesTest, AFeatureWithoutRecordedCategoriesHasNoCoder) {
  ForestPtr f = Load("xgb.json");
  ASSERT_NE(f, nullptr);
  absl::StatusOr<CategoryCodes> x = CategoryCodesFor(*f, 1);
  EXPECT_EQ(x.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(x.status().message(), HasSubstr("feature 'x' has no category names"));
  EXPECT_EQ(CategoryCodesFor(*f, 3).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<ForestPtr> plain = LoadModelFile(std::string(GROVE_SOURCE_DIR) +
                                                  "/tests/golden/xgb_categorical/model.json");
  ASSERT_TRUE(plain.ok());
  EXPECT_THAT(CategoryCodesFor(**plain, 0).status().message(), HasSubstr("records none"));
}

TEST(CategoryCodesTest, HashedCategoriesMapEveryNameByItsHash) {
  // A CatBoost one-hot feature: the model holds the hashes its splits test, never names.
  FeatureCategories categories;
  categories.hashes = {CatboostCategoryHash("paris"), CatboostCategoryHash(""),
                       CatboostCategoryHash("3")};
  for (UnknownCategory rule : {UnknownCategory::kMissing, UnknownCategory::kError}) {
    const CategoryCodes city(categories, rule, "city");
    EXPECT_EQ(city.size(), 3u);
    EXPECT_EQ(*city.Code("paris"), 0.0f);
    EXPECT_EQ(*city.Code(""), 1.0f);  // the empty string is a category, not missing
    EXPECT_EQ(*city.Code("3"), 2.0f);  // the integer 3, as CatBoost hashes it
    EXPECT_EQ(*city.Code("3.0"), 3.0f);  // another text: no recorded hash
    // Unseen: the code past the recorded ones, whatever the rule (CatBoost sends it the "not
    // equal" way of every split).
    EXPECT_EQ(*city.Code("tokyo"), 3.0f);
    EXPECT_EQ(city.Find("tokyo"), 3);
    std::vector<absl::string_view> names = {"tokyo", "", "paris"};
    std::vector<float> out(3);
    ASSERT_TRUE(city.CodeColumn(names, out.data(), 1).ok());
    EXPECT_EQ(out, (std::vector<float>{3, 1, 0}));
    // The bound on untrusted names holds for hashed categories too.
    EXPECT_EQ(city.Find(std::string(kMaxCategoryNameBytes + 1, 'a')), -1);
    EXPECT_EQ(city.Code(std::string(kMaxCategoryNameBytes + 1, 'a')).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace grove
