// CPU reference interventional SHAP: hand-computed trees, a brute-force Shapley oracle (every
// feature subset, v(S) = mean over the background of out(x_S z_S̄)) on seeded random forests and
// on every corpus case of at most 10 features, additivity, determinism and refusals.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "core/explain/interventional/interventional.h"
#include "core/model/transform.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"
#include "tests/testing/interventional_reference.h"
#include "tests/testing/naive_predict.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr OutputSpace kSpaces[] = {OutputSpace::kMargin, OutputSpace::kProbability,
                                   OutputSpace::kProbabilityLinearized};

absl::StatusOr<std::vector<float>> Explain(const Forest& f, const std::vector<float>& rows,
                                           const std::vector<float>& background,
                                           const InterventionalOptions& o = {},
                                           ThreadPool* pool = nullptr) {
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = ExplainWidth(f, o.interactions);
  std::vector<float> out(n * width, kNan);
  absl::Status s = ExplainInterventionalCpu(
      f, MakeRowsView(background.data(), background.size() / f.num_features, f.num_features),
      MakeRowsView(rows.data(), n, f.num_features), o, MakeMatrixView(out.data(), n, width), pool);
  if (!s.ok()) return s;
  return out;
}

// Margins (K per subset) and values (the margins, or through the link) of every hybrid of x and
// z, subset s taking the features of its bits from x.
void HybridValues(const Forest& f, const float* x, const float* z, OutputSpace space,
                  const TransformParams& p, int begin, int end, std::vector<double>* margin,
                  std::vector<double>* value) {
  const int F = f.num_features;
  const int K = f.num_outputs;
  const uint32_t subsets = 1u << F;
  margin->assign(subsets * K, 0.0);
  value->assign(subsets * K, 0.0);
  std::vector<float> hybrid(F);
  for (uint32_t s = 0; s < subsets; ++s) {
    for (int i = 0; i < F; ++i) hybrid[i] = (s >> i) & 1 ? x[i] : z[i];
    double* m = margin->data() + s * K;
    testing::NaiveMargins(f, hybrid.data(), m, begin, end);
    if (space == OutputSpace::kProbability) {
      TransformRow(p, m, value->data() + s * K);
    } else {
      std::copy(m, m + K, value->data() + s * K);
    }
  }
}

// shap's linearized factor for output k of a pair (1 in the other spaces).
double PairFactor(const std::vector<double>& margin, OutputSpace space, const TransformParams& p,
                  uint32_t all, int K, int k) {
  const double mx = margin[all * K + k], mz = margin[k];
  if (space != OutputSpace::kProbabilityLinearized || mx == mz) return 1.0;
  return (TransformScalar(p, mx / p.average_divisor) -
          TransformScalar(p, mz / p.average_divisor)) / (mx - mz);
}

std::vector<double> Factorials(int n) {
  std::vector<double> fact(n + 1, 1.0);
  for (int i = 1; i <= n; ++i) fact[i] = fact[i - 1] * i;
  return fact;
}

// v(S) for every S, by brute force: hybrids, naive margins, the link. Then the Shapley formula
// with factorial weights; linearized: per pair, margin Shapley values times shap's factor.
std::vector<double> BruteForce(const Forest& f, const float* x, const std::vector<float>& bg,
                               OutputSpace space, int begin = 0, int end = 0) {
  const int F = f.num_features;
  const int K = f.num_outputs;
  const int64_t n = static_cast<int64_t>(bg.size()) / F;
  const uint32_t subsets = 1u << F;
  const std::vector<double> fact = Factorials(F);
  const int iterations = (end <= 0 ? f.num_iterations : end) - begin;
  const TransformParams p = MakeTransformParams(f, iterations);
  std::vector<double> phi(K * (F + 1), 0.0);
  std::vector<double> margin, value;
  for (int64_t j = 0; j < n; ++j) {
    HybridValues(f, x, bg.data() + j * F, space, p, begin, end, &margin, &value);
    for (int k = 0; k < K; ++k) {
      const double factor = PairFactor(margin, space, p, subsets - 1, K, k);
      for (int i = 0; i < F; ++i) {
        for (uint32_t s = 0; s < subsets; ++s) {
          if ((s >> i) & 1) continue;
          const int size = __builtin_popcount(s);
          const double w = fact[size] * fact[F - size - 1] / fact[F];
          phi[k * (F + 1) + i] +=
              factor * w * (value[(s | (1u << i)) * K + k] - value[s * K + k]) / n;
        }
      }
      double out_z[64];
      if (space == OutputSpace::kMargin) {
        out_z[k] = margin[k];
      } else {
        TransformRow(p, &margin[0], out_z);
      }
      phi[k * (F + 1) + F] += out_z[k] / n;
    }
  }
  return phi;
}

