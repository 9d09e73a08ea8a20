// AdditivityResiduals: the double sum of each output block minus the output, and the rows over
// the bound.
#include "core/servable/residuals.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace grove {
namespace {

TEST(ResidualsTest, SumsEachBlockAndCountsRowsOverTheBound) {
  // Two outputs of two features: blocks of 3 (bias last); three rows.
  const std::vector<float> values = {
      1.0f, 2.0f, 0.5f, /**/ -1.0f, 0.0f, 4.0f,    // sums 3.5 and 3
      1.0f, 2.0f, 0.5f, /**/ -1.0f, 0.0f, 4.0f,    // the same values
      NAN,  0.0f, 0.0f, /**/ 0.0f,  0.0f, 100.0f,  // a NaN; the other output exact
  };
  const std::vector<float> outputs = {3.5f, 3.0f, /**/ 3.5f, 3.0001f, /**/ 1.0f, 100.0f};
  std::vector<float> residuals(6, -7.0f);
  EXPECT_EQ(AdditivityResiduals(values.data(), 3, 2, 2, outputs.data(), residuals.data()), 2);
  EXPECT_EQ(residuals[0], 0.0f);
  EXPECT_EQ(residuals[1], 0.0f);
  EXPECT_EQ(residuals[2], 0.0f);
  EXPECT_NEAR(residuals[3], -1e-4, 1e-6);  // over 1e-5 x max(1, 3): counted
  EXPECT_TRUE(std::isnan(residuals[4]));    // non-finite: counted
  EXPECT_EQ(residuals[5], 0.0f);
  // Within the bound, relative to the output's size: not counted.
  const std::vector<float> big = {500.0f, 500.001f};
  const std::vector<float> big_out = {1000.0f};
  float r = 0;
  EXPECT_EQ(AdditivityResiduals(big.data(), 1, 1, 1, big_out.data(), &r), 0);
  EXPECT_NEAR(r, 0.001, 1e-4);
}

TEST(ResidualsTest, InteractionMatricesSumEveryEntry) {
  // One output, two features: a 3 x 3 matrix whose rows sum to the values (1.5, -0.5) and whose
  // [F][F] is the bias 2; two rows, the second off by 0.25.
  const std::vector<float> m = {
      1.0f, 0.5f, 0.0f, 0.5f, -1.0f, 0.0f, 0.0f, 0.0f, 2.0f,
      1.0f, 0.5f, 0.0f, 0.5f, -1.0f, 0.0f, 0.0f, 0.0f, 2.0f,
  };
  const std::vector<float> outputs = {3.0f, 2.75f};
  std::vector<float> residuals(2, -7.0f);
  EXPECT_EQ(InteractionResiduals(m.data(), 2, 1, 2, outputs.data(), residuals.data()), 1);
  EXPECT_EQ(residuals[0], 0.0f);
  EXPECT_EQ(residuals[1], 0.25f);
}

}  // namespace
}  // namespace grove
