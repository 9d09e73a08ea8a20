// Quadrature SHAP (core/explain/quadrature/quadrature.h): Gauss-Legendre rules, the per-path arithmetic against
// brute-force Shapley weights, the CPU strategy against the double CPU reference on the corpus and
// on seeded random forests up to depth 30 with extreme covers, the CPU tree program against the
// per-path kernel (zero covers, batch independence), and a fixed 8-point rule (emulated) failing
// where Grove's per-path rule is exact.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/explain_engine.h"
#include "core/explain/paths.h"
#include "core/explain/quadrature/quadrature.h"
#include "core/explain/quadrature/quadrature_pairs.h"
#include "core/explain/quadrature/quadrature_tree.h"
#include "core/gpu/device_set.h"
#include "core/model/forest.h"
#include "core/model/loader.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"
#include "tests/testing/explain_reference.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

constexpr double kTolerance = 1e-5;

double Factorial(int n) {
  double f = 1;
  for (int i = 2; i <= n; ++i) f *= i;
  return f;
}

TEST(GaussLegendreTest, RulesAreExactUpToDegreeTwoQMinusOne) {
  for (int q = 1; q <= 64; ++q) {
    SCOPED_TRACE(q);
    const GaussLegendreRule rule = GaussLegendre01(q);
    ASSERT_EQ(rule.nodes.size(), static_cast<size_t>(q));
    double sum = 0;
    for (int k = 0; k < q; ++k) {
      EXPECT_GT(rule.nodes[k], 0.0);
      EXPECT_LT(rule.nodes[k], 1.0);
      if (k > 0) EXPECT_GT(rule.nodes[k], rule.nodes[k - 1]);
      EXPECT_GT(rule.weights[k], 0.0);
      sum += rule.weights[k];
    }
    EXPECT_NEAR(sum, 1.0, 1e-14);
    // Beta integrals int t^s (1 - t)^(m - s) dt = s! (m - s)! / (m + 1)! for m <= 2q - 1: the
    // Shapley weights themselves.
    for (int m = 0; m <= std::min(2 * q - 1, 60); ++m) {
      for (int s = 0; s <= m; s += std::max(1, m / 7)) {
        double got = 0;
        for (int k = 0; k < q; ++k) {
          got += rule.weights[k] * std::pow(rule.nodes[k], s) * std::pow(1 - rule.nodes[k], m - s);
        }
        const double want = Factorial(s) * Factorial(m - s) / Factorial(m + 1);
        EXPECT_NEAR(got / want, 1.0, 1e-12) << "m " << m << " s " << s;
      }
    }
  }
}

TEST(QuadraturePointsTest, SmallestExactRule) {
  EXPECT_EQ(QuadraturePoints(1), 1);
  EXPECT_EQ(QuadraturePoints(2), 1);  // degree 1
  EXPECT_EQ(QuadraturePoints(3), 2);  // degree 2
  EXPECT_EQ(QuadraturePoints(4), 2);  // degree 3
  EXPECT_EQ(QuadraturePoints(30), 15);
  for (int n = 1; n < 200; ++n) EXPECT_GE(2 * QuadraturePoints(n) - 1, n - 1) << n;
  EXPECT_EQ(QuadratureBucket(3), 4);
  EXPECT_EQ(QuadratureBucket(9), 16);
  EXPECT_EQ(QuadratureBucket(32), 32);
  EXPECT_EQ(QuadratureBucket(33), 0);
}

// sum over subsets S of the other elements of |S|! (n - |S| - 1)! / n! prod_{S} o prod_{not S} z.
double BruteForceWeight(const std::vector<double>& z, const std::vector<double>& o, int i,
                        int skip = -1) {
  std::vector<int> others;
  for (int j = 0; j < static_cast<int>(z.size()); ++j) {
    if (j != i && j != skip) others.push_back(j);
  }
  const int m = static_cast<int>(others.size());
  double total = 0;
  for (uint32_t mask = 0; mask < (1u << m); ++mask) {
    double p = 1;
    int s = 0;
    for (int b = 0; b < m; ++b) {
      if (mask & (1u << b)) {
        p *= o[others[b]];
        ++s;
      } else {
        p *= z[others[b]];
      }
    }
    total += p * Factorial(s) * Factorial(m - s) / Factorial(m + 1);
  }
  return total;
}

TEST(QuadratureLeaveOneOutTest, MatchesBruteForceShapleyWeights) {
  uint64_t state = 12345;
  auto uniform = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) / 9007199254740992.0;
  };
  for (int n = 1; n <= 14; ++n) {
    for (int trial = 0; trial < 5; ++trial) {
      std::vector<double> z(n), o(n), d(n);
      for (int j = 0; j < n; ++j) {
        const double u = uniform();
        z[j] = u < 0.2 ? 1e-6 : (u < 0.3 ? 0.0 : uniform());
        o[j] = uniform() < 0.5 ? 1.0 : 0.0;
        d[j] = o[j] - z[j];
      }
      const int q = QuadraturePoints(n);
      const GaussLegendreRule rule = GaussLegendre01(q);
      std::vector<double> pre(n), acc(n);
      QuadratureLeaveOneOut<0, double>(z.data(), d.data(), n, -1, rule.nodes.data(),
                                       rule.weights.data(), q, pre.data(), acc.data());
      for (int i = 0; i < n; ++i) {
        const double want = BruteForceWeight(z, o, i);
        EXPECT_NEAR(acc[i], want, 1e-14 * std::max(1e-300, std::abs(want)) + 1e-300)
            << "n " << n << " i " << i;
      }
      // The same with a compile-time length and padding.
      std::vector<double> zp(16, 1.0), dp(16, 0.0), prep(16), accp(16);
      if (n <= 16) {
        std::copy(z.begin(), z.end(), zp.begin());
        std::copy(d.begin(), d.end(), dp.begin());
        QuadratureLeaveOneOut<16, double>(zp.data(), dp.data(), n, -1, rule.nodes.data(),
                                          rule.weights.data(), q, prep.data(), accp.data());
        for (int i = 0; i < n; ++i) EXPECT_DOUBLE_EQ(accp[i], acc[i]);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------

struct Compared {
  double max_error = 0;  // max |got - ref| / max(1, |margin|)
  int64_t row = -1, col = -1;
  double got = 0, want = 0;
  std::string ToString() const {
    return absl::StrFormat("max err/max(1,|margin|) %.3g at row %d col %d (got %.9g want %.9g)",
                           max_error, row, col, got, want);
  }
};

// Margins from the reference's SHAP values (each output block sums to the margin).
std::vector<double> Margins(const Forest& f, const std::vector<float>& shap, int64_t rows) {
  const int64_t f1 = f.num_features + 1;
  std::vector<double> m(rows * f.num_outputs, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int k = 0; k < f.num_outputs; ++k) {
      for (int64_t c = 0; c < f1; ++c) m[r * f.num_outputs + k] += shap[r * f.num_outputs * f1 + k * f1 + c];
    }
  }
  return m;
}

Compared Compare(const Forest& f, const std::vector<float>& got, const std::vector<float>& want,
                 const std::vector<double>& margins, int64_t rows, bool interactions) {
  Compared c;
  const int64_t width = ExplainWidth(f, interactions);
  const int64_t block = width / f.num_outputs;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t col = 0; col < width; ++col) {
      const double g = got[r * width + col], w = want[r * width + col];
      const double scale = std::max(1.0, std::abs(margins[r * f.num_outputs + col / block]));
      const double e = std::isfinite(g) ? std::abs(g - w) / scale : INFINITY;
      if (e > c.max_error || c.row < 0) {
        c.max_error = std::max(c.max_error, e);
        c.row = r;
        c.col = col;
        c.got = g;
        c.want = w;
      }
    }
  }
  return c;
}