// Interaction matrices (K x (F+1)^2) by brute force: half the Shapley interaction index of v off
// the diagonal (sum over S without i, j of |S|! (F-|S|-2)! / (2 (F-1)!) times the second
// difference), then the diagonal and the bias from BruteForce's SHAP values.
std::vector<double> BruteForceInteractions(const Forest& f, const float* x,
                                           const std::vector<float>& bg, OutputSpace space) {
  const int F = f.num_features;
  const int K = f.num_outputs;
  const int64_t f1 = F + 1;
  const int64_t n = static_cast<int64_t>(bg.size()) / F;
  const uint32_t subsets = 1u << F;
  const std::vector<double> fact = Factorials(F);
  const TransformParams p = MakeTransformParams(f, f.num_iterations);
  std::vector<double> m(K * f1 * f1, 0.0);
  std::vector<double> margin, value;
  for (int64_t z = 0; z < n; ++z) {
    HybridValues(f, x, bg.data() + z * F, space, p, 0, 0, &margin, &value);
    for (int k = 0; k < K; ++k) {
      const double factor = PairFactor(margin, space, p, subsets - 1, K, k);
      auto v = [&](uint32_t s) { return value[s * K + k]; };
      for (int i = 0; i < F; ++i) {
        for (int j = 0; j < F; ++j) {
          if (i == j) continue;
          const uint32_t bi = 1u << i, bj = 1u << j;
          for (uint32_t s = 0; s < subsets; ++s) {
            if (s & (bi | bj)) continue;
            const int size = __builtin_popcount(s);
            const double w = fact[size] * fact[F - size - 2] / (2 * fact[F - 1]);
            m[k * f1 * f1 + i * f1 + j] +=
                factor * w * (v(s | bi | bj) - v(s | bi) - v(s | bj) + v(s)) / n;
          }
        }
      }
    }
  }
  const std::vector<double> phi = BruteForce(f, x, bg, space);
  for (int k = 0; k < K; ++k) {
    double* mk = m.data() + k * f1 * f1;
    for (int i = 0; i < F; ++i) {
      double off = 0;
      for (int j = 0; j < F; ++j) off += j == i ? 0.0 : mk[i * f1 + j];
      mk[i * f1 + i] = phi[k * f1 + i] - off;
    }
    mk[F * f1 + F] = phi[k * f1 + F];
  }
  return m;
}

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << what << " entry " << i;
  }
}

// MakeDepth2Tree (covers play no part here):
//   node 0: x0 < 0.5 -> node 1: x1 < 0.5 -> leaves 1 | 2;  node 2: x1 < 0.5 -> leaves 3 | 5.
ForestPtr Depth2Tree() { return MakeDepth2Tree(); }

TEST(InterventionalCpuTest, HandComputedDepth2Tree) {
  ForestPtr f = Depth2Tree();
  // x = (0, 1) reaches 2; z = (1, 0) reaches 3. Hybrids: x0 z1 = (0, 0) -> 1; z0 x1 = (1, 1) -> 5.
  //   phi0 = 1/2 [(1 - 3) + (2 - 5)] = -5/2, phi1 = 1/2 [(5 - 3) + (2 - 1)] = 3/2, bias 3.
  absl::StatusOr<std::vector<float>> one = Explain(*f, {0, 1}, {1, 0});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(*one, (std::vector<float>{-2.5f, 1.5f, 3.0f}));
  // A second background row z' = (0, 0) reaches 1: it differs from x in x1 only, phi1 = 2 - 1 = 1.
  // Averages: phi0 = -5/4, phi1 = 5/4, bias 2; sum 2 = f(x).
  absl::StatusOr<std::vector<float>> two = Explain(*f, {0, 1}, {1, 0, 0, 0});
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(*two, (std::vector<float>{-1.25f, 1.25f, 2.0f}));
}

