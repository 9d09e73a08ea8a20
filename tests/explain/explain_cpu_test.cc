// CPU reference TreeSHAP: hand-computed trees, a brute-force Shapley oracle (exact formula over all
// feature subsets with the path-dependent conditional expectation), additivity and determinism on
// seeded random forests, refusals and argument checks.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/model/decision.h"
#include "core/predict/predict.h"
#include "gtest/gtest.h"
#include "tests/testing/explain_reference.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(static_cast<double>(want[i]))))
        << "entry " << i;
  }
}

std::vector<float> Margin(const Forest& f, const std::vector<float>& rows, int begin = 0,
                          int end = 0) {
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  std::vector<float> out(n * f.num_outputs);
  PredictOptions o;
  o.kind = OutputKind::kMargin;
  o.iteration_begin = begin;
  o.iteration_end = end;
  EXPECT_TRUE(PredictCpu(f, MakeRowsView(rows.data(), n, f.num_features), o,
                         MakeMatrixView(out.data(), n, f.num_outputs), nullptr)
                  .ok());
  return out;
}

// The depth-2 tree worked out by hand below: MakeDepth2Tree (tests/testing/random_forest.h).
ForestPtr Depth2Tree() { return MakeDepth2Tree(); }

TEST(ExplainCpuTest, HandComputedDepth2Tree) {
  ForestPtr f = Depth2Tree();
  // Row x = (0, 1): left at the root, right at node 1: f(x) = 2.
  // Path-dependent expectations v(S):
  //   v({})     = (2*1 + 4*2 + 1*3 + 3*5) / 10 = 28/10 = 2.8
  //   v({0})    = node 1's mean = (2*1 + 4*2) / 6 = 10/6 = 5/3
  //   v({1})    = x1 goes right at both splits: 0.6*2 + 0.4*5 = 3.2 = 16/5
  //   v({0,1})  = f(x) = 2
  // Shapley with two features:
  //   phi0 = 1/2 [(v0 - v{}) + (v01 - v1)] = 1/2 [(5/3 - 14/5) + (2 - 16/5)] = 1/2 (5/3 - 4) = -7/6
  //   phi1 = 1/2 [(v1 - v{}) + (v01 - v0)] = 1/2 [(16/5 - 14/5) + (2 - 5/3)] = 1/2 (2/5 + 1/3) = 11/30
  //   check: -7/6 + 11/30 + 2.8 = -35/30 + 11/30 + 84/30 = 60/30 = 2 = f(x).
  const std::vector<float> phi = ReferenceExplanation(*f, {0.0f, 1.0f}, false);
  ASSERT_EQ(phi.size(), 3u);
  EXPECT_FLOAT_EQ(phi[0], static_cast<float>(-7.0 / 6.0));
  EXPECT_FLOAT_EQ(phi[1], static_cast<float>(11.0 / 30.0));
  EXPECT_FLOAT_EQ(phi[2], 2.8f);
  // Interactions: phi01 = 1/2 * (v01 - v0 - v1 + v{}) = 1/2 (2 - 5/3 - 16/5 + 14/5)
  //             = 1/2 (30 - 25 - 6)/15 = -1/30, each half on either side of the diagonal;
  //   phi00 = phi0 - phi01 = -7/6 + 1/30 = -17/15, phi11 = 11/30 + 1/30 = 2/5; M[2][2] = 2.8.
  const std::vector<float> m = ReferenceExplanation(*f, {0.0f, 1.0f}, true);
  const std::vector<float> want = {static_cast<float>(-17.0 / 15.0), static_cast<float>(-1.0 / 30.0), 0,
                                   static_cast<float>(-1.0 / 30.0), 0.4f, 0,
                                   0, 0, 2.8f};
  ASSERT_EQ(m.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(m[i], want[i], 1e-6) << i;
}

TEST(ExplainCpuTest, RepeatedFeatureOnAPath) {
  // node 0: x0 < 0.5 (cover 10) -> node 1: x0 < -0.5 (cover 6) -> leaves 1 (cover 3), 2 (cover 3);
  // right leaf 4 (cover 4). E = 0.3*1 + 0.3*2 + 0.4*4 = 2.5. Only x0 matters, so phi0 = f(x) - E:
  // x0 = 0 -> leaf 2: -0.5; x0 = -1 -> leaf 1: -1.5; x0 = 1 -> 4: 1.5. x1 gets nothing.
  HandForest h(2);
  h.AddTree({h.Split(0, 0.5f, 1, 2, 10), h.Split(0, -0.5f, 3, 4, 6), h.Leaf(4.0, 4),
             h.Leaf(1.0, 3), h.Leaf(2.0, 3)});
  ForestPtr f = h.Build();
  const std::vector<float> phi = ReferenceExplanation(*f, {0.0f, 7.0f, -1.0f, 7.0f, 1.0f, 7.0f}, false);
  ExpectNear(phi, {-0.5f, 0, 2.5f, -1.5f, 0, 2.5f, 1.5f, 0, 2.5f});
}

TEST(ExplainCpuTest, HotChildFollowsMissingAndCategoricalRules) {
  // Stump on x0, left 1 (cover 1), right 3 (cover 3): E = 2.5; phi0 = leaf reached - 2.5.
  for (uint16_t flags : {uint16_t{0}, uint16_t{kNodeDefaultLeft}}) {
    HandForest h(1);
    h.AddTree({h.Split(0, 0.5f, 1, 2, 4, flags), h.Leaf(1.0, 1), h.Leaf(3.0, 3)});
    ForestPtr f = h.Build();
    const float want = (flags & kNodeDefaultLeft) ? -1.5f : 0.5f;
    ExpectNear(ReferenceExplanation(*f, {kNan}, false), {want, 2.5f});
  }
  HandForest h(1);
  h.AddTree({h.CategoricalSplit(0, {0, 2}, 1, 2, 4,
                                kNodeCategoryInSetGoesLeft | kNodeCategoryTruncate),
             h.Leaf(1.0, 1), h.Leaf(3.0, 3)});
  ForestPtr f = h.Build();
  ExpectNear(ReferenceExplanation(*f, {-0.5f, 1.0f}, false), {-1.5f, 2.5f, 0.5f, 2.5f});
}

TEST(ExplainCpuTest, TreeWeightsGroupsAndVectorLeaves) {
  // Output 0: scalar stump (weight 2) on x0; output 1: nothing but base; then a vector-leaf stump
  // on x1 (weight 0.5) feeding both outputs.
  HandForest h(2, 2);
  h.forest.base_margin = {0.25, -1.0};
  h.AddTree({h.Split(0, 0.0f, 1, 2, 4), h.Leaf(1.0, 1), h.Leaf(3.0, 3)}, /*group=*/0, 2.0);
  h.AddTree({h.Split(1, 0.0f, 1, 2, 4), h.Leaf({4.0, 8.0}, 2), h.Leaf({0.0, 0.0}, 2)}, 0, 0.5, 2,
            /*iteration=*/1);
  ForestPtr f = h.Build();
  // Row (-1, -1): tree 0 -> 1, E0 = 2.5: phi0 = 2 * (1 - 2.5) = -3.
  // Tree 1 -> (4, 8), E = (2, 4): phi1 = 0.5 * (2, 4) = (1, 2).
  // Bias: (0.25 + 2*2.5 + 0.5*2, -1 + 0.5*4) = (6.25, 1).
  const std::vector<float> phi = ReferenceExplanation(*f, {-1.0f, -1.0f}, false);
  ExpectNear(phi, {-3.0f, 1.0f, 6.25f, 0.0f, 2.0f, 1.0f});
  const std::vector<float> margin = Margin(*f, {-1.0f, -1.0f});
  EXPECT_EQ(margin, (std::vector<float>{4.25f, 3.0f}));
  // Iteration range [1, 2): tree 1 only, bias = base + 0.5 * E.
  ExpectNear(ReferenceExplanation(*f, {-1.0f, -1.0f}, false, nullptr, 1, 2), {0.0f, 1.0f, 1.25f, 0.0f, 2.0f, 1.0f});
}

TEST(ExplainCpuTest, ZeroCoverSubtreesAreFiniteAndAdditive) {
  // The right subtree has cover 0 everywhere: its fractions are 0 (no division by zero).
  HandForest h(2);
  h.AddTree({h.Split(0, 0.5f, 1, 2, 5), h.Leaf(1.0, 5), h.Split(1, 0.5f, 3, 4, 0), h.Leaf(2.0, 0),
             h.Leaf(7.0, 0)});
  h.AddTree({h.Split(1, 0.5f, 1, 2, 0), h.Leaf(1.0, 0), h.Leaf(3.0, 0)});  // all-zero tree
  ForestPtr f = h.Build();
  // Row (1, 1): tree 0 reaches 7 with E0 = 1; tree 1 reaches 3 with E1 = 0.
  // Tree 0: v({}) = 1, v({0}) = 0 (right subtree has no weight), v({1}) = 1, v({0,1}) = 7:
  //   phi0 = 1/2[(0 - 1) + (7 - 1)] = 2.5, phi1 = 1/2[(1 - 1) + (7 - 0)] = 3.5.
  // Tree 1: v({}) = 0, v({1}) = 3: phi1 += 3.
  const std::vector<float> phi = ReferenceExplanation(*f, {1.0f, 1.0f}, false);
  ExpectNear(phi, {2.5f, 6.5f, 1.0f});
  const std::vector<float> m = ReferenceExplanation(*f, {1.0f, 1.0f}, true);
  for (float v : m) EXPECT_TRUE(std::isfinite(v));
  // Tree 0: phi01 = 0!0!/(2*1!) * (v01 - v0 - v1 + v{}) = 1/2 (7 - 0 - 1 + 1) = 3.5 on either side
  // of the diagonal (tree 1 has one feature: no interaction); diagonal = phi - 3.5.
  ExpectNear(m, {2.5f - 3.5f, 3.5f, 0, 3.5f, 6.5f - 3.5f, 0, 0, 0, 1.0f});
}

TEST(ExplainCpuTest, SingleLeafTree) {
  HandForest h(3);
  h.forest.base_margin = {1.0};
  h.AddTree({h.Leaf(2.5, 10)});
  ForestPtr f = h.Build();
  ExpectNear(ReferenceExplanation(*f, {1, 2, 3}, false), {0, 0, 0, 3.5f});
}

TEST(ExplainCpuTest, LinearTreesAreRefused) {
  HandForest h(2);
  h.AddTree({h.Split(0, 0.0f, 1, 2, 2), h.Leaf(7.0, 1), h.Leaf(9.0, 1)});
  h.forest.linear_features = {1};
  h.forest.linear_coeffs = {2.0};
  h.forest.linear_leaves.push_back(LinearLeaf{1.0, 0, 1});
  h.forest.nodes[1].aux = 1;
  ForestPtr f = h.Build();
  absl::Status s = CheckExplainable(*f);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("as LightGBM does: SHAP contributions are not implemented for linear trees"),
            std::string_view::npos)
      << s;
  std::vector<float> rows = {0, 0}, out(3);
  EXPECT_EQ(ExplainCpuReference(*f, MakeRowsView(rows.data(), 1, 2), {},
                                MakeMatrixView(out.data(), 1, 3), nullptr)
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(CheckExplainable(*Depth2Tree()).ok());
}

TEST(ExplainCpuTest, RejectsBadShapesAndRanges) {
  ForestPtr f = Depth2Tree();
  EXPECT_EQ(ExplainWidth(*f, false), 3);
  EXPECT_EQ(ExplainWidth(*f, true), 9);
  std::vector<float> rows = {0, 0, 0}, out(9);
  ExplainOptions o;
  EXPECT_EQ(ExplainCpuReference(*f, MakeRowsView(rows.data(), 1, 3), o,
                                MakeMatrixView(out.data(), 1, 3), nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExplainCpuReference(*f, MakeRowsView(rows.data(), 1, 2), o,
                                MakeMatrixView(out.data(), 1, 9), nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
  o.iteration_begin = 1;
  EXPECT_EQ(ExplainCpuReference(*f, MakeRowsView(rows.data(), 1, 2), o,
                                MakeMatrixView(out.data(), 1, 3), nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- Brute-force oracle ------------------------------------------------------------------------

// v(S) of one tree: below a split on a feature in S follow the row, otherwise average the children
// by cover (0 under a zero-cover node, the engine's convention).
double ConditionalExpectation(const Forest& f, int t, int node, const float* row, uint32_t s,
                              int k) {
  const Node& n = f.TreeNodes(t)[node];
  if (n.is_leaf()) return f.leaf_values[n.payload + k];
  if (s & (1u << n.feature)) {
    const bool left =
        GoesLeft(n.flags, n.threshold, n.payload, n.aux, f.category_bits.data(), row[n.feature]);
    return ConditionalExpectation(f, t, left ? n.left : n.right, row, s, k);
  }
  const Node* nodes = f.TreeNodes(t);
  if (n.cover <= 0) return 0.0;
  return nodes[n.left].cover / n.cover * ConditionalExpectation(f, t, n.left, row, s, k) +
         nodes[n.right].cover / n.cover * ConditionalExpectation(f, t, n.right, row, s, k);
}

double Factorial(int n) { return n <= 1 ? 1.0 : n * Factorial(n - 1); }

// Exact SHAP values (F+1 per output, bias last) and interaction values ((F+1)^2 per output) of one
// row from Shapley's formulas over all 2^F subsets.
void BruteForce(const Forest& f, const float* row, std::vector<double>* phi,
                std::vector<double>* inter) {
  const int F = f.num_features, K = f.num_outputs;
  const uint32_t subsets = 1u << F;
  phi->assign(K * (F + 1), 0.0);
  inter->assign(K * (F + 1) * (F + 1), 0.0);
  for (int k = 0; k < K; ++k) {
    std::vector<double> v(subsets, f.base_margin[k]);
    for (uint32_t s = 0; s < subsets; ++s) {
      for (int t = 0; t < static_cast<int>(f.trees.size()); ++t) {
        const Tree& tree = f.trees[t];
        if (tree.leaf_width == 1 && tree.group != k) continue;
        v[s] += tree.weight * ConditionalExpectation(f, t, 0, row, s, tree.leaf_width == 1 ? 0 : k);
      }
    }
    double* p = phi->data() + k * (F + 1);
    double* m = inter->data() + k * (F + 1) * (F + 1);
    for (int i = 0; i < F; ++i) {
      for (uint32_t s = 0; s < subsets; ++s) {
        if (s & (1u << i)) continue;
        const int size = __builtin_popcount(s);
        p[i] += Factorial(size) * Factorial(F - size - 1) / Factorial(F) * (v[s | (1u << i)] - v[s]);
      }
    }
    p[F] = v[0];
    for (int i = 0; i < F; ++i) {
      double off = 0;
      for (int j = 0; j < F; ++j) {
        if (j == i) continue;
        double sum = 0;
        for (uint32_t s = 0; s < subsets; ++s) {
          if (s & ((1u << i) | (1u << j))) continue;
          const int size = __builtin_popcount(s);
          const double nabla =
              v[s | (1u << i) | (1u << j)] - v[s | (1u << i)] - v[s | (1u << j)] + v[s];
          sum += Factorial(size) * Factorial(F - size - 2) / (2 * Factorial(F - 1)) * nabla;
        }
        m[i * (F + 1) + j] = sum;
        off += sum;
      }
      m[i * (F + 1) + i] = p[i] - off;
    }
    m[F * (F + 1) + F] = v[0];
  }
}

struct OracleCase {
  int seed;
  int num_features;
  int max_depth;
  int num_outputs;
  bool vector_leaves;
  double categorical_fraction;
  bool lightgbm_rules;
  double extreme_cover_probability;
};

class BruteForceOracleTest : public ::testing::TestWithParam<OracleCase> {};

TEST_P(BruteForceOracleTest, MatchesShapleyFormulas) {
  const OracleCase& c = GetParam();
  RandomForestOptions o;
  o.seed = c.seed;
  o.num_trees = 6;
  o.num_features = c.num_features;
  o.max_depth = c.max_depth;
  o.num_outputs = c.num_outputs;
  o.vector_leaves = c.vector_leaves;
  o.categorical_fraction = c.categorical_fraction;
  o.lightgbm_rules = c.lightgbm_rules;
  o.extreme_cover_probability = c.extreme_cover_probability;
  ForestPtr f = MakeRandomForest(o);
  const int64_t n = 25;
  const std::vector<float> rows = MakeRandomRows(*f, n, c.seed + 100, 0.15);
  const std::vector<float> phi = ReferenceExplanation(*f, rows, false);
  const std::vector<float> inter = ReferenceExplanation(*f, rows, true);
  const int64_t w1 = ExplainWidth(*f, false), w2 = ExplainWidth(*f, true);
  std::vector<double> want_phi, want_inter;
  for (int64_t r = 0; r < n; ++r) {
    BruteForce(*f, rows.data() + r * f->num_features, &want_phi, &want_inter);
    for (int64_t c1 = 0; c1 < w1; ++c1) {
      ASSERT_NEAR(phi[r * w1 + c1], want_phi[c1], 2e-6 * std::max(1.0, std::abs(want_phi[c1])))
          << "row " << r << " col " << c1;
    }
    for (int64_t c2 = 0; c2 < w2; ++c2) {
      ASSERT_NEAR(inter[r * w2 + c2], want_inter[c2],
                  2e-6 * std::max(1.0, std::abs(want_inter[c2])))
          << "row " << r << " col " << c2;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    RandomForests, BruteForceOracleTest,
    ::testing::Values(OracleCase{1, 3, 3, 1, false, 0.0, false, 0.0},
                      OracleCase{2, 4, 5, 1, false, 0.0, false, 0.0},
                      OracleCase{3, 5, 6, 1, false, 0.3, false, 0.0},
                      OracleCase{4, 6, 6, 1, false, 0.3, true, 0.0},
                      OracleCase{5, 6, 8, 2, false, 0.2, false, 0.2},
                      OracleCase{6, 5, 6, 3, true, 0.2, false, 0.0},
                      OracleCase{7, 6, 7, 3, true, 0.4, true, 0.3},
                      OracleCase{8, 2, 6, 1, false, 0.0, false, 0.0},
                      OracleCase{9, 6, 4, 2, false, 0.5, true, 0.5},
                      OracleCase{10, 1, 3, 1, false, 0.0, true, 0.0}));

// ---- Additivity and determinism on larger forests ----------------------------------------------

struct AdditivityCase {
  int seed;
  int num_features;
  int max_depth;
  int num_outputs;
  bool vector_leaves;
  double categorical_fraction;
  bool lightgbm_rules;
};

class AdditivityTest : public ::testing::TestWithParam<AdditivityCase> {};

TEST_P(AdditivityTest, BlocksSumToMarginAndInteractionRowsToContributions) {
  const AdditivityCase& c = GetParam();
  RandomForestOptions o;
  o.seed = c.seed;
  o.num_trees = 30;
  o.num_features = c.num_features;
  o.max_depth = c.max_depth;
  o.num_outputs = c.num_outputs;
  o.vector_leaves = c.vector_leaves;
  o.categorical_fraction = c.categorical_fraction;
  o.lightgbm_rules = c.lightgbm_rules;
  o.extreme_cover_probability = 0.05;
  ForestPtr f = MakeRandomForest(o);
  const int F = f->num_features, K = f->num_outputs;
  const int64_t n = 40;
  const std::vector<float> rows = MakeRandomRows(*f, n, c.seed);
  ThreadPool pool(3);
  const std::vector<float> phi = ReferenceExplanation(*f, rows, false, &pool);
  const std::vector<float> inter = ReferenceExplanation(*f, rows, true, &pool);
  const std::vector<float> margin = Margin(*f, rows);
  for (int64_t r = 0; r < n; ++r) {
    for (int k = 0; k < K; ++k) {
      const float* p = phi.data() + (r * K + k) * (F + 1);
      const float* m = inter.data() + (r * K + k) * (F + 1) * (F + 1);
      const double want = margin[r * K + k];
      const double tol = 1e-5 * std::max(1.0, std::abs(want));
      double sum = 0, total = 0;
      for (int i = 0; i <= F; ++i) sum += p[i];
      EXPECT_NEAR(sum, want, tol) << "row " << r << " output " << k;
      for (int i = 0; i <= F; ++i) {
        double row_sum = 0;
        for (int j = 0; j <= F; ++j) {
          row_sum += m[i * (F + 1) + j];
          EXPECT_NEAR(m[i * (F + 1) + j], m[j * (F + 1) + i], tol) << i << "," << j;
        }
        total += row_sum;
        EXPECT_NEAR(row_sum, p[i], tol) << "row " << r << " output " << k << " feature " << i;
      }
      EXPECT_NEAR(total, want, tol);
      EXPECT_EQ(m[F * (F + 1) + F], p[F]);
    }
  }
  // Run-to-run and thread-count identity, bit for bit.
  EXPECT_EQ(phi, ReferenceExplanation(*f, rows, false, nullptr));
  EXPECT_EQ(phi, ReferenceExplanation(*f, rows, false, &pool));
  EXPECT_EQ(inter, ReferenceExplanation(*f, rows, true, nullptr));
}

INSTANTIATE_TEST_SUITE_P(
    RandomForests, AdditivityTest,
    ::testing::Values(AdditivityCase{11, 30, 8, 1, false, 0.0, false},
                      AdditivityCase{12, 20, 10, 1, false, 0.3, false},
                      AdditivityCase{13, 20, 10, 1, false, 0.3, true},
                      AdditivityCase{14, 15, 7, 3, false, 0.2, false},
                      AdditivityCase{15, 15, 7, 4, true, 0.2, true},
                      AdditivityCase{16, 40, 11, 1, false, 0.1, true}));

TEST(ExplainCpuTest, IterationRangeSumsToTheRangeMargin) {
  ForestPtr f =
      MakeRandomForest({.num_trees = 12, .num_features = 8, .num_outputs = 2, .seed = 21});
  const std::vector<float> rows = MakeRandomRows(*f, 20, 3);
  const std::vector<float> phi = ReferenceExplanation(*f, rows, false, nullptr, 2, 5);
  const std::vector<float> margin = Margin(*f, rows, 2, 5);
  const int F = f->num_features;
  for (int64_t r = 0; r < 20; ++r) {
    for (int k = 0; k < 2; ++k) {
      double sum = 0;
      for (int i = 0; i <= F; ++i) sum += phi[(r * 2 + k) * (F + 1) + i];
      EXPECT_NEAR(sum, margin[r * 2 + k], 1e-5);
    }
  }
}

}  // namespace
}  // namespace grove