QuadratureModelPtr Build(ForestPtr f) {
  absl::StatusOr<PathLayoutPtr> layout = BuildPathLayout(*f);
  EXPECT_TRUE(layout.ok()) << layout.status();
  if (!layout.ok()) return nullptr;
  absl::StatusOr<QuadratureModelPtr> model = BuildQuadratureModel(f, *layout);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

std::vector<float> Quadrature(const QuadratureModel& model, const std::vector<float>& x,
                              int64_t rows, bool interactions, ThreadPool* pool,
                              QuadratureCpuWorkspaces* workspaces = nullptr) {
  const int64_t width = ExplainWidth(*model.forest, interactions);
  std::vector<float> out(rows * width, -12345.0f);
  ExplainOptions o;
  o.interactions = interactions;
  absl::Status s = ExplainQuadratureCpu(model, MakeRowsView(x.data(), rows, model.num_features), o,
                                        MakeMatrixView(out.data(), rows, width), pool, workspaces);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// A copy of `model` that integrates every path with the same `points`-point rule (emulating a
// fixed-rule implementation).
QuadratureModelPtr WithFixedRule(const QuadratureModel& model, int points) {
  auto fixed = std::make_shared<QuadratureModel>(model);
  const GaussLegendreRule rule = GaussLegendre01(points);
  const uint32_t offset = static_cast<uint32_t>(fixed->rule_nodes.size());
  fixed->rule_nodes.insert(fixed->rule_nodes.end(), rule.nodes.begin(), rule.nodes.end());
  fixed->rule_weights.insert(fixed->rule_weights.end(), rule.weights.begin(), rule.weights.end());
  for (QuadraturePath& p : fixed->paths) {
    p.q = static_cast<uint16_t>(points);
    p.rule_begin = offset;
  }
  fixed->tree_program = nullptr;  // its rules are per tree: the emulation runs every path alone
  return fixed;
}

TEST(QuadratureCpuTest, HandComputedDepth2Tree) {
  HandForest h(2);
  h.AddTree({h.Split(0, 0.5f, 1, 2, 10), h.Split(1, 0.5f, 3, 4, 6), h.Split(1, 0.5f, 5, 6, 4),
             h.Leaf(1.0, 2), h.Leaf(2.0, 4), h.Leaf(3.0, 1), h.Leaf(5.0, 3)});
  ForestPtr f = h.Build();
  QuadratureModelPtr model = Build(f);
  ASSERT_NE(model, nullptr);
  const std::vector<float> x = {0.0f, 1.0f};
  const std::vector<float> got = Quadrature(*model, x, 1, false, nullptr);
  // phi0 = -7/6, phi1 = f(x) - E - phi0 = 2 - 2.8 + 7/6, bias = 2.8 (see explain_cpu_test.cc).
  EXPECT_NEAR(got[0], -7.0 / 6.0, 1e-6);
  EXPECT_NEAR(got[1], 2.0 - 2.8 + 7.0 / 6.0, 1e-6);
  EXPECT_NEAR(got[2], 2.8, 1e-6);
}

struct ForestCase {
  std::string name;
  RandomForestOptions options;
  int64_t shap_rows;
  int64_t interaction_rows;
};

std::vector<ForestCase> RandomCases() {
  std::vector<ForestCase> cases;
  uint64_t seed = 100;
  for (int depth : {1, 2, 3, 5, 8, 12, 16, 20, 25, 30}) {
    ForestCase c;
    c.options.max_depth = depth;
    c.options.num_trees = depth >= 20 ? 6 : 20;
    c.options.num_features = depth >= 16 ? 40 : 12;
    // Deep trees stay small (about 1.2^depth leaves) so that the reference runs quickly.
    c.options.leaf_probability = depth >= 16 ? 0.4 : 0.2;
    c.options.extreme_cover_probability = 0.3;
    c.options.categorical_fraction = 0.2;
    c.options.seed = ++seed;
    c.shap_rows = 64;
    c.interaction_rows = depth >= 20 ? 2 : 8;
    c.name = absl::StrFormat("depth%d_extreme", depth);
    cases.push_back(c);
  }
  {
    ForestCase c;
    c.options.max_depth = 10;
    c.options.num_outputs = 3;
    c.options.num_trees = 15;
    c.options.lightgbm_rules = true;
    c.options.categorical_fraction = 0.3;
    c.options.extreme_cover_probability = 0.1;
    c.options.seed = 7;
    c.shap_rows = 64;
    c.interaction_rows = 6;
    c.name = "multiclass_lightgbm_rules";
    cases.push_back(c);
  }
  {
    ForestCase c;
    c.options.max_depth = 9;
    c.options.num_outputs = 4;
    c.options.vector_leaves = true;
    c.options.num_trees = 8;
    c.options.extreme_cover_probability = 0.2;
    c.options.seed = 9;
    c.shap_rows = 64;
    c.interaction_rows = 6;
    c.name = "vector_leaves";
    cases.push_back(c);
  }
  {
    ForestCase c;
    c.options.max_depth = 30;
    c.options.num_trees = 3;
    c.options.num_features = 60;
    c.options.leaf_probability = 0.33;
    c.options.extreme_cover_probability = 0.5;
    c.options.seed = 31;
    c.shap_rows = 32;
    c.interaction_rows = 2;
    c.name = "depth30_bushy_extreme";
    cases.push_back(c);
  }
  return cases;
}

TEST(QuadratureCpuTest, RandomForestsMatchTheReferenceUpToDepth30) {
  ThreadPool pool(2);
  for (const ForestCase& fc : RandomCases()) {
    SCOPED_TRACE(fc.name);
    ForestPtr f = MakeRandomForest(fc.options);
    QuadratureModelPtr model = Build(f);
    ASSERT_NE(model, nullptr);
    const std::vector<float> x = MakeRandomRows(*f, fc.shap_rows, fc.options.seed + 1000, 0.1);
    const std::vector<float> ref = ReferenceExplanation(*f, x, false, &pool, 0, 0, fc.shap_rows);
    const std::vector<double> margins = Margins(*f, ref, fc.shap_rows);
    const std::vector<float> got = Quadrature(*model, x, fc.shap_rows, false, &pool);
    const Compared shap = Compare(*f, got, ref, margins, fc.shap_rows, false);
    EXPECT_LE(shap.max_error, kTolerance) << "SHAP " << shap.ToString();

    const int64_t ni = fc.interaction_rows;
    const std::vector<float> iref = ReferenceExplanation(*f, x, true, &pool, 0, 0, ni);
    const std::vector<float> igot = Quadrature(*model, x, ni, true, &pool);
    const Compared inter = Compare(*f, igot, iref, margins, ni, true);
    EXPECT_LE(inter.max_error, kTolerance) << "interactions " << inter.ToString();
    std::printf("  %-28s max unique %2d  SHAP err %.2e  interactions err %.2e  (%s)\n",
                fc.name.c_str(), model->max_unique, shap.max_error, inter.max_error,
                model->Describe().c_str());
  }
}

TEST(QuadratureCpuTest, IterationRangesAndDeterminism) {
  RandomForestOptions options;
  options.max_depth = 7;
  options.num_outputs = 2;
  options.num_trees = 24;
  options.extreme_cover_probability = 0.2;
  options.seed = 77;
  ForestPtr f = MakeRandomForest(options);
  QuadratureModelPtr model = Build(f);
  ASSERT_NE(model, nullptr);
  const int64_t rows = 40;
  const std::vector<float> x = MakeRandomRows(*f, rows, 5);
  ThreadPool pool(2);
  for (bool interactions : {false, true}) {
    const int64_t width = ExplainWidth(*f, interactions);
    ExplainOptions o;
    o.interactions = interactions;
    o.iteration_begin = 3;
    o.iteration_end = 9;
    std::vector<float> got(rows * width), got2(rows * width), ref(rows * width);
    ASSERT_TRUE(ExplainQuadratureCpu(*model, MakeRowsView(x.data(), rows, f->num_features), o,
                                     MakeMatrixView(got.data(), rows, width), &pool)
                    .ok());
    ASSERT_TRUE(ExplainQuadratureCpu(*model, MakeRowsView(x.data(), rows, f->num_features), o,
                                     MakeMatrixView(got2.data(), rows, width), nullptr)
                    .ok());
    ASSERT_TRUE(ExplainCpuReference(*f, MakeRowsView(x.data(), rows, f->num_features), o,
                                    MakeMatrixView(ref.data(), rows, width), &pool)
                    .ok());
    EXPECT_EQ(got, got2) << "not deterministic";
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], ref[i], 1e-5 * std::max(1.0f, std::abs(ref[i]))) << i;
    }
  }
  // Argument errors.
  std::vector<float> out(10);
  ExplainOptions bad;
  bad.iteration_begin = 100;
  EXPECT_FALSE(ExplainQuadratureCpu(*model, MakeRowsView(x.data(), 1, f->num_features), bad,
                                    MakeMatrixView(out.data(), 1, 10), nullptr)
                   .ok());
}

