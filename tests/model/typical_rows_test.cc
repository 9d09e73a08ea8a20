// TypicalRows: rows follow the training covers, and the values agree with the walks that made them.
#include "core/model/typical_rows.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/naive_predict.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

using testing::HandForest;

// A stump with 90 of 100 training rows on the left sends about 90% of typical rows left.
TEST(TypicalRowsTest, SplitsFollowTheChildrensCovers) {
  HandForest h(2);
  h.AddTree({h.Split(1, 0.5f, 1, 2, 100), h.Leaf(1.0, 90), h.Leaf(2.0, 10)});
  const ForestPtr f = h.Build();
  const int rows = 4000;
  const std::vector<float> x = TypicalRows(*f, rows, 7);
  ASSERT_EQ(x.size(), static_cast<size_t>(rows) * 2);
  int left = 0;
  for (int r = 0; r < rows; ++r) {
    left += x[r * 2 + 1] < 0.5f;
    EXPECT_EQ(x[r * 2], 0.0f);  // no split on feature 0, no threshold: 0
  }
  EXPECT_NEAR(left / static_cast<double>(rows), 0.9, 0.03);
}

// The probability of reaching each node of tree 0: a split the interval [lo, hi) of its feature
// leaves open divides by the children's covers, a decided one passes everything on.
void ExpectedReach(const Forest& f, int32_t i, double p, std::vector<float> lo, std::vector<float> hi,
                   std::vector<double>* reach) {
  (*reach)[i] += p;
  const Node& n = f.nodes[f.trees[0].node_begin + i];
  if (n.is_leaf()) return;
  const int c = n.feature;
  if (hi[c] <= n.threshold) return ExpectedReach(f, n.left, p, lo, hi, reach);
  if (lo[c] >= n.threshold) return ExpectedReach(f, n.right, p, lo, hi, reach);
  const double cl = f.nodes[f.trees[0].node_begin + n.left].cover;
  const double cr = f.nodes[f.trees[0].node_begin + n.right].cover;
  const double pl = cl + cr > 0 ? cl / (cl + cr) : 1.0;
  std::vector<float> left_hi = hi, right_lo = lo;
  left_hi[c] = n.threshold;
  right_lo[c] = n.threshold;
  ExpectedReach(f, n.left, p * pl, lo, left_hi, reach);
  ExpectedReach(f, n.right, p * (1 - pl), right_lo, hi, reach);
}

// On a deep random tree (features repeated along paths, so some branches cannot be reached from
// the root's choices), every leaf is reached as often as the covers of the free splits above it
// say: the values lie inside the intervals the walks chose.
TEST(TypicalRowsTest, LeavesAreReachedAsTheCoversOfTheFreeSplitsSay) {
  testing::RandomForestOptions o;
  o.num_trees = 1;
  o.max_depth = 7;
  o.num_features = 3;
  o.seed = 11;
  const ForestPtr f = testing::MakeRandomForest(o);
  const Tree& t = f->trees[0];
  std::vector<double> reach(t.num_nodes, 0.0);
  const float inf = std::numeric_limits<float>::infinity();
  ExpectedReach(*f, 0, 1.0, std::vector<float>(3, -inf), std::vector<float>(3, inf), &reach);
  const int rows = 20000;
  const std::vector<float> x = TypicalRows(*f, rows, 3);
  std::vector<int> hits(t.num_nodes, 0);
  for (int r = 0; r < rows; ++r) ++hits[testing::NaiveLeafIndex(*f, 0, &x[r * 3])];
  int leaves = 0;
  for (uint32_t i = 0; i < t.num_nodes; ++i) {
    if (!f->nodes[t.node_begin + i].is_leaf()) continue;
    ++leaves;
    EXPECT_NEAR(hits[i] / static_cast<double>(rows), reach[i], 0.015) << "leaf " << i;
  }
  EXPECT_GT(leaves, 10);
}