TEST(InterventionalCpuTest, RepeatedFeatureKeepsOneSide) {
  // node 0: x0 < 0.5 -> node 1: x1 < 0.5 -> node 3: x0 < -0.5 -> leaves 10 | 20; node 1 right 30;
  // node 0 right 40. x = (-1, 0) reaches 10, z = (1, 1) reaches 40. Hybrids: x0 z1 = (-1, 1) -> 30,
  // z0 x1 = (1, 0) -> 40. The split at node 3 repeats x0: a hybrid with x0 from z never reaches it,
  // and one with x0 from x goes left there (never to 20, which mixed sides would reach).
  //   phi0 = 1/2 [(30 - 40) + (10 - 40)] = -20, phi1 = 1/2 [(40 - 40) + (10 - 30)] = -10.
  HandForest h(2);
  h.AddTree({h.Split(0, 0.5f, 1, 2, 4), h.Split(1, 0.5f, 3, 4, 3), h.Leaf(40.0, 1),
             h.Split(0, -0.5f, 5, 6, 2), h.Leaf(30.0, 1), h.Leaf(10.0, 1), h.Leaf(20.0, 1)});
  ForestPtr f = h.Build();
  absl::StatusOr<std::vector<float>> got = Explain(*f, {-1, 0}, {1, 1});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<float>{-20.0f, -10.0f, 40.0f}));
}

TEST(InterventionalCpuTest, MissingValuesAndCategoriesRouteAsPredictions) {
  // Stump on x0 (NaN goes left) over a categorical stump on x1 (categories {1, 3} go left).
  HandForest h(2);
  h.AddTree({h.Split(0, 0.5f, 1, 2, 4, kNodeDefaultLeft), h.Leaf(1.0, 1), h.Leaf(3.0, 3)});
  h.AddTree({h.CategoricalSplit(1, {1, 3}, 1, 2, 4, kNodeCategoryInSetGoesLeft), h.Leaf(10.0, 1),
             h.Leaf(20.0, 3)});
  ForestPtr f = h.Build();
  // x = (NaN, 3): 1 + 10; z = (1, 2): 3 + 20. Additive trees: phi0 = 1 - 3, phi1 = 10 - 20.
  absl::StatusOr<std::vector<float>> got = Explain(*f, {kNan, 3}, {1, 2});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<float>{-2.0f, -10.0f, 23.0f}));
}

TEST(InterventionalCpuTest, SigmoidExactAndLinearizedByHand) {
  // Two stumps on x0 and x1 adding 1 each for x, 0 for z; binary:logistic.
  HandForest h(2);
  h.forest.objective.link = Link::kSigmoid;
  h.AddTree({h.Split(0, 0.5f, 1, 2, 2), h.Leaf(0.0, 1), h.Leaf(1.0, 1)});
  h.AddTree({h.Split(1, 0.5f, 1, 2, 2), h.Leaf(0.0, 1), h.Leaf(1.0, 1)});
  ForestPtr f = h.Build();
  const auto sig = [](double m) { return 1.0 / (1.0 + std::exp(-m)); };
  // Exact: phi0 = phi1 = 1/2 [(s(1) - s(0)) + (s(2) - s(1))] = (s(2) - s(0)) / 2 by symmetry.
  InterventionalOptions o;
  o.output_space = OutputSpace::kProbability;
  absl::StatusOr<std::vector<float>> exact = Explain(*f, {1, 1}, {0, 0}, o);
  ASSERT_TRUE(exact.ok()) << exact.status();
  const double half = (sig(2) - sig(0)) / 2;
  ExpectClose(*exact, {half, half, sig(0)}, 1e-7, "exact");
  // Asymmetric: x0 adds 2. Exact phi0 = 1/2 [(s(2) - s(0)) + (s(3) - s(1))]; linearized:
  // margin values (2, 1) times (s(3) - s(0)) / 3.
  h.forest.leaf_values[1] = 2.0;
  f = h.Build();
  exact = Explain(*f, {1, 1}, {0, 0}, o);
  ASSERT_TRUE(exact.ok()) << exact.status();
  const double p0 = ((sig(2) - sig(0)) + (sig(3) - sig(1))) / 2;
  ExpectClose(*exact, {p0, sig(3) - sig(0) - p0, sig(0)}, 1e-7, "exact asymmetric");
  o.output_space = OutputSpace::kProbabilityLinearized;
  absl::StatusOr<std::vector<float>> lin = Explain(*f, {1, 1}, {0, 0}, o);
  ASSERT_TRUE(lin.ok()) << lin.status();
  const double r = (sig(3) - sig(0)) / 3;
  ExpectClose(*lin, {2 * r, r, sig(0)}, 1e-7, "linearized");
}

