// Saabas attributions (core/explain/saabas/): against the brute-force oracle
// (tests/testing/saabas_reference.h: each node's expected value summed over the leaves below it,
// the path walked node by node over the Forest) on seeded forests with NaNs, categorical splits,
// LightGBM rules, multi-output and vector-leaf trees, tree weights (dart), iteration ranges and
// feature groups; additivity against the plain traversal's margin; the bias is the SHAP values';
// the errors; determinism across thread counts.
#include "core/explain/saabas/saabas.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/common/thread_pool.h"
#include "core/explain/explain.h"
#include "gtest/gtest.h"
#include "tests/testing/coalition_games.h"
#include "tests/testing/naive_predict.h"
#include "tests/testing/random_forest.h"
#include "tests/testing/saabas_reference.h"

namespace grove {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// Seeded forests: NaN default directions, categorical splits, LightGBM rules, multi-output and
// vector-leaf trees, skewed and zero-sized covers, tree weights on about a third of the trees.
const testing::RandomForestOptions kForests[] = {
    {.num_trees = 12, .max_depth = 3, .num_features = 3, .seed = 1},
    {.num_trees = 12, .max_depth = 7, .num_features = 8, .extreme_cover_probability = 0.2,
     .seed = 2},
    {.num_trees = 12, .max_depth = 6, .num_features = 6, .categorical_fraction = 0.4, .seed = 3},
    {.num_trees = 12, .max_depth = 6, .num_features = 6, .categorical_fraction = 0.3,
     .lightgbm_rules = true, .seed = 4},
    {.num_trees = 12, .max_depth = 8, .num_features = 9, .num_outputs = 3,
     .categorical_fraction = 0.2, .extreme_cover_probability = 0.1, .seed = 5},
    {.num_trees = 12, .max_depth = 6, .num_features = 5, .num_outputs = 3, .vector_leaves = true,
     .categorical_fraction = 0.2, .seed = 6},
    {.num_trees = 12, .max_depth = 9, .num_features = 7, .num_outputs = 2, .vector_leaves = true,
     .categorical_fraction = 0.4, .lightgbm_rules = true, .seed = 7},
    {.num_trees = 12, .max_depth = 3, .num_features = 1, .lightgbm_rules = true, .seed = 8},
};

std::vector<float> Saabas(const SaabasEngine& engine, const Forest& f,
                          const std::vector<float>& rows, const ExplainOptions& o) {
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = ExplainWidth(f, false, o.groups);
  std::vector<float> out(n * width, kNan);
  RunInfo info;
  absl::Status s = engine.Explain(MakeRowsView(rows.data(), n, f.num_features), o,
                                  MakeMatrixView(out.data(), n, width), &info);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(info.strategy, "saabas_cpu");
  return out;
}

void ExpectOracle(const Forest& f, const std::vector<float>& rows, const std::vector<float>& got,
                  const ExplainOptions& o, const std::string& what) {
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = ExplainWidth(f, false, o.groups);
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<double> want = testing::SaabasByDefinition(
        f, rows.data() + r * f.num_features, o.iteration_begin, o.iteration_end, o.groups);
    for (int64_t c = 0; c < width; ++c) {
      ASSERT_NEAR(got[r * width + c], want[c], 1e-5 * std::max(1.0, std::abs(want[c])))
          << what << " row " << r << " column " << c;
    }
  }
}

TEST(SaabasTest, MatchesTheOracleOnSeededForests) {
  ThreadPool pool(3);
  int weighted = 0, nan_rows = 0;
  for (const testing::RandomForestOptions& c : kForests) {
    ForestPtr f = testing::MakeRandomForest(c);
    for (const Tree& t : f->trees) weighted += t.weight != 1.0;
    auto engine = SaabasEngine::Create(f, &pool);
    ASSERT_TRUE(engine.ok()) << engine.status();
    const std::vector<float> rows = testing::MakeRandomRows(*f, 40, c.seed + 100, 0.2);
    for (float x : rows) nan_rows += std::isnan(x);
    const int rounds = f->num_iterations;
    for (auto [begin, end] : {std::pair{0, 0}, std::pair{1, 0}, std::pair{0, rounds - 1},
                              std::pair{rounds / 2, rounds / 2 + 1}}) {
      if (end > 0 && end <= begin) continue;
      ExplainOptions o;
      o.iteration_begin = begin;
      o.iteration_end = end;
      const std::string what =
          absl::StrCat("seed ", c.seed, " rounds [", begin, ", ", end, ")");
      ExpectOracle(*f, rows, Saabas(**engine, *f, rows, o), o, what);
      if (HasFailure()) return;
    }
  }
  // The cases exercise what they claim: dart weights and missing values.
  EXPECT_GT(weighted, 0);
  EXPECT_GT(nan_rows, 0);
}

