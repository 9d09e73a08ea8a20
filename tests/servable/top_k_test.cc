// TopKFeatures (core/servable/top_k.h): the k largest |SHAP values| per row and output, bias
// excluded, ties to the lower feature; and the column names of a top-k result.
#include "core/servable/top_k.h"

#include <vector>

#include "core/servable/result_columns.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

using ::testing::ElementsAre;

TEST(TopK, LargestAbsoluteValuesPerRowAndOutputBiasExcluded) {
  // 2 rows x 2 outputs x (3 features + bias).
  const std::vector<float> shap = {
      0.5f, -2.0f, 1.0f, 9.0f,   // row 0, output 0: the bias (9) never ranks
      -1.0f, 1.0f, 0.0f, 0.0f,   // row 0, output 1: a tie goes to the lower feature
      0.0f, 0.0f, 3.0f, -9.0f,   // row 1, output 0
      2.0f, -3.0f, 0.25f, 1.0f,  // row 1, output 1
  };
  std::vector<int32_t> features(8);
  std::vector<float> values(8);
  TopKFeatures(shap.data(), 2, 2, 3, 2, features.data(), values.data());
  EXPECT_THAT(features, ElementsAre(1, 2, 0, 1, 2, 0, 1, 0));
  EXPECT_THAT(values, ElementsAre(-2.0f, 1.0f, -1.0f, 1.0f, 3.0f, 0.0f, -3.0f, 2.0f));
}

TEST(TopK, ColumnNamesArePairsPrefixedPerOutput) {
  ResultColumns c;
  c.feature_names = {"a", "b", "c"};
  c.explain = true;
  c.top_k = 5;  // capped at the features
  EXPECT_THAT(ResultColumnNames(c),
              ElementsAre("top1_feature", "top1_value", "top2_feature", "top2_value",
                          "top3_feature", "top3_value"));
  c.top_k = 1;
  c.num_outputs = 2;
  EXPECT_THAT(ResultColumnNames(c),
              ElementsAre("out0.top1_feature", "out0.top1_value", "out1.top1_feature",
                          "out1.top1_value"));
}

}  // namespace
}  // namespace grove
