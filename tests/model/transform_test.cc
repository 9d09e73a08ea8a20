#include "core/model/transform.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace grove {
namespace {

TransformParams Params(Link link, int outputs, double alpha = 1.0, double divisor = 1.0) {
  TransformParams p;
  p.link = link;
  p.num_outputs = outputs;
  p.sigmoid_alpha = alpha;
  p.average_divisor = divisor;
  return p;
}

TEST(TransformTest, IdentityKeepsMargins) {
  const double m[] = {-1.5, 0.0, 2.25};
  double out[3];
  TransformRow(Params(Link::kIdentity, 3), m, out);
  EXPECT_EQ(out[0], -1.5);
  EXPECT_EQ(out[1], 0.0);
  EXPECT_EQ(out[2], 2.25);
  EXPECT_EQ(TransformWidth(Params(Link::kIdentity, 3)), 3);
}

TEST(TransformTest, SigmoidWithAlpha) {
  const double m[] = {0.0, 1.0, -2.0};
  double out[3];
  TransformRow(Params(Link::kSigmoid, 3, 2.0), m, out);
  EXPECT_DOUBLE_EQ(out[0], 0.5);
  EXPECT_DOUBLE_EQ(out[1], 1.0 / (1.0 + std::exp(-2.0)));
  EXPECT_DOUBLE_EQ(out[2], 1.0 / (1.0 + std::exp(4.0)));
  // Saturates without NaN.
  const double big[] = {1e4, -1e4};
  TransformRow(Params(Link::kSigmoid, 2), big, out);
  EXPECT_EQ(out[0], 1.0);
  EXPECT_EQ(out[1], 0.0);
}

TEST(TransformTest, SoftmaxIsStableAndSumsToOne) {
  const double m[] = {1000.0, 1001.0, 999.0};
  double out[3];
  TransformRow(Params(Link::kSoftmax, 3), m, out);
  const double e0 = std::exp(-1.0), e2 = std::exp(-2.0);
  const double sum = e0 + 1.0 + e2;
  EXPECT_DOUBLE_EQ(out[0], e0 / sum);
  EXPECT_DOUBLE_EQ(out[1], 1.0 / sum);
  EXPECT_DOUBLE_EQ(out[2], e2 / sum);
  EXPECT_NEAR(out[0] + out[1] + out[2], 1.0, 1e-15);
}

TEST(TransformTest, SoftmaxInPlace) {
  double m[] = {0.5, -0.5};
  TransformRow(Params(Link::kSoftmax, 2), m, m);
  EXPECT_DOUBLE_EQ(m[0], 1.0 / (1.0 + std::exp(-1.0)));
  EXPECT_DOUBLE_EQ(m[1], 1.0 / (1.0 + std::exp(1.0)));
}

TEST(TransformTest, ExpLog1pExpSignedSquareHinge) {
  const double m[] = {-3.0, 0.0, 2.0};
  double out[3];
  TransformRow(Params(Link::kExp, 3), m, out);
  EXPECT_DOUBLE_EQ(out[0], std::exp(-3.0));
  EXPECT_DOUBLE_EQ(out[2], std::exp(2.0));
  TransformRow(Params(Link::kLog1pExp, 3), m, out);
  EXPECT_DOUBLE_EQ(out[0], std::log1p(std::exp(-3.0)));
  EXPECT_DOUBLE_EQ(out[1], std::log(2.0));
  EXPECT_NEAR(out[2], std::log1p(std::exp(2.0)), 1e-15);
  const double large[] = {1000.0};
  TransformRow(Params(Link::kLog1pExp, 1), large, out);
  EXPECT_EQ(out[0], 1000.0);  // log1p(exp(1000)) without overflow
  TransformRow(Params(Link::kSignedSquare, 3), m, out);
  EXPECT_EQ(out[0], -9.0);
  EXPECT_EQ(out[1], 0.0);
  EXPECT_EQ(out[2], 4.0);
  TransformRow(Params(Link::kHinge, 3), m, out);
  EXPECT_EQ(out[0], 0.0);
  EXPECT_EQ(out[1], 0.0);  // XGBoost: m > 0 ? 1 : 0
  EXPECT_EQ(out[2], 1.0);
}

TEST(TransformTest, ArgmaxTakesTheFirstLargest) {
  const double m[] = {0.5, 2.0, 2.0, -1.0};
  float out[1] = {-1};
  const TransformParams p = Params(Link::kArgmax, 4);
  EXPECT_EQ(TransformWidth(p), 1);
  TransformRow(p, m, out);
  EXPECT_EQ(out[0], 1.0f);
}

TEST(TransformTest, AverageOutputDividesBeforeTheLink) {
  const double m[] = {3.0};
  double out[1];
  TransformRow(Params(Link::kSigmoid, 1, 1.0, 4.0), m, out);
  EXPECT_DOUBLE_EQ(out[0], 1.0 / (1.0 + std::exp(-0.75)));
  TransformRow(Params(Link::kIdentity, 1, 1.0, 4.0), m, out);
  EXPECT_DOUBLE_EQ(out[0], 0.75);
}

TEST(TransformTest, MakeTransformParamsUsesTheObjective) {
  Forest f;
  f.num_outputs = 3;
  f.objective.link = Link::kSigmoid;
  f.objective.sigmoid_alpha = 0.5;
  TransformParams p = MakeTransformParams(f, 7);
  EXPECT_EQ(p.link, Link::kSigmoid);
  EXPECT_EQ(p.num_outputs, 3);
  EXPECT_EQ(p.sigmoid_alpha, 0.5);
  EXPECT_EQ(p.average_divisor, 1.0);
  f.objective.average_output = true;
  EXPECT_EQ(MakeTransformParams(f, 7).average_divisor, 7.0);
}

TEST(TransformTest, FloatInstantiation) {
  const float m[] = {0.0f, 1.0f};
  float out[2];
  TransformRow(Params(Link::kSoftmax, 2), m, out);
  EXPECT_NEAR(out[0], 1.0f / (1.0f + std::exp(1.0f)), 1e-7f);
  TransformRow(Params(Link::kSigmoid, 2), m, out);
  EXPECT_EQ(out[0], 0.5f);
}

}  // namespace
}  // namespace grove