TEST(SaabasTest, GroupsCreditEachSplitToItsFeaturesGroup) {
  ThreadPool pool(2);
  int grouped = 0;  // groupings with a group of several features
  for (const testing::RandomForestOptions& c : kForests) {
    if (c.num_features < 3) continue;
    ForestPtr f = testing::MakeRandomForest(c);
    auto engine = SaabasEngine::Create(f, &pool);
    ASSERT_TRUE(engine.ok()) << engine.status();
    FeatureGroupsPtr groups = testing::RandomFeatureGroups(f->num_features, c.seed);
    grouped += groups->num_groups() < f->num_features;
    const std::vector<float> rows = testing::MakeRandomRows(*f, 20, c.seed + 200);
    ExplainOptions o;
    o.groups = groups.get();
    ExpectOracle(*f, rows, Saabas(**engine, *f, rows, o), o, absl::StrCat("seed ", c.seed));
  }
  EXPECT_GT(grouped, 0);
}

// Each row's values and bias sum to its margin (the path's steps telescope), within 1e-5
// relative, on every seeded forest and round range.
TEST(SaabasTest, RowsSumToTheMargin) {
  ThreadPool pool(2);
  for (const testing::RandomForestOptions& c : kForests) {
    ForestPtr f = testing::MakeRandomForest(c);
    auto engine = SaabasEngine::Create(f, &pool);
    ASSERT_TRUE(engine.ok()) << engine.status();
    const std::vector<float> rows = testing::MakeRandomRows(*f, 50, c.seed + 300, 0.3);
    for (int begin : {0, 1}) {
      ExplainOptions o;
      o.iteration_begin = begin;
      const std::vector<float> got = Saabas(**engine, *f, rows, o);
      const int64_t f1 = f->num_features + 1;
      for (int64_t r = 0; r < 50; ++r) {
        std::vector<double> margin(f->num_outputs);
        testing::NaiveMargins(*f, rows.data() + r * f->num_features, margin.data(), begin, 0);
        for (int k = 0; k < f->num_outputs; ++k) {
          double sum = 0;
          for (int64_t j = 0; j < f1; ++j) sum += got[r * f->num_outputs * f1 + k * f1 + j];
          EXPECT_NEAR(sum, margin[k], 1e-5 * std::max(1.0, std::abs(margin[k])))
              << "seed " << c.seed << " row " << r << " output " << k;
        }
      }
    }
  }
}

// The bias column is the SHAP values' (the reference's expected value plus the base margin).
TEST(SaabasTest, BiasIsTheShapBias) {
  for (const testing::RandomForestOptions& c : kForests) {
    ForestPtr f = testing::MakeRandomForest(c);
    auto engine = SaabasEngine::Create(f, nullptr);
    ASSERT_TRUE(engine.ok()) << engine.status();
    const std::vector<float> rows = testing::MakeRandomRows(*f, 3, c.seed);
    ExplainOptions o;
    o.iteration_begin = 1;
    const std::vector<float> saabas = Saabas(**engine, *f, rows, o);
    std::vector<float> shap(saabas.size(), kNan);
    const int64_t width = ExplainWidth(*f, false);
    ASSERT_TRUE(ExplainCpuReference(*f, MakeRowsView(rows.data(), 3, f->num_features), o,
                                    MakeMatrixView(shap.data(), 3, width), nullptr)
                    .ok());
    const int64_t f1 = f->num_features + 1;
    for (int64_t r = 0; r < 3; ++r) {
      for (int k = 0; k < f->num_outputs; ++k) {
        const float want = shap[r * width + k * f1 + f1 - 1];
        EXPECT_NEAR(saabas[r * width + k * f1 + f1 - 1], want,
                    1e-6 * std::max(1.0f, std::abs(want)))
            << "seed " << c.seed;
      }
    }
  }
}