// The tree program (SHAP values and interactions by recursions per tree) against the per-path
// kernels, which apply the same rules path by path, on forests with repeated features, categorical and
// LightGBM rules, extreme skew and zero covers (children and parents: fractions of 0). Both are
// double-precision rearrangements of one sum, so they agree far inside the spec; each row's
// values are the same bits whether it is explained alone or inside a block of rows.
TEST(QuadratureTreeProgramTest, MatchesThePerPathKernelWithZeroCovers) {
  ThreadPool pool(2);
  for (uint64_t seed : {11, 12, 13}) {
    SCOPED_TRACE(seed);
    RandomForestOptions options;
    options.max_depth = 9;
    options.num_trees = 12;
    options.num_features = 6;
    options.num_outputs = 2;
    options.categorical_fraction = 0.2;
    options.extreme_cover_probability = 0.2;
    options.lightgbm_rules = seed == 13;
    options.seed = seed;
    Forest copy = *MakeRandomForest(options);
    uint64_t state = seed;
    for (Node& node : copy.nodes) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      if ((state >> 60) == 0) node.cover = 0;  // 1 node in 16
    }
    absl::StatusOr<ForestPtr> f = BuildForest(std::move(copy));
    ASSERT_TRUE(f.ok()) << f.status();
    QuadratureModelPtr model = Build(*f);
    ASSERT_NE(model, nullptr);
    ASSERT_NE(model->tree_program, nullptr);
    ASSERT_FALSE(model->tree_program->trees.empty());
    auto per_path = std::make_shared<QuadratureModel>(*model);
    per_path->tree_program = nullptr;
    const int64_t rows = 37;  // not a multiple of the kernel's blocks
    const std::vector<float> x = MakeRandomRows(**f, rows, seed + 100, 0.1);
    const std::vector<float> got = Quadrature(*model, x, rows, false, &pool);
    const std::vector<float> path = Quadrature(*per_path, x, rows, false, &pool);
    const std::vector<float> ref = ReferenceExplanation(**f, x, false, &pool, 0, 0, rows);
    const std::vector<double> margins = Margins(**f, ref, rows);
    const Compared vs_path = Compare(**f, got, path, margins, rows, false);
    EXPECT_LE(vs_path.max_error, 1e-7) << "tree program vs per path " << vs_path.ToString();
    const Compared vs_ref = Compare(**f, got, ref, margins, rows, false);
    EXPECT_LE(vs_ref.max_error, kTolerance) << "tree program vs reference " << vs_ref.ToString();
    // Interactions: the tree program's conditioned passes against the per-path kernel.
    const int64_t ni = 13;
    const std::vector<float> igot = Quadrature(*model, x, ni, true, &pool);
    const std::vector<float> ipath = Quadrature(*per_path, x, ni, true, &pool);
    const std::vector<float> iref = ReferenceExplanation(**f, x, true, &pool, 0, 0, ni);
    const Compared ivs_path = Compare(**f, igot, ipath, margins, ni, true);
    EXPECT_LE(ivs_path.max_error, 1e-7) << "interactions vs per path " << ivs_path.ToString();
    const Compared ivs_ref = Compare(**f, igot, iref, margins, ni, true);
    EXPECT_LE(ivs_ref.max_error, kTolerance) << "interactions vs reference " << ivs_ref.ToString();
    for (bool interactions : {false, true}) {
      const int64_t width = ExplainWidth(**f, interactions);
      const std::vector<float>& batch = interactions ? igot : got;
      for (int64_t r = 0; r < (interactions ? ni : rows); ++r) {
        const std::vector<float> one(x.begin() + r * (*f)->num_features,
                                     x.begin() + (r + 1) * (*f)->num_features);
        const std::vector<float> alone = Quadrature(*model, one, 1, interactions, nullptr);
        ASSERT_EQ(0, std::memcmp(alone.data(), batch.data() + r * width, width * sizeof(float)))
            << "row " << r << " alone differs from the same row in a block";
      }
    }
  }
}

// The pair kernel (interactions of every path the tree program does not take) on trees with more
// features than one local matrix holds (several groups per tree), paths longer than its unrolled
// lengths, scalar and vector leaves, against the reference; (i, j) and (j, i) are the same bits,
// and a row's values are the same alone and in a batch on several threads.
TEST(QuadraturePairProgramTest, WideDeepTreesMatchTheReference) {
  ThreadPool pool(2);
  for (bool vector_leaves : {false, true}) {
    SCOPED_TRACE(vector_leaves);
    RandomForestOptions options;
    options.max_depth = 12;
    options.num_trees = 4;
    options.num_features = 400;
    options.num_outputs = vector_leaves ? 3 : 2;
    options.vector_leaves = vector_leaves;
    options.leaf_probability = 0.03;
    options.categorical_fraction = 0.1;
    options.extreme_cover_probability = 0.1;
    options.seed = vector_leaves ? 52 : 51;
    ForestPtr f = MakeRandomForest(options);
    QuadratureModelPtr built = Build(f);
    ASSERT_NE(built, nullptr);
    ASSERT_NE(built->pair_program, nullptr);
    auto model = std::make_shared<QuadratureModel>(*built);
    model->tree_program = nullptr;  // every path through the pair kernel
    const QuadraturePairProgram& program = *model->pair_program;
    EXPECT_GT(program.groups.size(), 2 * f->trees.size()) << "no tree was split into groups";
    EXPECT_LE(program.max_local, std::max(kQuadraturePairLocalFeatures, program.max_unique));
    EXPECT_GT(program.max_unique, 8) << "no path longer than the unrolled lengths";
    const int64_t rows = 3;
    const std::vector<float> x = MakeRandomRows(*f, rows, options.seed + 1000, 0.1);
    const std::vector<float> ref = ReferenceExplanation(*f, x, true, &pool, 0, 0, rows);
    const std::vector<float> shap_ref = ReferenceExplanation(*f, x, false, &pool, 0, 0, rows);
    const std::vector<double> margins = Margins(*f, shap_ref, rows);
    const std::vector<float> got = Quadrature(*model, x, rows, true, &pool);
    const Compared vs_ref = Compare(*f, got, ref, margins, rows, true);
    EXPECT_LE(vs_ref.max_error, kTolerance) << vs_ref.ToString();
    const int64_t f1 = f->num_features + 1;
    const int64_t width = ExplainWidth(*f, true);
    for (int64_t r = 0; r < rows; ++r) {
      for (int k = 0; k < f->num_outputs; ++k) {
        const float* m = got.data() + r * width + k * f1 * f1;
        for (int64_t i = 0; i < f1; ++i) {
          for (int64_t j = 0; j < i; ++j) {
            ASSERT_EQ(m[i * f1 + j], m[j * f1 + i]) << "row " << r << " output " << k;
          }
        }
      }
      const std::vector<float> one(x.begin() + r * f->num_features,
                                   x.begin() + (r + 1) * f->num_features);
      const std::vector<float> alone = Quadrature(*model, one, 1, true, nullptr);
      ASSERT_EQ(0, std::memcmp(alone.data(), got.data() + r * width, width * sizeof(float)))
          << "row " << r << " alone differs from the same row in a batch";
    }
    std::printf("  vector leaves %d: %zu groups for %zu trees, max local %d, max unique %d, "
                "err %.2e\n",
                vector_leaves, program.groups.size(), f->trees.size(), program.max_local,
                program.max_unique, vs_ref.max_error);
  }
}

// `forest` with every other tree's leaves scaled by 2^26 and a negated copy of each such tree
// appended in a later round: the scaled trees cancel exactly, so entries that only they reach are
// rounding residues of 2^26-sized sums, whose float bits depend on the order of the additions.
ForestPtr WithCancellingTrees(const Forest& forest) {
  Forest copy = forest;
  const size_t num_trees = copy.trees.size();
  for (size_t t = 0; t < num_trees; t += 2) {
    Tree tree = copy.trees[t];
    const uint32_t begin = static_cast<uint32_t>(copy.nodes.size());
    for (uint32_t i = 0; i < tree.num_nodes; ++i) {
      Node node = copy.nodes[tree.node_begin + i];
      if (node.is_leaf()) {
        const uint32_t first = node.payload;
        for (int k = 0; k < tree.leaf_width; ++k) {
          copy.leaf_values[first + k] = std::ldexp(copy.leaf_values[first + k], 26);
        }
        node.payload = static_cast<uint32_t>(copy.leaf_values.size());
        for (int k = 0; k < tree.leaf_width; ++k) {
          copy.leaf_values.push_back(-copy.leaf_values[first + k]);
        }
      }
      copy.nodes.push_back(node);
    }
    tree.node_begin = begin;
    tree.iteration += forest.num_iterations;
    copy.trees.push_back(tree);
  }
  absl::StatusOr<ForestPtr> built = BuildForest(std::move(copy));
  EXPECT_TRUE(built.ok()) << built.status();
  return built.ok() ? *built : nullptr;
}

