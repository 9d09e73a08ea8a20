// The warp TreeSHAP path arithmetic (core/explain/treeshap/treeshap_arith.h), run on the CPU exactly as the
// kernels run it: double against a brute-force Shapley sum, float against double within the
// per-path error bound (composite and top-down UNWIND), the model-level bounds against the float
// error of whole forests, and the choice of arithmetic they drive.
#include "core/explain/treeshap/treeshap_arith.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "core/explain/paths.h"
#include "gtest/gtest.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

using treeshap_arith::EmulatePath;

std::vector<float> FloatWeights() {
  const std::vector<double> w = treeshap_arith::ShapleyWeightTable();
  return std::vector<float>(w.begin(), w.end());
}

// sum over subsets S of the path's other elements (skip left out) of |S|! (n-1-|S|)! / n!
// prod_{S} o prod_{not S} z: the unwound sum by definition.
double BruteForceTotal(const std::vector<double>& z, const std::vector<bool>& o, int i, int skip) {
  std::vector<int> others;
  for (int j = 1; j < static_cast<int>(z.size()); ++j) {
    if (j != i && j != skip) others.push_back(j);
  }
  const int m = static_cast<int>(others.size());
  const int n = m + 1;
  double total = 0;
  for (uint32_t mask = 0; mask < (1u << m); ++mask) {
    double p = 1;
    int size = 0;
    for (int b = 0; b < m; ++b) {
      const bool in = (mask >> b) & 1u;
      size += in;
      p *= in ? (o[others[b]] ? 1.0 : 0.0) : z[others[b]];
    }
    total += p * std::tgamma(size + 1) * std::tgamma(n - size) / std::tgamma(n + 1);
  }
  return total;
}

// A random path of n non-root elements whose zero fractions follow `style`.
void RandomPath(std::mt19937_64& rng, int n, int style, std::vector<double>* z,
                std::vector<bool>* o) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  z->assign(n + 1, 1.0);
  o->assign(n + 1, true);
  for (int j = 1; j <= n; ++j) {
    const double x = unit(rng);
    switch (style) {
      case 0: (*z)[j] = x; break;                          // uniform
      case 1: (*z)[j] = 1.0 - 1e-3 * x; break;             // near 1: the unstable case of UNWIND
      case 2: (*z)[j] = 1e-6 * x; break;                   // near 0
      case 3: (*z)[j] = x < 0.1 ? 0.0 : (x < 0.2 ? 1.0 : x); break;  // exact 0 and 1 mixed in
      default: (*z)[j] = 0.5; break;                       // flat
    }
    (*o)[j] = unit(rng) < (style == 1 ? 0.9 : 0.6);
  }
}

std::array<bool, kWarpLanes + 1> Bools(const std::vector<bool>& o) {
  std::array<bool, kWarpLanes + 1> a{};
  for (size_t j = 0; j < o.size(); ++j) a[j] = o[j];
  return a;
}

TEST(TreeShapArithTest, ShapleyWeightsOfEverySubsetSumToOne) {
  const std::vector<double> w = treeshap_arith::ShapleyWeightTable();
  for (int n = 1; n < kWarpLanes; ++n) {
    double sum = 0, binomial = 1;
    for (int k = 0; k < n; ++k) {
      sum += binomial * w[treeshap_arith::WeightIndex(n, k)];
      binomial = binomial * (n - 1 - k) / (k + 1);
    }
    EXPECT_NEAR(sum, 1.0, 1e-13) << "n " << n;
  }
}

TEST(TreeShapArithTest, DoubleArithmeticIsTheShapleySum) {
  std::mt19937_64 rng(17);
  const std::vector<double> w = treeshap_arith::ShapleyWeightTable();
  std::vector<double> z;
  std::vector<bool> o;
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 1 + trial % 12;
    RandomPath(rng, n, trial % 5, &z, &o);
    const int skip = (trial % 3 == 0 && n > 1) ? 1 + trial % n : 0;
    const std::array<bool, kWarpLanes + 1> oo = Bools(o);
    std::vector<double> totals(n + 1);
    EmulatePath<double>(z.data(), oo.data(), n + 1, skip, w.data(), totals.data());
    for (int i = 1; i <= n; ++i) {
      // A dead element's own sum is never used (its contribution has the factor o - z = 0).
      if (i == skip || (z[i] == 0 && !o[i])) continue;
      const double want = BruteForceTotal(z, o, i, skip);
      EXPECT_NEAR(totals[i], want, 1e-12 * std::max(1.0, want))
          << "trial " << trial << " n " << n << " element " << i;
    }
  }
}

