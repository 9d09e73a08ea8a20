// Banzhaf values and Banzhaf interaction values, path-dependent (BanzhafEngine: quadrature at
// t = 1/2) and interventional (every CPU strategy of InterventionalEngine), against their
// definitions over every feature subset (tests/testing/coalition_games.h) on seeded random forests
// with NaNs, categorical splits, LightGBM rules, multi-output and vector-leaf trees.
#include "core/explain/quadrature/banzhaf_engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/explain/attribution.h"
#include "core/explain/explain.h"
#include "core/explain/interventional/interventional_interactions.h"
#include "core/explain/interventional_engine.h"
#include "core/explain/paths.h"
#include "core/model/transform.h"
#include "gtest/gtest.h"
#include "tests/testing/coalition_games.h"
#include "tests/testing/explain_reference.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

struct Case {
  int seed;
  int num_features;
  int max_depth;
  int num_outputs;
  bool vector_leaves;
  double categorical_fraction;
  bool lightgbm_rules;
};

constexpr Case kCases[] = {
    {1, 3, 3, 1, false, 0.0, false}, {2, 5, 5, 1, false, 0.0, false},
    {3, 6, 6, 1, false, 0.3, false}, {4, 6, 6, 1, false, 0.3, true},
    {5, 6, 8, 2, false, 0.2, false}, {6, 5, 6, 3, true, 0.2, false},
    {7, 7, 7, 3, true, 0.4, true},   {8, 1, 3, 1, false, 0.0, true},
};

ForestPtr MakeForest(const Case& c) {
  RandomForestOptions o;
  o.seed = c.seed;
  o.num_trees = 6;
  o.num_features = c.num_features;
  o.max_depth = c.max_depth;
  o.num_outputs = c.num_outputs;
  o.vector_leaves = c.vector_leaves;
  o.categorical_fraction = c.categorical_fraction;
  o.lightgbm_rules = c.lightgbm_rules;
  return MakeRandomForest(o);
}