// The same bits whatever the pool: each row is computed by one thread in a fixed order.
TEST(SaabasTest, DeterministicAcrossThreadCounts) {
  ForestPtr f = testing::MakeRandomForest(kForests[4]);
  const std::vector<float> rows = testing::MakeRandomRows(*f, 257, 9);
  auto one = SaabasEngine::Create(f, nullptr);
  ThreadPool pool(4);
  auto four = SaabasEngine::Create(f, &pool);
  ASSERT_TRUE(one.ok() && four.ok());
  const std::vector<float> a = Saabas(**one, *f, rows, {});
  const std::vector<float> b = Saabas(**four, *f, rows, {});
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  EXPECT_EQ(b, Saabas(**four, *f, rows, {}));
}

// A hand-computed tree (MakeDepth2Tree: covers 10 = 6 + 4, 6 = 2 + 4, 4 = 1 + 3).
TEST(SaabasTest, HandComputedTree) {
  ForestPtr f = MakeDepth2Tree();
  auto engine = SaabasEngine::Create(f, nullptr);
  ASSERT_TRUE(engine.ok());
  // E(root) = 0.6 * E1 + 0.4 * E2, E1 = (2 * 1 + 4 * 2) / 6 = 5/3, E2 = (1 * 3 + 3 * 5) / 4 = 4.5.
  const double e1 = 10.0 / 6, e2 = 4.5, e0 = 0.6 * e1 + 0.4 * e2;
  const std::vector<float> row = {0.7f, 0.2f};  // right (x0 >= 0.5), then left: leaf 5 (value 3)
  const std::vector<float> got = Saabas(**engine, *f, row, {});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_NEAR(got[0], e2 - e0, 1e-6);
  EXPECT_NEAR(got[1], 3.0 - e2, 1e-6);
  EXPECT_NEAR(got[2], f->base_margin[0] + e0, 1e-6);
}

// A node of cover 0 below a root with covers (a branch no training row reached) has expected
// value 0, as the reference TreeSHAP's fractions give: the oracle agrees and the row still sums to
// its margin. A model saved without covers (every root 0) is refused.
TEST(SaabasTest, ZeroCoversBelowTheRootAndModelsWithoutCovers) {
  Forest zero = *MakeDepth2Tree();
  for (int i : {2, 5, 6}) zero.nodes[zero.trees[0].node_begin + i].cover = 0;
  ForestPtr f = std::make_shared<const Forest>(zero);
  auto engine = SaabasEngine::Create(f, nullptr);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::vector<float> row = {0.7f, 0.2f};  // into the cover-0 branch: leaf 5 (value 3)
  const std::vector<float> got = Saabas(**engine, *f, row, {});
  ExpectOracle(*f, row, got, {}, "cover-0 branch");
  const double e0 = 0.6 * (10.0 / 6);  // E(node 2) = 0
  EXPECT_NEAR(got[0], 0.0 - e0, 1e-6);
  EXPECT_NEAR(got[1], 3.0, 1e-6);
  EXPECT_NEAR(got[0] + got[1] + got[2], f->base_margin[0] + 3.0, 1e-5);

  Forest none = *MakeDepth2Tree();
  for (Node& n : none.nodes) n.cover = 0;
  auto refused = SaabasEngine::Create(std::make_shared<const Forest>(none), nullptr);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("no node covers"), absl::string_view::npos)
      << refused.status();
}

TEST(SaabasTest, Errors) {
  ForestPtr f = testing::MakeRandomForest(kForests[0]);
  auto engine = SaabasEngine::Create(f, nullptr);
  ASSERT_TRUE(engine.ok());
  std::vector<float> rows = testing::MakeRandomRows(*f, 2, 1);
  std::vector<float> out(2 * ExplainWidth(*f, true), 0.0f);
  ExplainOptions o;
  o.interactions = true;
  absl::Status s = (*engine)->Explain(MakeRowsView(rows.data(), 2, f->num_features), o,
                                      MakeMatrixView(out.data(), 2, ExplainWidth(*f, true)),
                                      nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("interaction"), absl::string_view::npos) << s;
  o.interactions = false;
  o.iteration_begin = 99;
  s = (*engine)->Explain(MakeRowsView(rows.data(), 2, f->num_features), o,
                         MakeMatrixView(out.data(), 2, ExplainWidth(*f, false)), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  // A model TreeSHAP cannot explain: the same FAILED_PRECONDITION.
  Forest linear = *f;
  linear.has_linear_leaves = true;
  auto refused = SaabasEngine::Create(std::make_shared<const Forest>(linear), nullptr);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status(), CheckExplainable(linear));
}

}  // namespace
}  // namespace grove