// Small batches split a row's interaction values between threads (by class and segments of its
// trees where the pair kernel explains every tree, by ranges of matrix rows where the tree
// program does): every entry is still summed in one order, so 1, 2, 3 and 16 threads give the
// same bits as no pool, at every small row count. The forests have cancelling trees
// (WithCancellingTrees), so that a reduction whose order followed the threads changes the float
// results.
TEST(QuadratureCpuTest, SmallBatchesGiveTheSameBitsOnEveryThreadCount) {
  struct Config {
    const char* name;
    int num_features, num_outputs;
    bool vector_leaves, tree_program;
    int units_per_row;  // QuadraturePairUnitsPerRow
    int num_trees = 0;  // 0: 16 per output (16 with vector leaves)
    bool one_group = false;  // the tree program's trees are one interaction group
  };
  // "tree program": few rows on many threads run its tree groups as tasks of their own (groups
  // of outputs for two outputs, of consecutive trees for one). "One group": a wide model whose
  // trees are one interaction group, its few rows cut into ranges of matrix rows beside a task
  // of the block's own SHAP pass that sets the diagonals (13 rows on one thread: each range runs
  // the pass itself), and six trees of two outputs, one group. The last: 400 features x 2
  // outputs, a block's accumulators 20 MB, computed in ranges that fit the cache (more than one
  // with any thread count), the bias row in the last.
  const Config configs[] = {{"classes by the pair kernel", 60, 4, false, false, 4},
                            {"vector leaves by the pair kernel", 60, 3, true, false, 1},
                            {"tree program", 8, 2, false, true, 0},
                            {"tree program, one output", 12, 1, false, true, 0},
                            {"tree program, one group", 90, 1, false, true, 0, 96, true},
                            {"tree program, one group of two outputs", 20, 2, false, true, 0, 6,
                             true},
                            {"tree program in cache-sized ranges", 400, 2, false, true, 0}};
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (int threads : {1, 2, 3, 16}) pools.push_back(std::make_unique<ThreadPool>(threads - 1));
  for (const Config& c : configs) {
    SCOPED_TRACE(c.name);
    RandomForestOptions options;
    options.max_depth = 8;
    options.num_trees = c.num_trees > 0 ? c.num_trees : c.vector_leaves ? 16 : 16 * c.num_outputs;
    options.num_features = c.num_features;
    options.num_outputs = c.num_outputs;
    options.vector_leaves = c.vector_leaves;
    options.categorical_fraction = 0.1;
    options.extreme_cover_probability = 0.1;
    options.seed = 91;
    ForestPtr f = WithCancellingTrees(*MakeRandomForest(options));
    ASSERT_NE(f, nullptr);
    QuadratureModelPtr built = Build(f);
    ASSERT_NE(built, nullptr);
    auto model = std::make_shared<QuadratureModel>(*built);
    if (!c.tree_program) model->tree_program = nullptr;
    ASSERT_EQ(model->tree_program != nullptr &&
                  QuadratureTreeServesInteractions(*model->tree_program),
              c.tree_program);
    EXPECT_EQ(QuadraturePairUnitsPerRow(*model), c.units_per_row);
    if (c.units_per_row > 0) {
      // One row on 16 threads cuts its units into segments; enough rows do not.
      EXPECT_GT(QuadraturePairSegmentsPerTask(*model, 1, 16), 1);
      EXPECT_EQ(QuadraturePairSegmentsPerTask(*model, 16, 16), 1);
    }
    if (c.num_features == 400) {
      EXPECT_GT(
          QuadratureTreeInteractionTasksFor(*model->tree_program, 64 * kQuadratureTreeLanes, 16)
              .ranges,
          1);
    } else if (c.one_group) {
      EXPECT_EQ(QuadratureTreeInteractionGroups(*model->tree_program), 1);
      EXPECT_TRUE(QuadratureTreeDiagonalFromShap(*model->tree_program));
      const QuadratureTreeInteractionTasks one_row =
          QuadratureTreeInteractionTasksFor(*model->tree_program, 1, 16);
      EXPECT_GT(one_row.ranges, 1);
      EXPECT_TRUE(one_row.diagonal_task);
      EXPECT_FALSE(
          QuadratureTreeInteractionTasksFor(*model->tree_program, 64 * kQuadratureTreeLanes, 16)
              .diagonal_task);
    } else if (c.tree_program) {
      const int groups = QuadratureTreeInteractionGroups(*model->tree_program);
      EXPECT_GT(groups, 1);
      EXPECT_FALSE(QuadratureTreeDiagonalFromShap(*model->tree_program));
      EXPECT_EQ(QuadratureTreeInteractionTasksFor(*model->tree_program, 1, 16).group_tasks, groups);
      EXPECT_EQ(QuadratureTreeInteractionTasksFor(*model->tree_program, 1, 1).group_tasks, 1);
    }
    const int64_t width = ExplainWidth(*f, true);
    const int64_t max_rows = 13;
    const std::vector<float> x = MakeRandomRows(*f, max_rows, 17, 0.1);
    const std::vector<float> ref = ReferenceExplanation(*f, x, true, nullptr, 0, 0, max_rows);
    const std::vector<float> serial = Quadrature(*model, x, max_rows, true, nullptr);
    // Against the reference, relative to each matrix's largest entry (the margins can cancel).
    const int64_t block = width / f->num_outputs;
    for (int64_t b = 0; b < max_rows * f->num_outputs; ++b) {
      double scale = 0;
      for (int64_t i = b * block; i < (b + 1) * block; ++i) {
        scale = std::max(scale, std::abs(static_cast<double>(ref[i])));
      }
      for (int64_t i = b * block; i < (b + 1) * block; ++i) {
        ASSERT_LE(std::abs(static_cast<double>(serial[i]) - ref[i]), kTolerance * scale)
            << "matrix " << b << " entry " << i - b * block;
      }
    }
    for (int64_t rows : {1, 2, 3, 5, 9, 13}) {  // one block, then a partial second
      for (size_t p = 0; p < pools.size(); ++p) {
        const std::vector<float> got = Quadrature(*model, x, rows, true, pools[p].get());
        ASSERT_EQ(0, std::memcmp(got.data(), serial.data(), rows * width * sizeof(float)))
            << rows << " rows on " << pools[p]->num_threads() + 1 << " threads";
      }
    }
    if (c.tree_program) {
      // Each call runs the plan its planner makes (the ranges as cut).
      for (int64_t rows : {1, 13}) {
        for (size_t p = 0; p < pools.size(); ++p) {
          const int threads = pools[p]->num_threads() + 1;
          std::vector<float> out(rows * width);
          ExplainOptions options;
          options.interactions = true;
          QuadratureTreeInteractionTasks ran;
          ran.ranges = -1;
          ASSERT_TRUE(ExplainQuadratureCpu(*model, MakeRowsView(x.data(), rows, f->num_features),
                                           options, MakeMatrixView(out.data(), rows, width),
                                           pools[p].get(), nullptr, &ran)
                          .ok());
          const QuadratureTreeInteractionTasks plan =
              QuadratureTreeInteractionTasksFor(*model->tree_program, rows, threads);
          std::vector<int> cut;
          QuadratureTreeMatrixRowRanges(*model->tree_program, plan.ranges, &cut);
          EXPECT_EQ(ran.group_tasks, plan.group_tasks) << rows << " rows, " << threads;
          EXPECT_EQ(ran.ranges, plan.ranges > 1 ? static_cast<int>(cut.size()) - 1 : 1)
              << rows << " rows, " << threads;
          EXPECT_EQ(ran.diagonal_task, plan.diagonal_task) << rows << " rows, " << threads;
        }
      }
    }
    // An iteration range (some groups' trees all outside it, some partly).
    ExplainOptions ranged;
    ranged.interactions = true;
    ranged.iteration_begin = 2;
    ranged.iteration_end = f->num_iterations - 3;
    auto explain_ranged = [&](int64_t rows, ThreadPool* pool) {
      std::vector<float> out(rows * width, -1.0f);
      EXPECT_TRUE(ExplainQuadratureCpu(*model, MakeRowsView(x.data(), rows, f->num_features),
                                       ranged, MakeMatrixView(out.data(), rows, width), pool)
                      .ok());
      return out;
    };
    for (int64_t rows : {1, 9}) {
      const std::vector<float> one = explain_ranged(rows, nullptr);
      ASSERT_NE(0, std::memcmp(one.data(), serial.data(), rows * width * sizeof(float)));
      for (size_t p = 0; p < pools.size(); ++p) {
        const std::vector<float> got = explain_ranged(rows, pools[p].get());
        ASSERT_EQ(0, std::memcmp(got.data(), one.data(), rows * width * sizeof(float)))
            << rows << " rows in an iteration range on " << pools[p]->num_threads() + 1
            << " threads";
      }
    }
  }
}

