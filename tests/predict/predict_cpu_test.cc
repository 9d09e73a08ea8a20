// CPU reference predictor on hand-built forests (every routing rule, links, ranges, errors) and on
// seeded random forests (thread and run-to-run identity, consistency of the three outputs).
#include <cmath>
#include <limits>
#include <vector>

#include "core/common/thread_pool.h"
#include "core/model/transform.h"
#include "core/predict/predict.h"
#include "core/model/traverse.h"
#include "gtest/gtest.h"
#include "tests/testing/predict_reference.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// One split on feature 0 at 0.5 with `flags`; left leaf 1.0 (id 1), right leaf 2.0 (id 2).
ForestPtr Stump(uint16_t flags) {
  HandForest h(1);
  h.AddTree({h.Split(0, 0.5f, 1, 2, 2, flags), h.Leaf(1.0, 1), h.Leaf(2.0, 1)});
  return h.Build();
}

TEST(PredictCpuTest, NumericSplitLessThanGoesLeftEqualGoesRight) {
  ForestPtr f = Stump(0);
  const std::vector<float> rows = {0.25f, std::nextafter(0.5f, 0.0f), 0.5f, 3.0f, -1e30f};
  EXPECT_EQ(ReferencePrediction(*f, rows, Kind(OutputKind::kMargin)),
            (std::vector<float>{1, 1, 2, 2, 1}));
}

TEST(PredictCpuTest, NanTakesTheDefaultDirection) {
  EXPECT_EQ(ReferencePrediction(*Stump(kNodeDefaultLeft), {kNan}, Kind(OutputKind::kMargin))[0], 1.0f);
  EXPECT_EQ(ReferencePrediction(*Stump(0), {kNan}, Kind(OutputKind::kMargin))[0], 2.0f);
}

TEST(PredictCpuTest, LightgbmMissingTypes) {
  // None: NaN compares as 0.0 (0 < 0.5: left) whatever the default direction.
  EXPECT_EQ(ReferencePrediction(*Stump(kNodeNanAsZero), {kNan}, Kind(OutputKind::kMargin))[0], 1.0f);
  // Zero: |x| <= 1e-35 and NaN take the default direction (right here).
  ForestPtr zero = Stump(kNodeMissingZero);
  EXPECT_EQ(ReferencePrediction(*zero, {0.0f, 1e-36f, -1e-36f, kNan, 1e-30f}, Kind(OutputKind::kMargin)),
            (std::vector<float>{2, 2, 2, 2, 1}));
}

TEST(PredictCpuTest, XgboostCategoricalSetGoesRight) {
  HandForest h(1);
  h.AddTree({h.CategoricalSplit(0, {1, 3, 40}, 1, 2, 2), h.Leaf(1.0, 1), h.Leaf(2.0, 1)});
  ForestPtr f = h.Build();
  // In set: right. Out of set, negative, beyond the bitset: left. NaN: default (right here).
  EXPECT_EQ(ReferencePrediction(*f, {1, 3, 40, 0, 2, -1, -0.5f, 64, 1000, kNan}, Kind(OutputKind::kMargin)),
            (std::vector<float>{2, 2, 2, 1, 1, 1, 1, 1, 1, 2}));
}

TEST(PredictCpuTest, LightgbmCategoricalSetGoesLeftWithTruncation) {
  HandForest h(1);
  h.AddTree({h.CategoricalSplit(0, {0, 2}, 1, 2, 2,
                                kNodeCategoryInSetGoesLeft | kNodeCategoryTruncate),
             h.Leaf(1.0, 1), h.Leaf(2.0, 1)});
  ForestPtr f = h.Build();
  // (int)-0.5 == 0 is in the set; 2.7 -> 2; -1 and NaN (default right) go right.
  EXPECT_EQ(ReferencePrediction(*f, {0, -0.5f, 2.7f, 1, -1, kNan, 33}, Kind(OutputKind::kMargin)),
            (std::vector<float>{1, 1, 1, 2, 2, 2, 2}));
}

TEST(PredictCpuTest, BaseMarginGroupsAndTreeWeights) {
  HandForest h(1, 2);
  h.forest.base_margin = {0.5, -0.25};
  h.AddTree({h.Split(0, 0.0f, 1, 2, 2), h.Leaf(1.0, 1), h.Leaf(2.0, 1)}, /*group=*/0);
  h.AddTree({h.Split(0, 0.0f, 1, 2, 2), h.Leaf(10.0, 1), h.Leaf(20.0, 1)}, /*group=*/1,
            /*weight=*/0.5);
  ForestPtr f = h.Build();
  EXPECT_EQ(ReferencePrediction(*f, {-1, 1}, Kind(OutputKind::kMargin)),
            (std::vector<float>{1.5f, 4.75f, 2.5f, 9.75f}));
}