TEST(TreeShapArithTest, FloatStaysWithinThePerPathBound) {
  std::mt19937_64 rng(23);
  const std::vector<double> wd = treeshap_arith::ShapleyWeightTable();
  const std::vector<float> wf = FloatWeights();
  std::vector<double> z;
  std::vector<bool> o;
  double worst_ratio = 0;  // measured error / bound
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = 1 + trial % (kWarpLanes - 1);
    RandomPath(rng, n, trial % 5, &z, &o);
    const int skip = (trial % 4 == 0 && n > 1) ? 1 + trial % n : 0;
    if (treeshap_arith::MinZeroProduct(z.data(), n + 1) < treeshap_arith::kFloatMinZeroProduct) {
      continue;  // outside the bound's range: the selector keeps double for such paths
    }
    const std::array<bool, kWarpLanes + 1> oo = Bools(o);
    std::vector<double> d(n + 1);
    std::vector<float> f(n + 1);
    EmulatePath<double>(z.data(), oo.data(), n + 1, skip, wd.data(), d.data());
    EmulatePath<float>(z.data(), oo.data(), n + 1, skip, wf.data(), f.data());
    const double bound = treeshap_arith::FloatUnwoundSumBound(skip > 0 ? n - 1 : n);
    for (int i = 1; i <= n; ++i) {
      const double err = std::fabs(static_cast<double>(f[i]) - d[i]);
      ASSERT_LE(err, bound * d[i] + 1e-300) << "trial " << trial << " n " << n << " i " << i
                                            << " style " << trial % 5;
      if (d[i] > 0) worst_ratio = std::max(worst_ratio, err / (bound * d[i]));
    }
  }
  std::printf("largest float error / bound: %.3g\n", worst_ratio);
}

// The top-down UNWIND (TopDownUnwinder, as GPUTreeShap unwinds) within TopDownUnwoundSumBound on
// the same adversarial paths: in float against the composite double (the bound's derivation is
// the same for any unit roundoff, and float makes its errors visible), and in double.
TEST(TreeShapArithTest, TopDownStaysWithinItsBound) {
  using treeshap_arith::TopDownUnwinder;
  std::mt19937_64 rng(29);
  const std::vector<double> wd = treeshap_arith::ShapleyWeightTable();
  const std::vector<float> wf = FloatWeights();
  std::vector<double> z;
  std::vector<bool> o;
  double worst_ratio = 0;
  const double uf = std::ldexp(1.0, -24), ud = std::ldexp(1.0, -53);
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = 1 + trial % (kWarpLanes - 1);
    RandomPath(rng, n, trial % 5, &z, &o);
    const int skip = (trial % 4 == 0 && n > 1) ? 1 + trial % n : 0;
    if (treeshap_arith::MinZeroProduct(z.data(), n + 1) < treeshap_arith::kFloatMinZeroProduct) {
      continue;
    }
    const std::array<bool, kWarpLanes + 1> oo = Bools(o);
    std::vector<double> d(n + 1), td(n + 1);
    std::vector<float> tf(n + 1);
    EmulatePath<double>(z.data(), oo.data(), n + 1, skip, wd.data(), d.data());
    EmulatePath<double, TopDownUnwinder<double>>(z.data(), oo.data(), n + 1, skip, wd.data(),
                                                 td.data());
    EmulatePath<float, TopDownUnwinder<float>>(z.data(), oo.data(), n + 1, skip, wf.data(),
                                               tf.data());
    const int degree = skip > 0 ? n - 1 : n;
    const double bound_f = treeshap_arith::TopDownUnwoundSumBound(degree, uf);
    // The composite double reference carries its own (tiny) error: its bound in double units.
    const double reference = treeshap_arith::FloatUnwoundSumBound(degree) * ud / uf;
    const double bound_d = treeshap_arith::TopDownUnwoundSumBound(degree, ud) + reference;
    for (int i = 1; i <= n; ++i) {
      if (i == skip) continue;
      const double err_f = std::fabs(static_cast<double>(tf[i]) - d[i]);
      ASSERT_LE(err_f, (bound_f + reference) * d[i] + 1e-300)
          << "float, trial " << trial << " n " << n << " i " << i << " style " << trial % 5;
      ASSERT_LE(std::fabs(td[i] - d[i]), bound_d * d[i] + 1e-300)
          << "double, trial " << trial << " n " << n << " i " << i << " style " << trial % 5;
      if (d[i] > 0) worst_ratio = std::max(worst_ratio, err_f / (bound_f * d[i]));
    }
  }
  std::printf("largest top-down float error / bound: %.3g\n", worst_ratio);
  // The bound grows like 2^n / sqrt(n): small paths only in float, most paths in double.
  EXPECT_LT(treeshap_arith::TopDownUnwoundSumBound(4, uf), 1e-4);
  EXPECT_LT(treeshap_arith::TopDownUnwoundSumBound(20, ud), 1e-8);
  EXPECT_GT(treeshap_arith::TopDownUnwoundSumBound(20, uf), 0.1);
}

