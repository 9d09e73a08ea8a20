// DoubleRowConverter: double inputs -> float rows that route like the doubles.
#include "core/model/double_rows.h"

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/model/decision.h"
#include "core/model/loader.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

constexpr float kInfF = std::numeric_limits<float>::infinity();

// A LightGBM model with one stump per threshold on feature 0 and one on feature 1.
std::string Model(const std::vector<std::string>& thresholds) {
  std::string text =
      "tree\nversion=v4\nnum_class=1\nnum_tree_per_iteration=1\nlabel_index=0\n"
      "max_feature_idx=1\nobjective=regression\nfeature_names=a b\n\n";
  int t = 0;
  for (const std::string& th : thresholds) {
    absl::StrAppend(&text, "Tree=", t++, "\nnum_leaves=2\nnum_cat=0\nsplit_feature=0\n",
                    "threshold=", th, "\ndecision_type=2\nleft_child=-1\nright_child=-2\n",
                    "leaf_value=1 2\nleaf_count=5 5\ninternal_count=10\nshrinkage=1\n\n");
  }
  absl::StrAppend(&text, "end of trees\n");
  return text;
}

bool Left(const Forest& f, int t, float x) {
  const Node& n = f.TreeNodes(t)[0];
  return GoesLeft(n.flags, n.threshold, n.payload, n.aux, f.category_bits.data(), x);
}

TEST(DoubleRowConverter, ThresholdsAreStoredPerFeature) {
  absl::StatusOr<ForestPtr> f = LoadLightgbmText(Model({"0.5", "-1.25", "0.5", "3"}), "m.txt");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->double_thresholds, (std::vector<double>{-1.25, 0.5, 3}));
  EXPECT_EQ((*f)->double_threshold_offsets, (std::vector<uint32_t>{0, 3, 3}));
}

TEST(DoubleRowConverter, DecimalsAtAThresholdRouteAsTheDouble) {
  // LightGBM bin boundaries: a midpoint nudged up one double ulp; test values equal the midpoint.
  const std::vector<std::string> ts = {"1.3250000000000002", "0.2800000000000001",
                                       "-1.8036999999999999", "0.10000000000000001"};
  absl::StatusOr<ForestPtr> f = LoadLightgbmText(Model(ts), "m.txt");
  ASSERT_TRUE(f.ok()) << f.status();
  const DoubleRowConverter converter(**f);
  for (int t = 0; t < static_cast<int>(ts.size()); ++t) {
    const double th = std::strtod(ts[t].c_str(), nullptr);
    for (double d : {th, std::nextafter(th, -1e300), std::nextafter(th, 1e300), 1.325, 0.28,
                     -1.8037, 0.1, 1.3250000477, 0.2800000011920929}) {
      const float x = converter.Convert(0, d);
      EXPECT_EQ(Left(**f, t, x), d <= th) << "d=" << d << " t=" << th << " x=" << x;
      EXPECT_LE(std::abs(static_cast<double>(x) - d), std::abs(d) * 1.2e-7) << d;
    }
  }
  // The plain nearest float crosses the first two thresholds: the converter must not.
  EXPECT_FALSE(Left(**f, 0, 1.325f));
  EXPECT_TRUE(Left(**f, 0, converter.Convert(0, 1.325)));
}

TEST(DoubleRowConverter, EveryThresholdOfRandomModels) {
  std::mt19937_64 rng(5);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string> ts;
    std::vector<double> values;
    std::set<int64_t> used;  // distinct midpoints: no two thresholds inside one float ulp
    for (int i = 0; i < 50; ++i) {
      // 4-decimal midpoints nudged up (LightGBM's rule), and midpoints moved by a few 1e-9.
      const int64_t k = static_cast<int64_t>(rng() % 20000) - 10000;
      if (!used.insert(k).second) continue;
      const double mid = static_cast<double>(k) / 1e4 + 5e-5;
      const double t = i % 2 ? std::nextafter(mid, 1e300) : mid * (1 + 1e-9 * (rng() % 100));
      ts.push_back(absl::StrFormat("%.17g", t));
      values.push_back(t);
      values.push_back(mid);
      values.push_back(std::nextafter(t, -1e300));
      values.push_back(std::nextafter(t, 1e300));
    }
    absl::StatusOr<ForestPtr> f = LoadLightgbmText(Model(ts), "m.txt");
    ASSERT_TRUE(f.ok()) << f.status();
    const DoubleRowConverter converter(**f);
    for (double d : values) {
      const float x = converter.Convert(0, d);
      for (int t = 0; t < static_cast<int>(ts.size()); ++t) {
        const double th = std::strtod(ts[t].c_str(), nullptr);
        ASSERT_EQ(Left(**f, t, x), d <= th) << "d=" << d << " t=" << th;
      }
    }
  }
}

TEST(DoubleRowConverter, SpecialValuesAndOtherFeatures) {
  absl::StatusOr<ForestPtr> f = LoadLightgbmText(Model({"0.5"}), "m.txt");
  ASSERT_TRUE(f.ok()) << f.status();
  const DoubleRowConverter converter(**f);
  EXPECT_TRUE(std::isnan(converter.Convert(0, std::nan(""))));
  EXPECT_EQ(converter.Convert(0, 1e300), kInfF);
  EXPECT_EQ(converter.Convert(0, -1e300), -kInfF);
  EXPECT_EQ(converter.Convert(0, static_cast<double>(FLT_MAX) * (1 + 1e-12)), FLT_MAX);
  EXPECT_EQ(converter.Convert(1, 0.1), 0.1f);  // feature 1 has no thresholds: nearest float
  EXPECT_EQ(converter.Convert(0, 0.25), 0.25f);
  const double in[4] = {0.1, 0.2, std::nan(""), 7.0};
  float out[4];
  converter.ConvertRows(in, 2, out);
  EXPECT_EQ(out[0], 0.1f);
  EXPECT_EQ(out[1], 0.2f);
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_EQ(out[3], 7.0f);
}

TEST(DoubleRowConverter, XgboostModelsCastLikeXgboost) {
  Forest f;
  f.num_features = 1;
  const DoubleRowConverter converter(f);
  for (double d : {0.1, 1.325, -2.5, 1e-40, 3.4e38}) {
    EXPECT_EQ(converter.Convert(0, d), static_cast<float>(d));
  }
}

}  // namespace
}  // namespace grove