// SHAP values of fewer blocks than threads run each block's tree groups as tasks of their own and
// add their sums in group order: 1, 2, 3 and 16 threads give the same bits as no pool at every
// small row count (a partial second block included), within the reference's tolerance; and the
// group tasks follow the blocks and threads.
TEST(QuadratureCpuTest, ShapValuesOfFewRowsGiveTheSameBitsOnEveryThreadCount) {
  RandomForestOptions options;
  options.max_depth = 7;
  options.num_trees = 100 * 2;
  options.num_features = 40;
  options.num_outputs = 2;
  options.categorical_fraction = 0.1;
  options.seed = 23;
  ForestPtr f = WithCancellingTrees(*MakeRandomForest(options));
  ASSERT_NE(f, nullptr);
  QuadratureModelPtr model = Build(f);
  ASSERT_NE(model, nullptr);
  ASSERT_NE(model->tree_program, nullptr);
  const QuadratureTreeProgram& program = *model->tree_program;
  const int groups = QuadratureTreeShapGroups(program);
  ASSERT_GT(groups, 1);
  EXPECT_EQ(QuadratureTreeGroupBegin(program, 0), 0);
  EXPECT_EQ(QuadratureTreeGroupBegin(program, groups), static_cast<int>(program.trees.size()));
  EXPECT_EQ(QuadratureTreeShapGroupTasks(program, 1, 16), groups);
  EXPECT_EQ(QuadratureTreeShapGroupTasks(program, 15 * kQuadratureTreeLanes, 16), groups);
  EXPECT_EQ(QuadratureTreeShapGroupTasks(program, 16 * kQuadratureTreeLanes, 16), 1);
  EXPECT_EQ(QuadratureTreeShapGroupTasks(program, 1, 1), 1);

  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (int threads : {1, 2, 3, 16}) pools.push_back(std::make_unique<ThreadPool>(threads - 1));
  const int64_t max_rows = 13;
  const int64_t width = ExplainWidth(*f, false);
  const std::vector<float> x = MakeRandomRows(*f, max_rows, 29, 0.1);
  const std::vector<float> ref = ReferenceExplanation(*f, x, false, nullptr, 0, 0, max_rows);
  const std::vector<float> serial = Quadrature(*model, x, max_rows, false, nullptr);
  for (int64_t r = 0; r < max_rows; ++r) {
    double scale = 0;
    for (int64_t c = 0; c < width; ++c) {
      scale = std::max(scale, std::abs(static_cast<double>(ref[r * width + c])));
    }
    for (int64_t c = 0; c < width; ++c) {
      ASSERT_LE(std::abs(static_cast<double>(serial[r * width + c]) - ref[r * width + c]),
                kTolerance * scale)
          << "row " << r << " column " << c;
    }
  }
  for (int64_t rows : {1, 2, 3, 5, 8, 9, 13}) {
    for (size_t p = 0; p < pools.size(); ++p) {
      const std::vector<float> got = Quadrature(*model, x, rows, false, pools[p].get());
      ASSERT_EQ(0, std::memcmp(got.data(), serial.data(), rows * width * sizeof(float)))
          << rows << " rows on " << pools[p]->num_threads() + 1 << " threads";
    }
  }
}

// Workspaces kept between calls: the same bits as a call's own, for SHAP values and interaction
// values of the tree program and of the pair kernel, one row and many, on a pool and concurrently;
// what a pool keeps stays within its bound (nothing with a bound of 0).
TEST(QuadratureCpuTest, WorkspacesKeptBetweenCallsGiveTheSameBitsWithinTheirBound) {
  RandomForestOptions options;
  options.max_depth = 7;
  options.num_trees = 60;
  options.num_features = 20;
  options.num_outputs = 3;
  options.categorical_fraction = 0.1;
  options.seed = 37;
  ForestPtr f = MakeRandomForest(options);
  ASSERT_NE(f, nullptr);
  QuadratureModelPtr tree_model = Build(f);
  ASSERT_NE(tree_model, nullptr);
  ASSERT_NE(tree_model->tree_program, nullptr);
  auto pair_model = std::make_shared<QuadratureModel>(*tree_model);
  pair_model->tree_program = nullptr;  // every tree by the pair kernel
  ThreadPool pool(3);
  const int64_t max_rows = 40;
  const std::vector<float> x = MakeRandomRows(*f, max_rows, 41, 0.1);
  for (const QuadratureModel* model :
       {tree_model.get(), static_cast<const QuadratureModel*>(pair_model.get())}) {
    for (bool interactions : {false, true}) {
      SCOPED_TRACE(absl::StrCat(model == pair_model.get() ? "pair kernel" : "tree program",
                                interactions ? ", interactions" : ", SHAP values"));
      const int64_t width = ExplainWidth(*f, interactions);
      QuadratureCpuWorkspaces kept;
      QuadratureCpuWorkspaces none(0);
      for (int64_t rows : {int64_t{1}, max_rows, int64_t{3}}) {
        const std::vector<float> own = Quadrature(*model, x, rows, interactions, &pool);
        for (int call = 0; call < 2; ++call) {
          const std::vector<float> a = Quadrature(*model, x, rows, interactions, &pool, &kept);
          const std::vector<float> b = Quadrature(*model, x, rows, interactions, nullptr, &kept);
          const std::vector<float> c = Quadrature(*model, x, rows, interactions, &pool, &none);
          for (const std::vector<float>* got : {&a, &b, &c}) {
            ASSERT_EQ(0, std::memcmp(got->data(), own.data(), rows * width * sizeof(float)))
                << rows << " rows, call " << call;
          }
          EXPECT_GT(kept.RetainedCount(), 0);
          EXPECT_GT(kept.RetainedBytes(), 0);
          EXPECT_LE(kept.RetainedBytes(), QuadratureCpuWorkspaces::kDefaultRetainBytes);
          EXPECT_LE(kept.RetainedCount(), pool.num_threads() + 1);  // at most one per thread
          EXPECT_EQ(none.RetainedCount(), 0);
          EXPECT_EQ(none.RetainedBytes(), 0);
        }
      }
      // Concurrent calls share the kept workspaces (half of them the thread pool too), each
      // with workspaces of its own while it runs.
      std::vector<std::vector<float>> got(4);
      std::vector<std::thread> callers;
      for (size_t t = 0; t < got.size(); ++t) {
        callers.emplace_back([&, t] {
          got[t] = Quadrature(*model, x, max_rows, interactions, t % 2 == 0 ? &pool : nullptr,
                              &kept);
        });
      }
      for (std::thread& t : callers) t.join();
      const std::vector<float> own = Quadrature(*model, x, max_rows, interactions, nullptr);
      for (const std::vector<float>& g : got) {
        ASSERT_EQ(0, std::memcmp(g.data(), own.data(), max_rows * width * sizeof(float)));
      }
      EXPECT_LE(kept.RetainedBytes(), QuadratureCpuWorkspaces::kDefaultRetainBytes);
    }
  }
  // A bound below one workspace keeps none.
  QuadratureCpuWorkspaces tiny(1024);
  (void)Quadrature(*tree_model, x, max_rows, true, &pool, &tiny);
  EXPECT_EQ(tiny.RetainedCount(), 0);
  EXPECT_EQ(tiny.RetainedBytes(), 0);
}