// Float SHAP values of a whole forest (the kernels' arithmetic, contributions summed in double)
// minus double ones, largest over rows, features and outputs, against the model bound.
template <typename Unwind = treeshap_arith::Unwinder<float>>
double ForestFloatError(const PathLayout& l, const std::vector<float>& rows) {
  const std::vector<double> wd = treeshap_arith::ShapleyWeightTable();
  const std::vector<float> wf = FloatWeights();
  const int64_t f1 = l.num_features + 1;
  double worst = 0;
  for (size_t r = 0; r * l.num_features < rows.size(); ++r) {
    const float* row = rows.data() + r * l.num_features;
    std::vector<double> diff(l.num_outputs * f1, 0.0);
    auto add = [&](double sign) {
      return [&, sign](const PathInfo& p, int feature, double c) {
        for (int w = 0; w < p.width; ++w) {
          diff[(p.group + w) * f1 + feature] += sign * c * l.values[p.value_begin + w];
        }
      };
    };
    treeshap_arith::EmulateRowContributions<float, Unwind>(l, row, wf.data(), add(1.0));
    treeshap_arith::EmulateRowContributions(l, row, wd.data(), add(-1.0));
    for (double v : diff) worst = std::max(worst, std::fabs(v));
  }
  return worst;
}

TEST(TreeShapArithTest, ModelBoundCoversTheFloatErrorOfWholeForests) {
  for (int depth : {2, 6, 12, 20}) {
    testing::RandomForestOptions o;
    o.max_depth = depth;
    o.num_trees = depth > 12 ? 6 : 30;
    o.num_features = 40;
    o.extreme_cover_probability = 0.05;
    o.categorical_fraction = 0.2;
    o.seed = 100 + depth;
    ForestPtr f = testing::MakeRandomForest(o);
    absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(*f);
    ASSERT_TRUE(l.ok()) << l.status();
    const treeshap_arith::FloatErrorBounds b = treeshap_arith::TreeShapFloatErrorBounds(**l);
    const std::vector<float> rows = testing::MakeRandomRows(*f, 40, depth);
    const double err = ForestFloatError(**l, rows);
    std::printf("depth %d: float error %.3g, bound %.3g\n", depth, err, b.shap[0]);
    EXPECT_LE(err, b.shap[0]);
    EXPECT_GE(b.interactions[0], b.shap[0]);
    const treeshap_arith::FloatErrorBounds td = treeshap_arith::TreeShapTopDownErrorBounds(**l, true);
    const double err_td = ForestFloatError<treeshap_arith::TopDownUnwinder<float>>(**l, rows);
    std::printf("depth %d: float top-down error %.3g, bound %.3g\n", depth, err_td, td.shap[0]);
    EXPECT_LE(err_td, td.shap[0]);
  }
}