struct RandomCase {
  RandomForestOptions options;
  Link link;
};

std::vector<RandomCase> RandomCases() {
  std::vector<RandomCase> cases;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    RandomForestOptions o;
    o.seed = seed;
    o.num_features = 4 + static_cast<int>(seed % 4);
    o.num_trees = 6;
    o.max_depth = 3 + static_cast<int>(seed % 4);
    o.categorical_fraction = seed % 2 ? 0.3 : 0.0;
    o.lightgbm_rules = seed % 3 == 0;
    o.num_outputs = seed % 3 == 1 ? 3 : 1;
    o.vector_leaves = seed == 4;
    if (o.vector_leaves) o.num_outputs = 2;
    const Link link = o.num_outputs > 1 ? Link::kSoftmax : (seed % 2 ? Link::kSigmoid : Link::kExp);
    cases.push_back({o, link});
  }
  return cases;
}

ForestPtr WithLink(const ForestPtr& forest, Link link) { return testing::WithLink(*forest, link); }

TEST(InterventionalCpuTest, RandomForestsMatchBruteForce) {
  ThreadPool pool(2);
  for (const RandomCase& c : RandomCases()) {
    ForestPtr f = WithLink(MakeRandomForest(c.options), c.link);
    const int F = f->num_features;
    const std::vector<float> rows = MakeRandomRows(*f, 4, c.options.seed + 100);
    const std::vector<float> bg = MakeRandomRows(*f, 5, c.options.seed + 200);
    for (OutputSpace space : kSpaces) {
      if (space == OutputSpace::kProbabilityLinearized && c.link == Link::kSoftmax) continue;
      const std::string what = absl::StrCat("seed ", c.options.seed, " ", OutputSpaceName(space));
      InterventionalOptions o;
      o.output_space = space;
      absl::StatusOr<std::vector<float>> got = Explain(*f, rows, bg, o, &pool);
      ASSERT_TRUE(got.ok()) << what << ": " << got.status();
      std::vector<double> want;
      for (int r = 0; r < 4; ++r) {
        const std::vector<double> one = BruteForce(*f, rows.data() + r * F, bg, space);
        want.insert(want.end(), one.begin(), one.end());
      }
      ExpectClose(*got, want, 1e-5, what);
    }
  }
}

TEST(InterventionalCpuTest, IterationRangesMatchBruteForce) {
  RandomForestOptions ro;
  ro.num_trees = 12;
  ro.num_outputs = 2;
  ro.num_features = 6;
  ro.seed = 9;
  ForestPtr f = WithLink(MakeRandomForest(ro), Link::kSoftmax);
  const std::vector<float> rows = MakeRandomRows(*f, 3, 1);
  const std::vector<float> bg = MakeRandomRows(*f, 4, 2);
  for (OutputSpace space : {OutputSpace::kMargin, OutputSpace::kProbability}) {
    InterventionalOptions o;
    o.output_space = space;
    o.iteration_begin = 1;
    o.iteration_end = 4;
    absl::StatusOr<std::vector<float>> got = Explain(*f, rows, bg, o);
    ASSERT_TRUE(got.ok()) << got.status();
    std::vector<double> want;
    for (int r = 0; r < 3; ++r) {
      const std::vector<double> one = BruteForce(*f, rows.data() + r * 6, bg, space, 1, 4);
      want.insert(want.end(), one.begin(), one.end());
    }
    ExpectClose(*got, want, 1e-5, OutputSpaceName(space));
  }
}

