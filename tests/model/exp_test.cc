// HostExp (core/model/exp.h): within one unit in the last place of exp, measured in long double,
// over the whole range where the result is finite and not zero (subnormal results included), and
// its edges.
#include "core/model/exp.h"

#include <cmath>
#include <limits>
#include <random>

#include "gtest/gtest.h"

namespace grove {
namespace {

TEST(HostExpTest, IsWithinOneUlp) {
  std::mt19937_64 gen(4);
  for (int i = 0; i < 400000; ++i) {
    // Finite, nonzero results: x in [-745, 709.7] (below -708.4 they are subnormal).
    const double lo = i % 4 == 0 ? -745.0 : i % 4 == 1 ? -709.7 : i % 4 == 2 ? -30.0 : -1.0;
    const double hi = i % 4 == 0 ? -700.0 : i % 4 == 1 ? 709.7 : i % 4 == 2 ? 30.0 : 1.0;
    const double x = std::uniform_real_distribution<double>(lo, hi)(gen);
    const long double exact = std::exp(static_cast<long double>(x));
    const double got = HostExp(x);
    const double nearest = static_cast<double>(exact);
    const double ulp = std::nextafter(nearest, std::numeric_limits<double>::infinity()) - nearest;
    ASSERT_LE(std::fabs(static_cast<long double>(got) - exact), static_cast<long double>(ulp))
        << "x = " << x;
  }
}

TEST(HostExpTest, Edges) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(HostExp(0.0), 1.0);
  EXPECT_EQ(HostExp(-0.0), 1.0);
  EXPECT_EQ(HostExp(1.0), std::exp(1.0));
  EXPECT_EQ(HostExp(709.78), std::exp(709.78));  // the largest finite results
  EXPECT_EQ(HostExp(709.79), inf);
  EXPECT_EQ(HostExp(711.0), inf);
  EXPECT_EQ(HostExp(inf), inf);
  EXPECT_EQ(HostExp(-745.13), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(HostExp(-745.14), 0.0);
  EXPECT_EQ(HostExp(-746.0), 0.0);
  EXPECT_EQ(HostExp(-inf), 0.0);
  EXPECT_GT(HostExp(-720.0), 0.0);
  EXPECT_LT(HostExp(-720.0), std::numeric_limits<double>::min());  // subnormal
  EXPECT_TRUE(std::isnan(HostExp(std::numeric_limits<double>::quiet_NaN())));
}

}  // namespace
}  // namespace grove