TEST(TreeShapArithTest, SelectorPicksDoubleWhereTheBoundSaysFloatIsNotSafe) {
  testing::HandForest h(2);
  h.AddTree({h.Split(0, 0.5f, 1, 2, 10), h.Leaf(0.01, 6), h.Leaf(-0.02, 4)});
  ForestPtr small = h.Build();
  testing::RandomForestOptions o;
  o.max_depth = 16;
  o.num_trees = 200;
  o.num_features = 30;
  ForestPtr deep = testing::MakeRandomForest(o);
  absl::StatusOr<PathLayoutPtr> ls = BuildPathLayout(*small);
  absl::StatusOr<PathLayoutPtr> ld = BuildPathLayout(*deep);
  ASSERT_TRUE(ls.ok() && ld.ok());
  const double limit = 5e-6;
  const treeshap_arith::PrecisionChoice cs =
      treeshap_arith::ChoosePrecision(**ls, TreeShapPrecision::kAuto, limit);
  const treeshap_arith::PrecisionChoice cd =
      treeshap_arith::ChoosePrecision(**ld, TreeShapPrecision::kAuto, limit);
  EXPECT_TRUE(cs.use_float[0] && cs.use_float[1]) << cs.bound[0] << " " << cs.bound[1];
  EXPECT_FALSE(cd.use_float[0] || cd.use_float[1]) << cd.bound[0] << " " << cd.bound[1];
  // A one-split tree is safe in float even top-down; the deep forest in double top-down.
  EXPECT_TRUE(cs.top_down[0] && cs.top_down[1]) << cs.top_down_bound[0][0];
  EXPECT_TRUE(cd.top_down[0]) << cd.top_down_bound[0][1];
  EXPECT_LE(cd.top_down_bound[0][1], limit);
  EXPECT_GT(cd.top_down_bound[0][0], limit);
  // An element with z > 1 (inconsistent covers) rules top-down out: its errors would grow.
  testing::HandForest bad(2);
  bad.AddTree({bad.Split(0, 0.5f, 1, 2, 10), bad.Leaf(0.01, 16), bad.Leaf(-0.02, 4)});
  absl::StatusOr<PathLayoutPtr> lb = BuildPathLayout(*bad.Build());
  ASSERT_TRUE(lb.ok());
  const treeshap_arith::PrecisionChoice cb =
      treeshap_arith::ChoosePrecision(**lb, TreeShapPrecision::kAuto, limit);
  EXPECT_FALSE(cb.top_down[0]);
  EXPECT_TRUE(std::isinf(cb.top_down_bound[0][1]));
  // The choice follows the bound exactly, per kind.
  const double mid = 0.5 * (cs.bound[0] + cs.bound[1]);
  const treeshap_arith::PrecisionChoice split =
      treeshap_arith::ChoosePrecision(**ls, TreeShapPrecision::kAuto, mid);
  EXPECT_TRUE(split.use_float[0]);
  EXPECT_FALSE(split.use_float[1]);
  // Forced precisions ignore the bound.
  EXPECT_TRUE(treeshap_arith::ChoosePrecision(**ld, TreeShapPrecision::kFloat, limit).use_float[1]);
  EXPECT_FALSE(treeshap_arith::ChoosePrecision(**ls, TreeShapPrecision::kDouble, limit).use_float[0]);
  EXPECT_FALSE(treeshap_arith::ChoosePrecision(**ls, TreeShapPrecision::kDouble, limit).top_down[0]);
  const treeshap_arith::PrecisionChoice forced =
      treeshap_arith::ChoosePrecision(**ld, TreeShapPrecision::kFloatTopDown, limit);
  EXPECT_TRUE(forced.use_float[1] && forced.top_down[1]);
  EXPECT_STREQ(TreeShapPrecisionName(TreeShapPrecision::kDoubleTopDown), "double_top_down");
}

}  // namespace
}  // namespace grove