TEST(PredictCpuTest, VectorLeaves) {
  HandForest h(1, 3);
  h.forest.base_margin = {1, 2, 3};
  h.AddTree({h.Split(0, 0.0f, 1, 2, 2), h.Leaf({1, 2, 3}, 1), h.Leaf({-1, -2, -3}, 1)}, 0, 2.0, 3);
  ForestPtr f = h.Build();
  EXPECT_TRUE(f->has_vector_leaves);
  EXPECT_EQ(ReferencePrediction(*f, {-1, 1}, Kind(OutputKind::kMargin)),
            (std::vector<float>{3, 6, 9, -1, -2, -3}));
}

TEST(PredictCpuTest, LinearLeavesFallBackToTheConstantLeafOnNan) {
  HandForest h(3);
  h.AddTree({h.Split(0, 0.0f, 1, 2, 2), h.Leaf(7.0, 1), h.Leaf(9.0, 1)});
  h.forest.linear_features = {1, 2};
  h.forest.linear_coeffs = {2.0, -0.5};
  h.forest.linear_leaves.push_back(LinearLeaf{1.0, 0, 2});  // 1 + 2 x1 - 0.5 x2
  h.forest.nodes[1].aux = 1;                                // left leaf is linear
  ForestPtr f = h.Build();
  EXPECT_EQ(ReferencePrediction(*f, {-1, 3, 4, -1, kNan, 4, 1, kNan, kNan}, Kind(OutputKind::kMargin)),
            (std::vector<float>{5.0f, 7.0f, 9.0f}));
}

// Two rounds of two outputs: trees 0,1 (round 0), 2,3 (round 1).
ForestPtr TwoRounds(Link link, bool average = false) {
  HandForest h(1, 2);
  h.forest.objective.link = link;
  h.forest.objective.average_output = average;
  for (int t = 0; t < 4; ++t) {
    h.AddTree({h.Split(0, 0.0f, 1, 2, 2), h.Leaf(t + 1.0, 1, 7), h.Leaf(-t - 1.0, 1, 8)},
              t % 2);
  }
  return h.Build();
}

TEST(PredictCpuTest, IterationRangeAndLeafIds) {
  ForestPtr f = TwoRounds(Link::kIdentity);
  EXPECT_EQ(f->num_iterations, 2);
  EXPECT_EQ(ReferencePrediction(*f, {-1}, Kind(OutputKind::kMargin)), (std::vector<float>{4, 6}));
  EXPECT_EQ(ReferencePrediction(*f, {-1}, Kind(OutputKind::kMargin, 1)), (std::vector<float>{3, 4}));
  EXPECT_EQ(ReferencePrediction(*f, {-1}, Kind(OutputKind::kMargin, 0, 1)), (std::vector<float>{1, 2}));
  EXPECT_EQ(PredictWidth(*f, Kind(OutputKind::kLeaf)), 4);
  EXPECT_EQ(PredictWidth(*f, Kind(OutputKind::kLeaf, 1, 2)), 2);
  EXPECT_EQ(ReferencePrediction(*f, {-1, 1}, Kind(OutputKind::kLeaf, 1, 2)),
            (std::vector<float>{7, 7, 8, 8}));
}

TEST(PredictCpuTest, PredictionAppliesTheLink) {
  ForestPtr f = TwoRounds(Link::kSoftmax);
  const std::vector<float> p = ReferencePrediction(*f, {-1}, Kind(OutputKind::kPrediction));
  ASSERT_EQ(p.size(), 2u);
  EXPECT_FLOAT_EQ(p[0], static_cast<float>(1.0 / (1.0 + std::exp(2.0))));
  EXPECT_FLOAT_EQ(p[1], static_cast<float>(1.0 / (1.0 + std::exp(-2.0))));
  ForestPtr g = TwoRounds(Link::kArgmax);
  EXPECT_EQ(PredictWidth(*g, Kind(OutputKind::kPrediction)), 1);
  EXPECT_EQ(ReferencePrediction(*g, {-1, 1}, Kind(OutputKind::kPrediction)), (std::vector<float>{1, 0}));
}

TEST(PredictCpuTest, AverageOutputDividesByIterationsInRange) {
  ForestPtr f = TwoRounds(Link::kIdentity, /*average=*/true);
  // The margin is the plain sum (LightGBM raw_score); the prediction averages over rounds used.
  EXPECT_EQ(ReferencePrediction(*f, {-1}, Kind(OutputKind::kMargin)), (std::vector<float>{4, 6}));
  EXPECT_EQ(ReferencePrediction(*f, {-1}, Kind(OutputKind::kPrediction)), (std::vector<float>{2, 3}));
  EXPECT_EQ(ReferencePrediction(*f, {-1}, Kind(OutputKind::kPrediction, 1)), (std::vector<float>{3, 4}));
}

