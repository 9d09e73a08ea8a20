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
#include "core/model/feature_groups.h"
#include "gtest/gtest.h"
#include "tests/testing/coalition_games.h"
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

// A layout of one path per bin, path j with the zero fractions z[j] (element 0 the root): what
// BuildShapTable reads (elements' zero fractions and paths, paths, bins).
PathLayout SyntheticLayout(const std::vector<std::vector<double>>& z) {
  PathLayout l;
  l.bin_offsets.push_back(0);
  for (size_t j = 0; j < z.size(); ++j) {
    PathInfo p;
    p.element_begin = static_cast<uint32_t>(l.elements.size());
    p.length = static_cast<uint16_t>(z[j].size());
    p.bin = static_cast<uint32_t>(j);
    p.value_begin = static_cast<uint32_t>(l.values.size());
    l.values.push_back(1.0);
    for (size_t i = 0; i < z[j].size(); ++i) {
      PathElement e;
      e.path = static_cast<int32_t>(j);
      e.feature = i == 0 ? -1 : static_cast<int32_t>(i - 1);
      e.zero_fraction = z[j][i];
      e.flags = i == 0 ? kElemRoot : 0;
      l.elements.push_back(e);
    }
    l.paths.push_back(p);
    l.bin_offsets.push_back(static_cast<uint32_t>(l.elements.size()));
  }
  l.num_features = kWarpLanes;
  l.num_players = kWarpLanes;
  l.num_trees = static_cast<int>(z.size());
  return l;
}