std::unique_ptr<BanzhafEngine> MakeEngine(const ForestPtr& f, ThreadPool* pool) {
  absl::StatusOr<PathLayoutPtr> layout = BuildPathLayout(*f);
  EXPECT_TRUE(layout.ok()) << layout.status();
  BanzhafEngineOptions o;
  o.use_gpu = false;
  o.measure_costs = false;
  absl::StatusOr<std::unique_ptr<BanzhafEngine>> e = BanzhafEngine::Create(f, *layout, o, pool);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

std::vector<float> Explain(const BanzhafEngine& e, const Forest& f, const std::vector<float>& rows,
                           const ExplainOptions& o) {
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = ExplainWidth(f, o.interactions);
  std::vector<float> out(n * width, std::nanf(""));
  const absl::Status s = e.Explain(MakeRowsView(rows.data(), n, f.num_features), o,
                                   MakeMatrixView(out.data(), n, width), nullptr);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// got (float) against want (double), entry by entry, within tol x max(1, |want|).
void ExpectNear(const float* got, const std::vector<double>& want, double tol,
                const std::string& what) {
  for (size_t c = 0; c < want.size(); ++c) {
    ASSERT_NEAR(got[c], want[c], tol * std::max(1.0, std::abs(want[c])))
        << what << " column " << c;
  }
}

TEST(BanzhafTest, AttributionNamesRoundTrip) {
  for (Attribution a : {Attribution::kShapley, Attribution::kBanzhaf}) {
    EXPECT_EQ(*ParseAttribution(AttributionName(a)), a);
  }
  EXPECT_EQ(ParseAttribution("owen").status().code(), absl::StatusCode::kInvalidArgument);
}

// Banzhaf's weight is 1 / 2^(a+b-1); Shapley's is InterventionalWeight.
TEST(BanzhafTest, WeightsAreTheDefinitions) {
  EXPECT_DOUBLE_EQ(AttributionWeight(Attribution::kBanzhaf, 1, 0), 1.0);
  EXPECT_DOUBLE_EQ(AttributionWeight(Attribution::kBanzhaf, 2, 1), 0.25);
  EXPECT_DOUBLE_EQ(AttributionWeight(Attribution::kBanzhaf, 1, 3), 0.125);
  EXPECT_DOUBLE_EQ(AttributionWeight(Attribution::kShapley, 2, 1), 1.0 / 6);
}

TEST(BanzhafTest, PathDependentMatchesTheDefinition) {
  ThreadPool pool(3);
  for (const Case& c : kCases) {
    ForestPtr f = MakeForest(c);
    std::unique_ptr<BanzhafEngine> e = MakeEngine(f, &pool);
    ASSERT_NE(e, nullptr);
    const int F = f->num_features, K = f->num_outputs;
    const int64_t n = 20;
    const std::vector<float> rows = MakeRandomRows(*f, n, c.seed + 100, 0.15);
    ExplainOptions values, interactions;
    interactions.interactions = true;
    const std::vector<float> got = Explain(*e, *f, rows, values);
    const std::vector<float> got_inter = Explain(*e, *f, rows, interactions);
    const int64_t w1 = ExplainWidth(*f, false), w2 = ExplainWidth(*f, true);
    for (int64_t r = 0; r < n; ++r) {
      const std::vector<double> game = testing::PathDependentGame(*f, rows.data() + r * F);
      const std::string what = absl::StrCat("seed ", c.seed, " row ", r);
      ExpectNear(got.data() + r * w1, testing::BanzhafOfGame(game, F, K), 2e-6, what);
      ExpectNear(got_inter.data() + r * w2, testing::BanzhafInteractionsOfGame(game, F, K), 2e-6,
                 what + " interactions");
    }
  }
}

TEST(BanzhafTest, PathDependentIterationRanges) {
  const Case c{11, 5, 5, 2, false, 0.2, false};
  ForestPtr f = MakeForest(c);
  std::unique_ptr<BanzhafEngine> e = MakeEngine(f, nullptr);
  ASSERT_NE(e, nullptr);
  const int F = f->num_features, K = f->num_outputs;
  const std::vector<float> rows = MakeRandomRows(*f, 8, 3, 0.2);
  ExplainOptions o;
  o.iteration_begin = 1;
  o.iteration_end = 3;
  const std::vector<float> got = Explain(*e, *f, rows, o);
  for (int64_t r = 0; r < 8; ++r) {
    const std::vector<double> game = testing::PathDependentGame(*f, rows.data() + r * F, 1, 3);
    ExpectNear(got.data() + r * K * (F + 1), testing::BanzhafOfGame(game, F, K), 2e-6,
               absl::StrCat("row ", r));
  }
}

// With three or more features on a path Banzhaf and Shapley differ, and Banzhaf values are not
// additive (a test that compared Banzhaf to SHAP values would fail here).
TEST(BanzhafTest, DiffersFromShapleyAndIsNotAdditive) {
  HandForest h(3);
  h.AddTree({h.Split(0, 0.5f, 1, 2, 10), h.Split(1, 0.5f, 3, 4, 6), h.Leaf(0.0, 4),
             h.Split(2, 0.5f, 5, 6, 3), h.Leaf(0.0, 3), h.Leaf(0.0, 1), h.Leaf(8.0, 2)});
  ForestPtr f = h.Build();
  std::unique_ptr<BanzhafEngine> e = MakeEngine(f, nullptr);
  ASSERT_NE(e, nullptr);
  const std::vector<float> row = {0.0f, 0.0f, 1.0f};  // reaches the leaf of value 8
  const std::vector<float> banzhaf = Explain(*e, *f, row, {});
  const std::vector<float> shap = ReferenceExplanation(*f, row, false);
  // By hand: v(S) = 8 * prod over the path's features not in S of their cover fractions
  // (x0: 6/10, x1: 3/6, x2: 2/3), so phi_0 = (8 - 8 * 0.6) * mean over S ⊆ {1, 2} of the
  // others' factors: 3.2 * (1 + 0.5)(1 + 2/3) / 4 = 2.
  EXPECT_NEAR(banzhaf[0], 2.0, 1e-6);
  EXPECT_NEAR(banzhaf[3], 8 * 0.6 * 0.5 * (2.0 / 3), 1e-6);  // the bias: the expected value
  double sum = 0, shap_sum = 0;
  for (int i = 0; i < 4; ++i) {
    sum += banzhaf[i];
    shap_sum += shap[i];
  }
  EXPECT_NEAR(shap_sum, 8.0, 1e-5);
  EXPECT_GT(std::abs(sum - 8.0), 0.1);
  // Shapley: 3.2 * int_0^1 (1 + t)(2 + t) / 6 dt = 3.2 * 23 / 36.
  EXPECT_NEAR(shap[0], 3.2 * 23 / 36, 1e-5);
  EXPECT_GT(std::abs(banzhaf[0] - shap[0]), 0.04);
}

TEST(BanzhafTest, PathDependentIsDeterministic) {
  ThreadPool pool(4);
  ForestPtr f = MakeForest({5, 6, 8, 2, false, 0.2, false});
  std::unique_ptr<BanzhafEngine> e = MakeEngine(f, &pool);
  ASSERT_NE(e, nullptr);
  const std::vector<float> rows = MakeRandomRows(*f, 100, 9, 0.1);
  for (bool inter : {false, true}) {
    ExplainOptions o;
    o.interactions = inter;
    const std::vector<float> a = Explain(*e, *f, rows, o);
    const std::vector<float> b = Explain(*e, *f, rows, o);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  }
}

// The interventional engine's Banzhaf values over a background, each CPU strategy, every output
// space: the mean over the background rows of each pair's Banzhaf values (Banzhaf values are
// linear in the game), the linearized space's pairs scaled by shap's factor.
TEST(BanzhafTest, InterventionalMatchesTheDefinition) {
  ThreadPool pool(3);
  for (const Case& c : kCases) {
    ForestPtr margin_forest = MakeForest(c);
    const int F = margin_forest->num_features, K = margin_forest->num_outputs;
    const std::vector<float> bg = MakeRandomRows(*margin_forest, 5, c.seed + 7, 0.2);
    const std::vector<float> rows = MakeRandomRows(*margin_forest, 6, c.seed + 9, 0.2);
    const int64_t nb = 5, n = 6;
    for (OutputSpace space : {OutputSpace::kMargin, OutputSpace::kProbability,
                              OutputSpace::kProbabilityLinearized}) {
      ForestPtr f = space == OutputSpace::kMargin
                        ? margin_forest
                        : testing::WithLink(*margin_forest,
                                            space == OutputSpace::kProbability && K > 1
                                                ? Link::kSoftmax
                                                : Link::kSigmoid);
      const TransformParams p = MakeTransformParams(*f, f->num_iterations);
      for (bool inter : {false, true}) {
        if (inter && space != OutputSpace::kMargin) continue;
        std::vector<double> want_all(n * ExplainWidth(*f, inter), 0.0);
        for (int64_t r = 0; r < n; ++r) {
          const float* x = rows.data() + r * F;
          const int64_t w = ExplainWidth(*f, inter);
          for (int64_t j = 0; j < nb; ++j) {
            const float* z = bg.data() + j * F;
            const OutputSpace game_space =
                space == OutputSpace::kProbability ? space : OutputSpace::kMargin;
            const std::vector<double> game = testing::PairGame(*f, x, z, game_space);
            std::vector<double> one = inter ? testing::BanzhafInteractionsOfGame(game, F, K)
                                            : testing::BanzhafOfGame(game, F, K);
            const int64_t block = w / K;
            // Linearized: the pair's margin values times shap's factor; the bias is the mean of
            // the background's transformed output.
            double out_z[8];
            TransformRow(p, game.data(), out_z);
            for (int k = 0; k < K; ++k) {
              const bool lin = space == OutputSpace::kProbabilityLinearized;
              const double factor =
                  lin ? LinearizedFactor(p, game[((1u << F) - 1) * K + k], game[k]) : 1.0;
              if (lin) one[k * block + block - 1] = out_z[k];
              for (int64_t col = 0; col < block; ++col) {
                want_all[r * w + k * block + col] +=
                    (col == block - 1 ? 1.0 : factor) * one[k * block + col] / nb;
              }
            }
          }
        }
        for (const char* strategy : {"reference", "paths_cpu"}) {
          if (inter && std::string(strategy) == "paths_cpu" &&
              !PathFormExplainsInteractions(*f, {space, true})) {
            continue;
          }
          InterventionalEngineOptions eo;
          eo.strategy = strategy;
          eo.use_gpu = false;
          absl::StatusOr<std::unique_ptr<InterventionalEngine>> e = InterventionalEngine::Create(
              f, nullptr, MakeRowsView(bg.data(), nb, F), eo, &pool);
          ASSERT_TRUE(e.ok()) << e.status();
          InterventionalOptions o;
          o.output_space = space;
          o.interactions = inter;
          o.attribution = Attribution::kBanzhaf;
          const int64_t w = ExplainWidth(*f, inter);
          std::vector<float> got(n * w, std::nanf(""));
          const absl::Status s = (*e)->Explain(MakeRowsView(rows.data(), n, F), o,
                                               MakeMatrixView(got.data(), n, w), nullptr);
          ASSERT_TRUE(s.ok()) << s;
          ExpectNear(got.data(), want_all, 2e-6,
                     absl::StrCat("seed ", c.seed, " ", strategy, " ", OutputSpaceName(space),
                                  inter ? " interactions" : ""));
        }
      }
    }
  }
}

}  // namespace
}  // namespace grove