// Interaction groups of a multi-output model split its outputs: consecutive output ranges that
// cover every output once, each group holding exactly the trees of its outputs, in forest order
// within an output; at most one group per output, at least kQuadratureTreesPerInteractionGroup
// trees each.
TEST(QuadratureTreeProgramTest, InteractionGroupsOfSeveralOutputsSplitTheOutputs) {
  for (const auto& [outputs, trees] : {std::pair{5, 40}, std::pair{40, 80}, std::pair{3, 8}}) {
    SCOPED_TRACE(absl::StrCat(outputs, " outputs, ", trees, " trees"));
    RandomForestOptions options;
    options.max_depth = 4;
    options.num_trees = trees;
    options.num_features = 10;
    options.num_outputs = outputs;
    options.seed = 13;
    ForestPtr f = MakeRandomForest(options);
    ASSERT_NE(f, nullptr);
    QuadratureTreeProgramPtr p = BuildQuadratureTreeProgram(*f);
    ASSERT_NE(p, nullptr);
    const int served = static_cast<int>(p->trees.size());
    const int groups = QuadratureTreeInteractionGroups(*p);
    EXPECT_EQ(groups, std::clamp(std::min(outputs, served / kQuadratureTreesPerInteractionGroup),
                                 1, kQuadratureMaxTreeGroups));
    std::vector<int> seen(served, 0);
    int next_output = 0;
    for (int g = 0; g < groups; ++g) {
      const QuadratureTreeGroupSpan span = QuadratureTreeInteractionGroup(*p, g);
      EXPECT_EQ(span.output_begin, next_output);
      EXPECT_LT(span.output_begin, span.output_end);
      next_output = span.output_end;
      int previous = -1;
      for (int o = span.order_begin; o < span.order_end; ++o) {
        const int ti = p->output_order[o];
        ++seen[ti];
        EXPECT_GE(p->trees[ti].output, span.output_begin);
        EXPECT_LT(p->trees[ti].output, span.output_end);
        EXPECT_EQ(p->trees[ti].output, f->trees[p->trees[ti].tree].group);
        if (previous >= 0 && p->trees[previous].output == p->trees[ti].output) {
          EXPECT_LT(previous, ti);  // forest order within an output
        }
        previous = ti;
      }
    }
    EXPECT_EQ(next_output, outputs);
    for (int ti = 0; ti < served; ++ti) EXPECT_EQ(seen[ti], 1) << ti;
  }
}

// Few rows on many threads split each block's matrix rows into ranges of about equal conditioned
// work: every step of the program belongs to its feature's count; the ranges cover the matrix
// rows in order, each non-empty; a feature that carries most of the work gets a range of its own;
// and the split count follows the blocks and threads.
TEST(QuadratureTreeProgramTest, MatrixRowRangesFollowTheConditionedWork) {
  RandomForestOptions options;
  options.max_depth = 6;
  options.num_trees = 40;
  options.num_features = 30;
  options.seed = 5;
  ForestPtr f = MakeRandomForest(options);
  ASSERT_NE(f, nullptr);
  QuadratureTreeProgramPtr built = BuildQuadratureTreeProgram(*f);
  ASSERT_NE(built, nullptr);
  ASSERT_TRUE(QuadratureTreeServesInteractions(*built));
  ASSERT_EQ(built->condition_steps.size(), 30u);
  int64_t steps = 0;
  for (int64_t c : built->condition_steps) steps += c;
  EXPECT_EQ(steps, static_cast<int64_t>(built->steps.size()));

  auto check = [](const QuadratureTreeProgram& p, int parts, int want_parts) {
    std::vector<int> bounds;
    QuadratureTreeMatrixRowRanges(p, parts, &bounds);
    ASSERT_EQ(bounds.size(), static_cast<size_t>(want_parts + 1)) << parts << " parts";
    EXPECT_EQ(bounds.front(), 0);
    EXPECT_EQ(bounds.back(), p.num_features + 1);
    for (int k = 0; k < want_parts; ++k) EXPECT_LT(bounds[k], bounds[k + 1]) << k;
  };
  for (int parts : {1, 2, 3, 7, 16, 30}) check(*built, parts, parts);
  check(*built, 100, 30);  // at most one part per feature row (the bias row ends the last)
  check(*built, 0, 1);

  // Feature 12 carries nine tenths of the work: it is a range alone, and the rows on either side
  // share the other parts.
  // (A program's steps are its features' conditioned steps: the copies keep that.)
  QuadratureTreeProgram skewed = *built;
  std::fill(skewed.condition_steps.begin(), skewed.condition_steps.end(), 10);
  skewed.condition_steps[12] = 9 * 10 * 29;
  skewed.steps.resize(10 * 29 + 9 * 10 * 29);
  std::vector<int> bounds;
  QuadratureTreeMatrixRowRanges(skewed, 4, &bounds);
  ASSERT_EQ(bounds.size(), 5u);
  EXPECT_NE(std::find(bounds.begin(), bounds.end(), 12), bounds.end());
  EXPECT_NE(std::find(bounds.begin(), bounds.end(), 13), bounds.end());
  // Equal work: equal rows.
  std::fill(skewed.condition_steps.begin(), skewed.condition_steps.end(), 10);
  skewed.steps.resize(10 * 30);
  QuadratureTreeMatrixRowRanges(skewed, 5, &bounds);
  EXPECT_EQ(bounds, (std::vector<int>{0, 6, 12, 18, 24, 31}));

  // Tasks for threads: only with fewer than twice as many blocks of kQuadratureTreeLanes rows
  // as threads; then as many as pay for the SHAP pass each range repeats, at most one range per
  // row, or the tree groups where ranges cannot spread the work.
  auto tasks = [](const QuadratureTreeProgram& p, int64_t rows, int threads) {
    const QuadratureTreeInteractionTasks t = QuadratureTreeInteractionTasksFor(p, rows, threads);
    return std::make_pair(t.group_tasks, t.ranges);
  };
  using Tasks = std::pair<int, int>;
  EXPECT_EQ(tasks(*built, 32 * kQuadratureTreeLanes, 16), Tasks(1, 1));
  EXPECT_EQ(tasks(*built, 10, 1), Tasks(1, 1));
  EXPECT_EQ(tasks(*built, 1, 1), Tasks(1, 1));
  EXPECT_EQ(tasks(*built, 0, 16), Tasks(1, 1));
  QuadratureTreeProgram conditioned = *built;  // conditioned passes far above the SHAP pass
  conditioned.edges.resize(1);
  conditioned.steps.resize(1 << 20);
  const int groups = QuadratureTreeInteractionGroups(conditioned);
  ASSERT_EQ(groups, static_cast<int>(built->trees.size()) / kQuadratureTreesPerInteractionGroup);
  ASSERT_EQ(groups, 8);
  // Each group holds kQuadratureStepsPerGroupCell steps of the walk per cell of the matrices.
  QuadratureTreeProgram few_steps = *built;
  const int64_t cells = int64_t{built->num_features + 1} * (built->num_features + 1);
  few_steps.edges.resize(1);
  few_steps.steps.resize(3 * kQuadratureStepsPerGroupCell * cells / 2);
  EXPECT_EQ(QuadratureTreeInteractionGroups(few_steps), 3);
  few_steps.steps.resize(few_steps.steps.size() - 1);
  EXPECT_EQ(QuadratureTreeInteractionGroups(few_steps), 2);
  EXPECT_EQ(tasks(conditioned, 1, 16), Tasks(1, 16));  // one round of 16 threads
  EXPECT_EQ(tasks(conditioned, 10, 16), Tasks(1, 8));  // two blocks
  // One feature with half the conditioned passes: a range cannot hold less, so the groups
  // spread the work instead (8 groups x 2 ranges: 16 tasks of a sixteenth each, against 16
  // ranges of a half).
  conditioned.max_condition_steps = (1 << 20) / 2;
  EXPECT_EQ(tasks(conditioned, 1, 16), Tasks(groups, 2));
  EXPECT_EQ(tasks(conditioned, 1, 8), Tasks(groups, 1));
  conditioned.max_condition_steps = built->max_condition_steps;
  conditioned.num_features = 3;  // at most one range per feature row; then groups of them
  EXPECT_EQ(tasks(conditioned, 1, 16), Tasks(groups, 2));
  EXPECT_EQ(tasks(conditioned, 1, 3), Tasks(1, 3));
  QuadratureTreeProgram shap_bound = *built;  // the SHAP pass far above the conditioned ones
  shap_bound.edges.resize(1 << 20);
  shap_bound.steps.resize(1);
  EXPECT_EQ(tasks(shap_bound, 1, 16).second, 1);
  // Cache: a block's accumulators of 500 features (16 MB) in ranges of at most
  // kQuadratureShareBytes, with many blocks too; 100 outputs of 32 features (6.8 MB) in two.
  QuadratureTreeProgram wide = *built;
  wide.num_features = 500;
  EXPECT_EQ(QuadratureTreeInteractionGroups(wide), 1);  // too few steps per cell for two groups
  EXPECT_EQ(tasks(wide, 32 * kQuadratureTreeLanes, 16), Tasks(1, 4));
  EXPECT_EQ(tasks(wide, kQuadratureTreeLanes, 1), Tasks(1, 4));
  wide.num_features = 32;
  wide.num_outputs = 100;
  EXPECT_EQ(tasks(wide, 32 * kQuadratureTreeLanes, 16), Tasks(1, 2));
}