// Every stored factor is total_i x (o_i - z_i) of its pattern, the unwound sum by the brute-force
// Shapley sum, for paths of 1..kTableMaxElements elements with z in (0, 1] (and exact 0 and 1).
TEST(TreeShapTableTest, FactorsAreTheShapleySumsOfEveryPattern) {
  std::mt19937_64 rng(41);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<std::vector<double>> zs;
  for (int trial = 0; trial < 120; ++trial) {
    const int n = 1 + trial % treeshap_arith::kTableMaxElements;
    std::vector<double> z(n + 1, 1.0);
    for (int j = 1; j <= n; ++j) {
      const double x = unit(rng);
      switch (trial % 4) {
        case 0: z[j] = 1.0 - x; break;  // (0, 1]
        case 1: z[j] = 1.0 - 1e-3 * x; break;
        case 2: z[j] = 1e-6 + x * 1e-6; break;
        default: z[j] = x < 0.15 ? 0.0 : (x < 0.3 ? 1.0 : x); break;
      }
    }
    zs.push_back(z);
  }
  const PathLayout l = SyntheticLayout(zs);
  const treeshap_arith::ShapTable t = treeshap_arith::BuildShapTable(l, 6, int64_t{1} << 30);
  ASSERT_EQ(t.table_bins.size(), zs.size());
  EXPECT_TRUE(t.other_bins.empty());
  int64_t checked = 0;
  for (size_t j = 0; j < zs.size(); ++j) {
    const std::vector<double>& z = zs[j];
    const int n = static_cast<int>(z.size()) - 1;
    ASSERT_NE(t.path_offset[j], treeshap_arith::kNoTable);
    for (unsigned pattern = 0; pattern < (1u << n); ++pattern) {
      std::vector<bool> o(n + 1, true);
      for (int i = 1; i <= n; ++i) o[i] = (pattern >> (i - 1)) & 1u;
      unsigned bits = 1;  // the root's
      for (int i = 1; i <= n; ++i) bits |= (o[i] ? 1u : 0u) << i;
      ASSERT_EQ(treeshap_arith::TablePattern(bits | (0xA5u << (n + 1)), n), pattern);
      for (int i = 1; i <= n; ++i) {
        const double want = BruteForceTotal(z, o, i, 0) * ((o[i] ? 1.0 : 0.0) - z[i]);
        const double got = t.factors[treeshap_arith::TableIndex(t.path_offset[j], n, pattern, i)];
        // The brute force's own rounding (2^m terms, tgamma) dominates the table's bound.
        EXPECT_NEAR(got, want, 1e-13 * std::max(1.0, std::fabs(want)))
            << "path " << j << " pattern " << pattern << " element " << i;
        ASSERT_LE(std::fabs(got - want),
                  treeshap_arith::TableFactorBound(n) * std::fabs(want) + 1e-14)
            << "path " << j << " pattern " << pattern << " element " << i;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 2000);
}

// The size cap and the element cap decide which bins take the table; the rest keep the
// arithmetic, and the two lists partition the bins.
TEST(TreeShapTableTest, CapsChooseTheBins) {
  std::vector<std::vector<double>> zs;
  for (int n : {2, 7, 4, 6, 1, 3}) zs.push_back(std::vector<double>(n + 1, 0.5));
  const PathLayout l = SyntheticLayout(zs);
  auto bytes = [](int n) { return (int64_t{1} << n) * n * 8; };
  const treeshap_arith::ShapTable all = treeshap_arith::BuildShapTable(l, 6, int64_t{1} << 30);
  EXPECT_EQ(all.table_bins, (std::vector<uint32_t>{0, 2, 3, 4, 5}));
  EXPECT_EQ(all.other_bins, (std::vector<uint32_t>{1}));
  EXPECT_EQ(all.path_offset[1], treeshap_arith::kNoTable);
  EXPECT_EQ(all.Bytes(), bytes(2) + bytes(4) + bytes(6) + bytes(1) + bytes(3));
  const treeshap_arith::ShapTable four = treeshap_arith::BuildShapTable(l, 4, int64_t{1} << 30);
  EXPECT_EQ(four.table_bins, (std::vector<uint32_t>{0, 2, 4, 5}));
  // 600 bytes: the 2- and 4-element paths (64 + 512) fit, the 6-element one (3,072) does not,
  // the 1-element one (16) still does, the 3-element one (192) no longer.
  const treeshap_arith::ShapTable small = treeshap_arith::BuildShapTable(l, 6, 600);
  EXPECT_EQ(small.table_bins, (std::vector<uint32_t>{0, 2, 4}));
  EXPECT_EQ(small.other_bins, (std::vector<uint32_t>{1, 3, 5}));
  EXPECT_EQ(small.Bytes(), bytes(2) + bytes(4) + bytes(1));
  EXPECT_TRUE(treeshap_arith::BuildShapTable(l, 6, 0).empty());
  EXPECT_TRUE(treeshap_arith::BuildShapTable(l, 0, int64_t{1} << 30).empty());
}

// On whole forests of depth 2-6 (multi-output, categorical, LightGBM rules, and grouped layouts
// whose group members fold into their player's bit), the table's contributions of every row are
// the double composite arithmetic's (EmulateRowContributions<double>): the same operations, so
// the same bits.
TEST(TreeShapTableTest, TableRowsAreTheDoubleArithmetic) {
  const std::vector<double> wd = treeshap_arith::ShapleyWeightTable();
  for (int depth = 2; depth <= 6; ++depth) {
    for (bool grouped : {false, true}) {
      testing::RandomForestOptions o;
      o.max_depth = depth;
      o.num_trees = 40;
      o.num_features = 12;
      o.num_outputs = 1 + depth % 2;
      o.categorical_fraction = 0.2;
      o.lightgbm_rules = depth % 2 == 0;
      o.extreme_cover_probability = 0.05;
      o.seed = 300 + depth;
      ForestPtr f = testing::MakeRandomForest(o);
      FeatureGroupsPtr groups = testing::RandomFeatureGroups(f->num_features, o.seed);
      PathLayoutOptions lo;
      if (grouped) lo.groups = groups.get();
      absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(*f, lo);
      ASSERT_TRUE(l.ok()) << l.status();
      const treeshap_arith::ShapTable t = treeshap_arith::BuildShapTable(**l, 6, int64_t{1} << 30);
      ASSERT_EQ(static_cast<int64_t>(t.table_bins.size() + t.other_bins.size()), (*l)->num_bins());
      EXPECT_TRUE(t.other_bins.empty()) << "depth " << depth;
      const std::vector<float> rows = testing::MakeRandomRows(*f, 30, depth, 0.15);
      for (size_t r = 0; r * f->num_features < rows.size(); ++r) {
        const float* row = rows.data() + r * f->num_features;
        std::vector<std::pair<int64_t, double>> want, got;
        auto into = [](std::vector<std::pair<int64_t, double>>* v) {
          return [v](const PathInfo& p, int player, double c) {
            v->push_back({static_cast<int64_t>(p.element_begin) * 64 + player, c});
          };
        };
        treeshap_arith::EmulateRowContributions<double>(**l, row, wd.data(), into(&want));
        treeshap_arith::TableRowContributions(**l, t, row, into(&got));
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(got[i].first, want[i].first);
          ASSERT_EQ(got[i].second, want[i].second)
              << "depth " << depth << " grouped " << grouped << " row " << r << " entry " << i;
        }
      }
    }
  }
}

// With a table, SHAP values of its bins are left out of the arithmetic's bounds and add the
// table's (negligible) one: a forest of many shallow trees, beyond float's bound without it,
// needs no arithmetic at all; interactions choose as before.
TEST(TreeShapTableTest, AutoTakesTheTableWithoutTheFloatBound) {
  ForestPtr f = testing::MakeRandomForest(
      {.num_trees = 3000, .max_depth = 4, .num_features = 50, .seed = 77});
  absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(*f);
  ASSERT_TRUE(l.ok()) << l.status();
  const double limit = 5e-6;
  const treeshap_arith::ShapTable t = treeshap_arith::BuildShapTable(**l, 6, int64_t{1} << 29);
  ASSERT_FALSE(t.empty());
  EXPECT_TRUE(t.other_bins.empty());
  const treeshap_arith::PrecisionChoice plain =
      treeshap_arith::ChoosePrecision(**l, TreeShapPrecision::kAuto, limit);
  const treeshap_arith::PrecisionChoice tabled =
      treeshap_arith::ChoosePrecision(**l, TreeShapPrecision::kAuto, limit, &t);
  std::printf("3000 trees of depth 4: float top-down bound %.3g, float %.3g; table bound %.3g\n",
              plain.top_down_bound[0][0], plain.bound[0], tabled.table_bound);
  EXPECT_FALSE(plain.table);
  EXPECT_GT(plain.top_down_bound[0][0], limit);  // float top-down is not provably safe
  EXPECT_TRUE(tabled.table);
  EXPECT_LT(tabled.table_bound, 1e-9);
  EXPECT_LE(tabled.bound[0], tabled.table_bound);  // no other bins
  EXPECT_EQ(tabled.use_float[1], plain.use_float[1]);
  EXPECT_EQ(tabled.top_down[1], plain.top_down[1]);
  EXPECT_EQ(tabled.bound[1], plain.bound[1]);
  // Forced arithmetics never take the table; kTable does.
  EXPECT_FALSE(treeshap_arith::ChoosePrecision(**l, TreeShapPrecision::kDouble, limit, &t).table);
  EXPECT_TRUE(treeshap_arith::ChoosePrecision(**l, TreeShapPrecision::kTable, limit, &t).table);
  EXPECT_STREQ(TreeShapPrecisionName(TreeShapPrecision::kTable), "table");
  // A deep forest: bins of long paths keep the arithmetic, bounded over those bins only.
  testing::RandomForestOptions d;
  d.max_depth = 12;
  d.num_trees = 40;
  d.num_features = 30;
  d.seed = 78;
  absl::StatusOr<PathLayoutPtr> ld = BuildPathLayout(*testing::MakeRandomForest(d));
  ASSERT_TRUE(ld.ok());
  const treeshap_arith::ShapTable td = treeshap_arith::BuildShapTable(**ld, 6, int64_t{1} << 29);
  const treeshap_arith::PrecisionChoice cd =
      treeshap_arith::ChoosePrecision(**ld, TreeShapPrecision::kAuto, limit, &td);
  const treeshap_arith::PrecisionChoice pd =
      treeshap_arith::ChoosePrecision(**ld, TreeShapPrecision::kAuto, limit);
  EXPECT_FALSE(td.other_bins.empty());
  EXPECT_LE(cd.bound[0], pd.bound[0] + cd.table_bound);
}

}  // namespace
}  // namespace grove