TEST(PredictCpuTest, RejectsBadShapesAndRanges) {
  ForestPtr f = TwoRounds(Link::kIdentity);
  std::vector<float> rows = {1, 2}, out(4);
  PredictOptions o = Kind(OutputKind::kMargin);
  // Two columns for a one-feature model.
  absl::Status s = PredictCpu(*f, MakeRowsView(rows.data(), 1, 2), o,
                              MakeMatrixView(out.data(), 1, 2), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  // Output of the wrong width.
  s = PredictCpu(*f, MakeRowsView(rows.data(), 2, 1), o, MakeMatrixView(out.data(), 2, 1), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  for (auto [b, e] : {std::pair{-1, 0}, std::pair{0, 3}, std::pair{2, 0}, std::pair{1, 1}}) {
    PredictOptions r = Kind(OutputKind::kMargin, b, e);
    s = PredictCpu(*f, MakeRowsView(rows.data(), 2, 1), r, MakeMatrixView(out.data(), 2, 2),
                   nullptr);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b << "," << e << ": " << s;
  }
  // No rows is fine.
  EXPECT_TRUE(PredictCpu(*f, MakeRowsView(rows.data(), 0, 1), o, MakeMatrixView(out.data(), 0, 2),
                         nullptr)
                  .ok());
}

TEST(PredictCpuTest, StridedViews) {
  ForestPtr f = Stump(0);
  const std::vector<float> rows = {0.0f, 99.0f, 1.0f, 99.0f};
  std::vector<float> out(6, -1.0f);
  RowsView in{rows.data(), 2, 1, 2};
  MatrixView<float> o{out.data(), 2, 1, 3};
  ASSERT_TRUE(PredictCpu(*f, in, Kind(OutputKind::kMargin), o, nullptr).ok());
  EXPECT_EQ(out, (std::vector<float>{1, -1, -1, 2, -1, -1}));
}

TEST(PredictCpuTest, OutputKindNames) {
  EXPECT_STREQ(OutputKindName(OutputKind::kMargin), "margin");
  EXPECT_STREQ(OutputKindName(OutputKind::kPrediction), "prediction");
  EXPECT_STREQ(OutputKindName(OutputKind::kLeaf), "leaf");
}

// An independent evaluation: recursive descent with the same decision.
double RecursiveValue(const Forest& f, int t, int node, const float* row, int k) {
  const Node& n = f.TreeNodes(t)[node];
  if (n.is_leaf()) return f.leaf_values[n.payload + k];
  return RecursiveValue(
      f, t,
      GoesLeft(n.flags, n.threshold, n.payload, n.aux, f.category_bits.data(), row[n.feature])
          ? n.left
          : n.right,
      row, k);
}

class RandomForestPredictTest : public ::testing::TestWithParam<int> {};

TEST_P(RandomForestPredictTest, MatchesIndependentSumAndIsDeterministic) {
  RandomForestOptions o;
  o.seed = GetParam();
  o.num_trees = 12;
  o.num_features = 7;
  o.num_outputs = 1 + GetParam() % 3;
  o.vector_leaves = GetParam() % 4 == 3;
  o.categorical_fraction = 0.3;
  o.lightgbm_rules = GetParam() % 2 == 1;
  o.max_depth = 2 + GetParam() % 6;
  ForestPtr f = MakeRandomForest(o);
  const int64_t n = 300;
  const std::vector<float> rows = MakeRandomRows(*f, n, GetParam());
  const std::vector<float> margin = ReferencePrediction(*f, rows, Kind(OutputKind::kMargin));
  const int K = f->num_outputs;
  for (int64_t r = 0; r < n; ++r) {
    const float* row = rows.data() + r * f->num_features;
    for (int k = 0; k < K; ++k) {
      double want = f->base_margin[k];
      for (int t = 0; t < static_cast<int>(f->trees.size()); ++t) {
        const Tree& tree = f->trees[t];
        if (tree.leaf_width == 1 && tree.group != k) continue;
        want += tree.weight * RecursiveValue(*f, t, 0, row, tree.leaf_width == 1 ? 0 : k);
      }
      ASSERT_EQ(margin[r * K + k], static_cast<float>(want)) << "row " << r << " output " << k;
    }
  }
  ThreadPool pool(3);
  for (OutputKind kind : {OutputKind::kMargin, OutputKind::kPrediction, OutputKind::kLeaf}) {
    const std::vector<float> a = ReferencePrediction(*f, rows, Kind(kind));
    EXPECT_EQ(a, ReferencePrediction(*f, rows, Kind(kind), &pool)) << OutputKindName(kind);
    EXPECT_EQ(a, ReferencePrediction(*f, rows, Kind(kind), &pool)) << OutputKindName(kind);
  }
  // Leaf ids name leaves of the right trees.
  const std::vector<float> leaves = ReferencePrediction(*f, rows, Kind(OutputKind::kLeaf));
  const size_t T = f->trees.size();
  for (int64_t r = 0; r < n; ++r) {
    for (size_t t = 0; t < T; ++t) {
      const Node* nodes = f->TreeNodes(static_cast<int>(t));
      const int32_t leaf = TraverseTree(nodes, f->category_bits.data(),
                                        rows.data() + r * f->num_features);
      ASSERT_EQ(leaves[r * T + t], static_cast<float>(nodes[leaf].leaf_id));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomForestPredictTest, ::testing::Range(1, 13));

}  // namespace
}  // namespace grove