TEST(InterventionalCpuTest, AdditiveAndDeterministicOnDeepForests) {
  RandomForestOptions ro;
  ro.num_trees = 20;
  ro.max_depth = 12;
  ro.num_features = 30;
  ro.num_outputs = 2;
  ro.categorical_fraction = 0.2;
  ro.seed = 5;
  ForestPtr f = MakeRandomForest(ro);
  const std::vector<float> rows = MakeRandomRows(*f, 16, 3);
  const std::vector<float> bg = MakeRandomRows(*f, 25, 4);
  ThreadPool pool(3);
  absl::StatusOr<std::vector<float>> a = Explain(*f, rows, bg, {}, &pool);
  absl::StatusOr<std::vector<float>> b = Explain(*f, rows, bg, {}, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  const int64_t f1 = ro.num_features + 1;
  for (int r = 0; r < 16; ++r) {
    double margin[2];
    testing::NaiveMargins(*f, rows.data() + r * ro.num_features, margin);
    for (int k = 0; k < 2; ++k) {
      double sum = 0;
      for (int64_t c = 0; c < f1; ++c) sum += (*a)[(r * 2 + k) * f1 + c];
      EXPECT_NEAR(sum, margin[k], 1e-5 * std::max(1.0, std::abs(margin[k]))) << r << " " << k;
    }
  }
}

TEST(InterventionalCpuTest, InteractionsOfTwoStumpsByHand) {
  // f = 2 [x0 > 0.5] [x1 > 0.5] + [x0 > 0.5] over x = (1, 1), z = (0, 0): the interaction of x0
  // and x1 is 2 (each half is 1), phi0 = 2/2 + 1 = 2, phi1 = 1, so M = [[1, 1], [1, 0]].
  HandForest h(2);
  h.AddTree({h.Split(0, 0.5f, 1, 2, 3), h.Leaf(0.0, 1), h.Split(1, 0.5f, 3, 4, 2), h.Leaf(0.0, 1),
             h.Leaf(2.0, 1)});
  h.AddTree({h.Split(0, 0.5f, 1, 2, 2), h.Leaf(0.0, 1), h.Leaf(1.0, 1)});
  ForestPtr f = h.Build();
  InterventionalOptions o;
  o.interactions = true;
  absl::StatusOr<std::vector<float>> got = Explain(*f, {1, 1}, {0, 0}, o);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectClose(*got, {1, 1, 0, 1, 0, 0, 0, 0, 0}, 1e-7, "margin");
  // Under the sigmoid the exact values are those of the game on s(0), s(1), s(0), s(3).
  h.forest.objective.link = Link::kSigmoid;
  f = h.Build();
  o.output_space = OutputSpace::kProbability;
  got = Explain(*f, {1, 1}, {0, 0}, o);
  ASSERT_TRUE(got.ok()) << got.status();
  const auto sig = [](double m) { return 1.0 / (1.0 + std::exp(-m)); };
  const double half = (sig(3) - sig(1) - sig(0) + sig(0)) / 2;
  const double phi0 = ((sig(1) - sig(0)) + (sig(3) - sig(0))) / 2;
  const double phi1 = ((sig(0) - sig(0)) + (sig(3) - sig(1))) / 2;
  ExpectClose(*got, {phi0 - half, half, 0, half, phi1 - half, 0, 0, 0, sig(0)}, 1e-7,
              "probability");
}

TEST(InterventionalCpuTest, InteractionsMatchBruteForceInEverySpace) {
  ThreadPool pool(2);
  for (const RandomCase& c : RandomCases()) {
    ForestPtr f = WithLink(MakeRandomForest(c.options), c.link);
    const int F = f->num_features;
    const std::vector<float> rows = MakeRandomRows(*f, 3, c.options.seed + 300);
    const std::vector<float> bg = MakeRandomRows(*f, 4, c.options.seed + 400);
    for (OutputSpace space : kSpaces) {
      if (space == OutputSpace::kProbabilityLinearized && c.link == Link::kSoftmax) continue;
      const std::string what = absl::StrCat("seed ", c.options.seed, " ", OutputSpaceName(space));
      InterventionalOptions o;
      o.output_space = space;
      o.interactions = true;
      absl::StatusOr<std::vector<float>> got = Explain(*f, rows, bg, o, &pool);
      ASSERT_TRUE(got.ok()) << what << ": " << got.status();
      std::vector<double> want;
      for (int r = 0; r < 3; ++r) {
        const std::vector<double> one = BruteForceInteractions(*f, rows.data() + r * F, bg, space);
        want.insert(want.end(), one.begin(), one.end());
      }
      ExpectClose(*got, want, 1e-5, what);
      // Rows of each matrix sum to the SHAP values.
      o.interactions = false;
      absl::StatusOr<std::vector<float>> values = Explain(*f, rows, bg, o, &pool);
      ASSERT_TRUE(values.ok()) << values.status();
      const int64_t f1 = F + 1;
      for (size_t block = 0; block < values->size() / f1; ++block) {
        for (int64_t i = 0; i < f1; ++i) {
          double sum = 0;
          for (int64_t j = 0; j < f1; ++j) sum += (*got)[block * f1 * f1 + i * f1 + j];
          EXPECT_NEAR(sum, (*values)[block * f1 + i], 1e-5) << what;
        }
      }
    }
  }
}

TEST(InterventionalCpuTest, Refusals) {
  ForestPtr f = Depth2Tree();
  EXPECT_EQ(Explain(*f, {0, 1}, {}).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<float> three = {1, 0, 0};  // one background row of 3 columns
  std::vector<float> out(3);
  EXPECT_EQ(ExplainInterventionalCpu(*f, MakeRowsView(three.data(), 1, 3),
                                     MakeRowsView(three.data(), 1, 2), {},
                                     MakeMatrixView(out.data(), 1, 3), nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
  InterventionalOptions o;
  o.iteration_end = 5;
  EXPECT_EQ(Explain(*f, {0, 1}, {1, 0}, o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseOutputSpace("probabilities").ok());
  EXPECT_EQ(*ParseOutputSpace("probability_linearized"), OutputSpace::kProbabilityLinearized);

  // Class-index output has no probability; softmax has no linearized form.
  o = {};
  o.output_space = OutputSpace::kProbability;
  absl::StatusOr<std::vector<float>> s = Explain(*WithLink(f, Link::kArgmax), {0, 1}, {1, 0}, o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("class index"), std::string::npos) << s.status();
  o.output_space = OutputSpace::kProbabilityLinearized;
  RandomForestOptions two_outputs;
  two_outputs.num_outputs = 2;
  two_outputs.num_features = 2;
  s = Explain(*WithLink(MakeRandomForest(two_outputs), Link::kSoftmax), {0, 1}, {1, 0}, o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);

  // The exact probability space refuses a pair differing in more than 16 features, naming it.
  const int F = kMaxExactDifferingFeatures + 1;
  HandForest h(F);
  h.forest.objective.link = Link::kSigmoid;
  for (int i = 0; i < F; ++i) h.AddTree({h.Split(i, 0.5f, 1, 2, 2), h.Leaf(0.0, 1), h.Leaf(1.0, 1)});
  ForestPtr wide = h.Build();
  o.output_space = OutputSpace::kProbability;
  s = Explain(*wide, std::vector<float>(F, 1.0f),
              std::vector<float>(F, 1.0f), o);  // equal rows: nothing to enumerate
  EXPECT_TRUE(s.ok()) << s.status();
  s = Explain(*wide, std::vector<float>(F, 1.0f), std::vector<float>(F, 0.0f), o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("row 0, background row 0"), std::string::npos) << s.status();
}

// Every corpus case of at most 10 features (categorical, dart, multi-output, LightGBM rules):
// 3 rows against 8 background rows taken from X.csv, every output space the link allows.
TEST(InterventionalCorpusTest, SmallCasesMatchBruteForce) {
  if (testing::CorpusCaseDirs().empty()) GTEST_SKIP() << "no corpus found";
  ThreadPool pool(2);
  int checked = 0;
  for (const auto& k : testing::InterventionalCorpus(8, 3, /*max_features=*/10)) {
    const int F = k.c.num_features;
    for (OutputSpace space : kSpaces) {
      InterventionalOptions o;
      o.output_space = space;
      const std::string what = absl::StrCat(k.c.name, " ", OutputSpaceName(space));
      absl::StatusOr<std::vector<float>> got = Explain(*k.forest, k.rows, k.background, o, &pool);
      if (!got.ok()) {  // only the refusals CheckInterventionalCall documents
        EXPECT_NE(space, OutputSpace::kMargin) << what << ": " << got.status();
        EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << what;
        continue;
      }
      std::vector<double> want;
      for (int r = 0; r < 3; ++r) {
        const std::vector<double> one =
            BruteForce(*k.forest, k.rows.data() + r * F, k.background, space);
        want.insert(want.end(), one.begin(), one.end());
      }
      ExpectClose(*got, want, 1e-5, what);
      ++checked;
    }
  }
  EXPECT_GT(checked, 30);
}

}  // namespace
}  // namespace grove