// One categorical split, its set on either side (XGBoost: in-set right; LightGBM's flag: left):
// the rows whose category is in the set are the in-set side's share of the cover.
TEST(TypicalRowsTest, ACategoricalSplitsSetSideGetsItsCoversShare) {
  for (uint16_t flags : {uint16_t{0}, static_cast<uint16_t>(kNodeCategoryInSetGoesLeft)}) {
    HandForest h(1);
    h.AddTree({h.CategoricalSplit(0, {1, 2, 40}, 1, 2, 100, flags), h.Leaf(1.0, 30),
               h.Leaf(2.0, 70)});
    const ForestPtr f = h.Build();
    const int rows = 4000;
    const std::vector<float> x = TypicalRows(*f, rows, 5);
    int in_set = 0;
    for (int r = 0; r < rows; ++r) in_set += x[r] == 1.0f || x[r] == 2.0f || x[r] == 40.0f;
    const double want = flags == 0 ? 0.7 : 0.3;
    EXPECT_NEAR(in_set / static_cast<double>(rows), want, 0.03) << "flags " << flags;
  }
}

// Categorical splits follow the covers too, and a row's category agrees with every categorical
// choice it made: tree 0 sends {1, 2} right (cover 70 of 100), tree 1 {2, 3} right (cover 50 of
// 100); a row that went right in tree 0 (category 1 or 2) can go either way in tree 1, one that
// went left (0 or 3; the bitsets name categories 0..31) too. Categories are spread over what the
// choices allow, not one value for every row.
TEST(TypicalRowsTest, CategoricalSplitsFollowTheCoversAndTheRowsCategoryAgrees) {
  HandForest h(1);
  h.AddTree({h.CategoricalSplit(0, {1, 2}, 1, 2, 100), h.Leaf(1.0, 30), h.Leaf(2.0, 70)});
  h.AddTree({h.CategoricalSplit(0, {2, 3}, 1, 2, 100), h.Leaf(1.0, 50), h.Leaf(2.0, 50)});
  const ForestPtr f = h.Build();
  const int rows = 8000;
  // Every row walks both trees, starting at one of them.
  const std::vector<float> x = TypicalRows(*f, rows, 13);
  int right0 = 0, in_both = 0;
  std::vector<int> counts(32, 0);
  for (int r = 0; r < rows; ++r) {
    const float v = x[r];
    ASSERT_EQ(v, std::floor(v));
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 32.0f);
    ++counts[static_cast<int>(v)];
    right0 += v == 1.0f || v == 2.0f;
    in_both += v == 2.0f;
  }
  // Tree 0 walked first (half the rows): right with 0.7; after tree 1, right with its allowed
  // share. Both orders leave tree 0 right for 0.45-0.75 of rows; category 2 (right in both) for
  // some, and categories outside both sets for others.
  EXPECT_GT(right0, rows * 0.45);
  EXPECT_LT(right0, rows * 0.75);
  EXPECT_GT(in_both, rows / 20);
  int distinct = 0;
  for (int c : counts) distinct += c > 0;
  EXPECT_GT(distinct, 10);
}

// Many trees, each row walking 16 of them: the rows are a function of the seed and finite (the
// values agreeing with the walks is what LeavesAreReachedAsTheCoversOfTheFreeSplitsSay checks).
TEST(TypicalRowsTest, RowsAreAFunctionOfTheSeed) {
  testing::RandomForestOptions o;
  o.num_trees = 40;
  o.max_depth = 8;
  o.num_features = 5;
  o.seed = 5;
  const ForestPtr f = testing::MakeRandomForest(o);
  const std::vector<float> a = TypicalRows(*f, 500, 9, 16);
  EXPECT_EQ(a, TypicalRows(*f, 500, 9, 16));
  EXPECT_NE(a, TypicalRows(*f, 500, 10, 16));
  for (float v : a) EXPECT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace grove
