// The CPU engine's vector link functions against the scalar ones they must equal bit for bit:
// Exp512 and Exp256 against HostExp over the whole range of doubles and its edges, and
// TransformBlock512 and TransformBlock256 against TransformRow for every link they take, with and
// without an average divisor. (HostExp's own accuracy: tests/model/exp_test.cc.)
#include "core/predict/cpu/cpu_transform_simd.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/model/exp.h"
#include "core/predict/cpu/cpu_walk_simd.h"
#include "gtest/gtest.h"

namespace grove::cpu {
namespace {

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// `exp` of `lanes` doubles at a time against HostExp.
void CheckExp(void (*exp)(const double*, double*), int lanes) {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> x = {0.0, -0.0, 1.0, -1.0, 0.5, 709.78, 709.79, 710.0, 711.0, 1e300,
                           -708.39, -708.4, -720.0, -745.13, -745.14, -746.0, -747.0, -1e300,
                           1e-300, -1e-300, 4.9e-324, inf, -inf,
                           std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::denorm_min(),
                           std::numeric_limits<double>::max(), std::numeric_limits<double>::lowest()};
  std::mt19937_64 gen(3);
  for (int i = 0; i < 400000; ++i) {
    const double scale = i % 3 == 0 ? 750.0 : i % 3 == 1 ? 40.0 : 1.0;
    x.push_back(std::uniform_real_distribution<double>(-scale, scale)(gen));
  }
  while (x.size() % lanes != 0) x.push_back(0.25);
  std::vector<double> got(x.size());
  for (size_t i = 0; i < x.size(); i += lanes) exp(x.data() + i, got.data() + i);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = HostExp(x[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[i])) << x[i];
      continue;
    }
    ASSERT_TRUE(SameBits(got[i], want)) << "x = " << x[i] << ": " << got[i] << " against " << want;
  }
}

TEST(CpuTransformSimdTest, Exp512GivesHostExpBitForBit) {
  if (!HaveSimdWalk()) GTEST_SKIP() << "no AVX-512";
  CheckExp(Exp512, 8);
}

TEST(CpuTransformSimdTest, Exp256GivesHostExpBitForBit) {
  if (!HaveAvx2Transform()) GTEST_SKIP() << "no AVX2 and FMA";
  CheckExp(Exp256, 4);
}

using BlockTransform = void (*)(const TransformParams&, bool, double*, int64_t, int, float*,
                                int64_t);

// `block` over every link it takes against TransformRow, rows written at a stride past their
// values (left untouched) and packed (one store where a row holds one value).
void CheckBlock(BlockTransform block) {
  constexpr int kRows = 24;
  std::mt19937_64 gen(5);
  for (Link link : {Link::kIdentity, Link::kSigmoid, Link::kExp, Link::kSoftmax}) {
    for (int outputs : {1, 3, 10}) {
      if (link == Link::kSoftmax && outputs == 1) continue;
      for (double divisor : {1.0, 7.0}) {
        for (bool margin_only : {false, true}) {
          for (int extra : {2, 0}) {
            TransformParams p;
            p.link = link;
            p.num_outputs = outputs;
            p.sigmoid_alpha = 1.5;
            p.average_divisor = divisor;
            ASSERT_TRUE(VectorTransformTakes(p));
            std::vector<double> margins(static_cast<size_t>(kRows) * outputs);
            for (double& m : margins) m = std::uniform_real_distribution<double>(-30, 30)(gen);
            margins[0] = 800.0;  // exp overflows; softmax's shift keeps it finite
            const std::vector<double> kept = margins;
            const int width = outputs + extra;
            std::vector<float> got(static_cast<size_t>(kRows) * width + extra, -1.0f);
            block(p, margin_only, margins.data(), kRows, kRows, got.data(), width);
            for (int r = 0; r < kRows; ++r) {
              std::vector<double> row(outputs);
              for (int k = 0; k < outputs; ++k) row[k] = kept[k * kRows + r];
              std::vector<float> want(outputs);
              if (margin_only) {
                for (int k = 0; k < outputs; ++k) want[k] = static_cast<float>(row[k]);
              } else {
                TransformRow(p, row.data(), want.data());
              }
              for (int k = 0; k < outputs; ++k) {
                ASSERT_TRUE(SameBits(got[r * width + k], want[k]))
                    << LinkName(link) << " outputs " << outputs << " divisor " << divisor
                    << " margin_only " << margin_only << " width " << width << " row " << r
                    << " output " << k << ": " << got[r * width + k] << " against " << want[k];
              }
              if (extra > 0) EXPECT_EQ(got[r * width + outputs], -1.0f);  // past the row's values
            }
          }
        }
      }
    }
  }
  TransformParams other;
  other.link = Link::kLog1pExp;
  EXPECT_FALSE(VectorTransformTakes(other));
}

TEST(CpuTransformSimdTest, BlockTransformGivesTransformRowBitForBit) {
  if (!HaveSimdWalk()) GTEST_SKIP() << "no AVX-512";
  CheckBlock(TransformBlock512);
}

TEST(CpuTransformSimdTest, Avx2BlockTransformGivesTransformRowBitForBit) {
  if (!HaveAvx2Transform()) GTEST_SKIP() << "no AVX2 and FMA";
  CheckBlock(TransformBlock256);
}

}  // namespace
}  // namespace grove::cpu