// One caterpillar tree of `depth` distinct features: at every level one child is a leaf and the
// other continues the spine with 1e-6 of the parent's cover (extreme skew). The deepest leaf has
// value `deep_value`; base_margin = -deep_value, so rows that follow the whole spine have margin 0
// (a base score cancelling the tree, as happens in real models) and the tolerance is absolute.
ForestPtr CaterpillarForest(int depth, double deep_value) {
  HandForest h(depth);
  std::vector<Node> nodes;
  double cover = 1e12;
  for (int i = 0; i < depth; ++i) {
    const double leaf_cover = cover * (1 - 1e-6);
    const double next_cover = cover - leaf_cover;
    const bool leaf_left = i % 2 == 0;
    const int split = static_cast<int>(nodes.size());
    const int leaf = split + 1, next = split + 2;
    nodes.push_back(h.Split(i, 0.5f, leaf_left ? leaf : next, leaf_left ? next : leaf, cover));
    nodes.push_back(h.Leaf((i % 2 == 0 ? 1.0 : -1.5) * (1 + 0.1 * i), leaf_cover));
    cover = next_cover;
  }
  nodes.push_back(h.Leaf(deep_value, cover));
  h.AddTree(nodes);
  h.forest.base_margin = {-deep_value};
  return h.Build();
}

// Exact int_0^1 prod_j (z_j + t d_j) dt over j != skip, independently of any quadrature: each
// factor is z_j (1 - t) + o_j t, so the product in the Bernstein basis t^k (1 - t)^(m - k) has
// non-negative coefficients (no cancellation), and int t^k (1 - t)^(m - k) dt = k! (m - k)! / (m + 1)!
// -- the Shapley-weight sum by subset size, in long double.
long double ExactIntegral(const std::vector<double>& z, const std::vector<double>& d, int skip) {
  std::vector<long double> c(1, 1.0L);
  for (size_t j = 0; j < z.size(); ++j) {
    if (static_cast<int>(j) == skip) continue;
    const long double zero = z[j], one = static_cast<long double>(z[j]) + d[j];
    std::vector<long double> next(c.size() + 1, 0.0L);
    for (size_t k = 0; k < c.size(); ++k) {
      next[k] += c[k] * zero;
      next[k + 1] += c[k] * one;
    }
    c.swap(next);
  }
  const int m = static_cast<int>(c.size()) - 1;
  long double total = 0;
  for (int k = 0; k <= m; ++k) {
    long double beta = 1.0L / (m + 1);  // k! (m - k)! / (m + 1)! = 1 / ((m + 1) C(m, k))
    for (int i = 1; i <= k; ++i) beta *= static_cast<long double>(i) / (m - k + i);
    total += c[k] * beta;
  }
  return total;
}

TEST(QuadratureLeaveOneOutTest, PerPathWeightsOfDeepSkewedPaths) {
  // 30 unique features, covers of 1e-6 or 1 - 1e-6 of the parent: the
  // fixed 8-point rule (exact to degree 15) misses the Shapley weight sums by far more than 1e-5;
  // the per-path rule is exact to rounding.
  uint64_t state = 99;
  double worst_fixed = 0, worst_grove = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 30;
    std::vector<double> z(n), d(n);
    for (int j = 0; j < n; ++j) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      // Mostly the row goes the low-cover way (z = 1e-6, o = 1: factor ~ t) or misses the
      // high-cover way (z = 1 - 1e-6, o = 0: factor ~ 1 - t): integrands ~ t^a (1 - t)^b.
      const double o = (state >> 50) % 2 ? 1.0 : 0.0;
      const bool typical = (state >> 40) % 5 != 0;
      z[j] = (o == 1.0) == typical ? 1e-6 : 1 - 1e-6;
      d[j] = o - z[j];
    }
    std::vector<double> pre(n), acc(n);
    for (int q : {8, QuadraturePoints(n)}) {
      const GaussLegendreRule rule = GaussLegendre01(q);
      QuadratureLeaveOneOut<0, double>(z.data(), d.data(), n, -1, rule.nodes.data(),
                                       rule.weights.data(), q, pre.data(), acc.data());
      for (int i = 0; i < n; ++i) {
        const double exact = static_cast<double>(ExactIntegral(z, d, i));
        if (exact < 1e-12) continue;  // negligible weights
        const double rel = std::abs(acc[i] - exact) / exact;
        (q == 8 ? worst_fixed : worst_grove) = std::max(q == 8 ? worst_fixed : worst_grove, rel);
      }
    }
  }
  std::printf("  per-path weight relative error, 30 features: fixed 8-point %.2e, Grove %.2e\n",
              worst_fixed, worst_grove);
  EXPECT_GT(worst_fixed, 1e-5);
  EXPECT_LT(worst_grove, 1e-12);
}

TEST(QuadratureCpuTest, FixedEightPointRuleFailsOnDeepSkewedPathsWhereGroveIsExact) {
  ThreadPool pool(2);
  double worst_fixed = 0, worst_grove = 0;
  auto check = [&](ForestPtr f, const std::vector<float>& x, int64_t rows, const char* name) {
    QuadratureModelPtr model = Build(f);
    ASSERT_NE(model, nullptr);
    const std::vector<float> ref = ReferenceExplanation(*f, x, false, &pool, 0, 0, rows);
    const std::vector<double> margins = Margins(*f, ref, rows);
    const Compared grove = Compare(*f, Quadrature(*model, x, rows, false, &pool), ref, margins,
                                   rows, false);
    QuadratureModelPtr fixed = WithFixedRule(*model, 8);
    const Compared eight = Compare(*f, Quadrature(*fixed, x, rows, false, &pool), ref, margins,
                                   rows, false);
    std::printf("  %-24s max unique %2d  Grove (Q = ceil(n/2) per path) err %.2e   fixed 8-point "
                "err %.2e\n",
                name, model->max_unique, grove.max_error, eight.max_error);
    EXPECT_LE(grove.max_error, kTolerance) << name << " " << grove.ToString();
    worst_fixed = std::max(worst_fixed, eight.max_error);
    worst_grove = std::max(worst_grove, grove.max_error);
  };
  for (int depth : {24, 30}) {
    ForestPtr f = CaterpillarForest(depth, 50.0);
    // Row r follows the spine (the low-cover side at most levels) down to level r % (depth + 1),
    // then leaves it: the rows that reach deep leaves have integrands of degree up to depth - 1
    // with factors close to t.
    const int64_t rows = 2 * (depth + 1);
    std::vector<float> x(rows * depth);
    for (int64_t r = 0; r < rows; ++r) {
      const int stop = static_cast<int>(r % (depth + 1));
      for (int j = 0; j < depth; ++j) {
        const bool next_is_right = j % 2 == 0;  // even levels: the leaf is the left child
        const bool follow = j < stop || (r >= depth + 1 && j > stop);
        x[r * depth + j] = (follow == next_is_right) ? 1.0f : 0.0f;
      }
    }
    check(f, x, rows, depth == 24 ? "caterpillar depth 24" : "caterpillar depth 30");
  }
  RandomForestOptions options;
  options.max_depth = 30;
  options.num_trees = 4;
  options.num_features = 60;
  options.leaf_probability = 0.35;
  options.extreme_cover_probability = 0.5;
  options.seed = 2024;
  ForestPtr f = MakeRandomForest(options);
  check(f, MakeRandomRows(*f, 64, 3), 64, "random depth 30 extreme");
  // The fixed rule is exact only up to degree 15: on these paths it misses the tolerance.
  EXPECT_GT(worst_fixed, kTolerance) << "a fixed 8-point rule should fail here";
  EXPECT_LE(worst_grove, kTolerance);
}

