// InputSchema (core/model/input_schema.h): the names, the name -> index map and the category
// coders a model's requests are converted by, built once per model.
#include "core/model/input_schema.h"

#include <cmath>
#include <string>
#include <vector>

#include "core/model/loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kData = std::string(GROVE_SOURCE_DIR) + "/tests/model/data/categories/";

TEST(InputSchemaTest, NamesIndexAndCodersOfARecordedModel) {
  absl::StatusOr<ForestPtr> f = LoadModelFile(kData + "xgb.json");
  ASSERT_TRUE(f.ok()) << f.status();
  const InputSchema schema(**f);
  ASSERT_EQ(static_cast<int>(schema.names().size()), (*f)->num_features);
  EXPECT_EQ(schema.names()[0], "city");
  for (int64_t i = 0; i < (*f)->num_features; ++i) {
    EXPECT_EQ(schema.FeatureIndex(schema.names()[static_cast<size_t>(i)]), i);
  }
  EXPECT_EQ(schema.FeatureIndex("no such feature"), -1);
  EXPECT_EQ(schema.FeatureIndex(""), -1);
  absl::StatusOr<const CategoryCodes*> city = schema.Coder(0);
  ASSERT_TRUE(city.ok()) << city.status();
  EXPECT_EQ(*(*city)->Code("lyon"), 2.0f);
  // The same coder on every call: built once, not per request.
  EXPECT_EQ(*schema.Coder(0), *city);
}

TEST(InputSchemaTest, FeaturesWithoutCategoriesAndOutOfRangeSayWhy) {
  absl::StatusOr<ForestPtr> f = LoadModelFile(kData + "xgb.json");
  ASSERT_TRUE(f.ok()) << f.status();
  const InputSchema schema(**f);
  int numeric = -1;
  for (int i = 0; i < (*f)->num_features; ++i) {
    if (static_cast<size_t>(i) >= (*f)->categories.size() || (*f)->categories[i].empty()) {
      numeric = i;
      break;
    }
  }
  ASSERT_GE(numeric, 0) << "the test model has a numeric feature";
  absl::StatusOr<const CategoryCodes*> none = schema.Coder(numeric);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("has no category names"));
  EXPECT_EQ(schema.Coder(-1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(schema.Coder(int64_t{1} << 40).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(InputSchemaTest, DefaultNamesWhenTheModelHasNone) {
  EXPECT_THAT(FeatureNamesOrDefault({}, 3), ElementsAre("f0", "f1", "f2"));
  EXPECT_THAT(FeatureNamesOrDefault({"a", "b"}, 2), ElementsAre("a", "b"));
  // Names that do not cover every feature are not the model's names.
  EXPECT_THAT(FeatureNamesOrDefault({"a"}, 2), ElementsAre("f0", "f1"));
}

}  // namespace
}  // namespace grove