TEST(QuadratureCorpusTest, EveryCaseMatchesTheReference) {
  const std::vector<std::string> dirs = testing::CorpusCaseDirs();
  if (dirs.empty()) GTEST_SKIP() << "no corpus found";
  ThreadPool pool(2);
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    absl::StatusOr<testing::CorpusModel> m = testing::LoadCorpusModel(dir);
    ASSERT_TRUE(m.ok()) << m.status();
    const testing::CorpusCase& c = m->c;
    const ForestPtr& f = m->forest;
    if (!CheckExplainable(*f).ok()) continue;  // LightGBM linear trees: refused by every engine
    QuadratureModelPtr model = Build(f);
    ASSERT_NE(model, nullptr);
    const int64_t rows = std::min<int64_t>(c.rows, 200);
    const std::vector<float> ref = ReferenceExplanation(*f, c.X, false, &pool, 0, 0, rows);
    const std::vector<double> margins = Margins(*f, ref, rows);
    const Compared shap = Compare(*f, Quadrature(*model, c.X, rows, false, &pool), ref, margins,
                                  rows, false);
    EXPECT_LE(shap.max_error, kTolerance) << "SHAP " << shap.ToString();
    const int64_t ni = std::min<int64_t>(rows, 10);
    const std::vector<float> iref = ReferenceExplanation(*f, c.X, true, &pool, 0, 0, ni);
    const Compared inter = Compare(*f, Quadrature(*model, c.X, ni, true, &pool), iref, margins,
                                   ni, true);
    EXPECT_LE(inter.max_error, kTolerance) << "interactions " << inter.ToString();
    std::printf("  %-32s SHAP err %.2e  interactions err %.2e  %s\n", c.name.c_str(),
                shap.max_error, inter.max_error, model->Describe().c_str());
  }
}

// The strategy's estimate of interaction values plans a call's tasks as the call does: from the
// paths of the call's iteration range (a round whose tree the tree program does not take, here a
// vector-leaf tree, makes the call run per row without splitting its blocks; a range without it
// splits them).
TEST(QuadratureStrategyTest, CpuEstimatePlansTheCallsIterationRange) {
  HandForest h(4, 2);
  for (int round = 0; round < 8; ++round) {
    for (int group = 0; group < 2; ++group) {
      h.AddTree({h.Split(round % 4, 0.5f, 1, 2, 10), h.Split((round + 1) % 4, 0.5f, 3, 4, 6),
                 h.Split((round + 2) % 4, 0.5f, 5, 6, 4), h.Leaf(1.0 + round, 2),
                 h.Leaf(2.0 - group, 4), h.Leaf(3.0, 1), h.Leaf(-5.0, 3)},
                group, 1.0, 1, round);
    }
  }
  // Round 8: a vector-leaf tree, which the tree program does not take.
  h.AddTree({h.Split(1, 0.5f, 1, 2, 10), h.Leaf({0.5, -0.5}, 6), h.Leaf({1.5, 0.25}, 4)}, 0, 1.0,
            2, 8);
  ForestPtr f = h.Build();
  QuadratureModelPtr model = Build(f);
  ASSERT_NE(model, nullptr);
  ASSERT_NE(model->tree_program, nullptr);
  bool unserved_path = false;
  for (const QuadraturePath& path : model->paths) {
    unserved_path |= path.iteration == 8 && model->tree_program->served[path.tree] == 0;
  }
  ASSERT_TRUE(unserved_path) << "round 8's vector-leaf tree has paths the program does not take";
  ThreadPool pool(15);
  absl::StatusOr<std::unique_ptr<QuadratureStrategy>> s = MakeQuadratureCpuStrategy(model, &pool);
  ASSERT_TRUE(s.ok()) << s.status();
  ExplainOptions all, served;
  all.interactions = served.interactions = true;
  served.iteration_end = 8;
  // One row on 16 threads: the served range is planned in ranges and groups spread over the
  // threads, the whole model as one block on one thread, which the estimate must price higher.
  const QuadratureTreeInteractionTasks plan =
      QuadratureTreeInteractionTasksFor(*model->tree_program, 1, 16);
  ASSERT_GT(plan.ranges * plan.group_tasks, 1);
  EXPECT_LT((*s)->EstimateSeconds(1, served), (*s)->EstimateSeconds(1, all));
}

TEST(QuadratureStrategyTest, CpuStrategyRunsAndEstimates) {
  ForestPtr f = MakeRandomForest({.max_depth = 6, .seed = 3});
  QuadratureModelPtr model = Build(f);
  ASSERT_NE(model, nullptr);
  ThreadPool pool(2);
  absl::StatusOr<std::unique_ptr<QuadratureStrategy>> s = MakeQuadratureCpuStrategy(model, &pool);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->name(), "quadrature_cpu");
  ExplainOptions o;
  EXPECT_GT((*s)->EstimateSeconds(1000, o), (*s)->EstimateSeconds(10, o));
  const int64_t rows = 16;
  const std::vector<float> x = MakeRandomRows(*f, rows, 1);
  std::vector<float> out(rows * ExplainWidth(*f, false));
  RunInfo info;
  ASSERT_TRUE((*s)->Run(MakeRowsView(x.data(), rows, f->num_features), o,
                        MakeMatrixView(out.data(), rows, ExplainWidth(*f, false)), &info)
                  .ok());
  EXPECT_EQ(info.strategy, "quadrature_cpu");
  const std::vector<float> ref = ReferenceExplanation(*f, x, false, nullptr, 0, 0, rows);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], ref[i], 1e-5) << i;
  // Without CUDA (or a device) the GPU strategy is unavailable, cleanly.
  if (gpu::VisibleGpuCount() == 0) {
    EXPECT_FALSE(MakeQuadratureGpuStrategy(model).ok());
  }
  const std::vector<float> calibration = QuadratureCalibrationRows(*f, 8, 1);
  EXPECT_EQ(calibration.size(), static_cast<size_t>(8 * f->num_features));
  const std::vector<float> again = QuadratureCalibrationRows(*f, 8, 1);
  EXPECT_EQ(0, std::memcmp(calibration.data(), again.data(), again.size() * sizeof(float)));
  for (float v : calibration) EXPECT_FALSE(std::isinf(v));
}

TEST(QuadratureEngineTest, RegisteredAndForcedThroughTheEngine) {
  RandomForestOptions options;
  options.max_depth = 9;
  options.num_outputs = 2;
  options.num_trees = 12;
  options.extreme_cover_probability = 0.2;
  options.seed = 55;
  ForestPtr f = MakeRandomForest(options);
  ThreadPool pool(2);
  const int64_t rows = 24;
  const std::vector<float> x = MakeRandomRows(*f, rows, 4);
  for (const char* name : {"quadrature_cpu", "quadrature_gpu"}) {
    SCOPED_TRACE(name);
    ExplainEngineOptions eo;
    eo.strategy = name;
    absl::StatusOr<std::unique_ptr<ExplainEngine>> engine = ExplainEngine::Create(f, eo, &pool);
    if (std::string(name) == "quadrature_gpu" && gpu::VisibleGpuCount() == 0) {
      EXPECT_FALSE(engine.ok()) << "quadrature_gpu without a GPU must be refused";
      continue;
    }
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_NE((*engine)->Describe().find(name), std::string::npos) << (*engine)->Describe();
    for (bool interactions : {false, true}) {
      const int64_t width = ExplainWidth(*f, interactions);
      std::vector<float> out(rows * width);
      ExplainOptions o;
      o.interactions = interactions;
      RunInfo info;
      ASSERT_TRUE((*engine)->Explain(MakeRowsView(x.data(), rows, f->num_features), o,
                                     MakeMatrixView(out.data(), rows, width), &info)
                      .ok());
      EXPECT_EQ(info.strategy, name);
      const std::vector<float> ref = ReferenceExplanation(*f, x, interactions, &pool, 0, 0, rows);
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_NEAR(out[i], ref[i], 1e-5 * std::max(1.0f, std::abs(ref[i]))) << i;
      }
    }
  }
  // "auto" lists the quadrature strategies beside the others.
  absl::StatusOr<std::unique_ptr<ExplainEngine>> engine = ExplainEngine::Create(f, {}, &pool);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::vector<std::string> names = (*engine)->StrategyNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "quadrature_cpu"), names.end());
}

}  // namespace
}  // namespace grove
