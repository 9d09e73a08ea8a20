// Merged path layouts (core/explain/paths.h): PathElementMatches against GoesLeft traversal on
// random rows for every routing rule, bias and zero fractions, bin packing invariants of the three
// packings, long paths, and the stats summary.
#include "core/explain/paths.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "core/explain/explain.h"
#include "core/model/decision.h"
#include "gtest/gtest.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// Leaf reached by GoesLeft traversal.
int32_t LeafOf(const Forest& f, int t, const float* row) {
  const Node* nodes = f.TreeNodes(t);
  int32_t i = 0;
  while (!nodes[i].is_leaf()) {
    const Node& n = nodes[i];
    i = GoesLeft(n.flags, n.threshold, n.payload, n.aux, f.category_bits.data(), row[n.feature])
            ? n.left
            : n.right;
  }
  return i;
}

PathLayoutPtr Build(const Forest& f, BinPacking packing = BinPacking::kBestFitDecreasing) {
  PathLayoutOptions o;
  o.packing = packing;
  absl::StatusOr<PathLayoutPtr> l = BuildPathLayout(f, o);
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? *l : nullptr;
}

// Every row matches exactly the path of the leaf it reaches, in every tree.
void ExpectMatchesTraversal(const Forest& f, const PathLayout& l, const std::vector<float>& rows) {
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  for (int64_t r = 0; r < n; ++r) {
    const float* row = rows.data() + r * f.num_features;
    std::vector<int32_t> leaf(f.trees.size());
    for (size_t t = 0; t < f.trees.size(); ++t) leaf[t] = LeafOf(f, static_cast<int>(t), row);
    std::vector<int> matched(f.trees.size(), 0);
    for (const PathInfo& p : l.paths) {
      bool all = true;
      for (int i = 0; i < p.length; ++i) {
        const PathElement& e = l.elements[p.element_begin + i];
        const float x = e.feature < 0 ? 0.0f : row[e.feature];
        all = all && PathElementMatches(e, l.category_bits.data(), x);
      }
      ASSERT_EQ(all, p.leaf == leaf[p.tree])
          << "row " << r << " tree " << p.tree << " path leaf " << p.leaf << " reached "
          << leaf[p.tree];
      matched[p.tree] += all;
    }
    for (size_t t = 0; t < f.trees.size(); ++t) ASSERT_EQ(matched[t], 1) << "tree " << t;
  }
}

struct MatchCase {
  int depth;
  double categorical;
  bool lightgbm;
  uint64_t seed;
};

class PathMatchTest : public ::testing::TestWithParam<MatchCase> {};

TEST_P(PathMatchTest, ElementsMatchExactlyTheTraversedLeaf) {
  const MatchCase c = GetParam();
  RandomForestOptions o;
  o.num_trees = 20;
  o.max_depth = c.depth;
  o.num_features = 6;  // few features: many repeats along a path
  o.categorical_fraction = c.categorical;
  o.lightgbm_rules = c.lightgbm;
  o.seed = c.seed;
  ForestPtr f = MakeRandomForest(o);
  PathLayoutPtr l = Build(*f);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->stats.num_paths, f->num_leaves);
  // Repeated features were merged: no feature twice on a path, lengths <= depth + 1.
  for (const PathInfo& p : l->paths) {
    std::set<int32_t> seen;
    EXPECT_EQ(l->elements[p.element_begin].feature, -1);
    for (int i = 1; i < p.length; ++i) {
      EXPECT_TRUE(seen.insert(l->elements[p.element_begin + i].feature).second);
    }
    EXPECT_LE(p.length, f->trees[p.tree].depth + 1);
  }
  ExpectMatchesTraversal(*f, *l, MakeRandomRows(*f, 300, c.seed + 7, 0.15));
}

INSTANTIATE_TEST_SUITE_P(
    Rules, PathMatchTest,
    ::testing::Values(MatchCase{3, 0.0, false, 1}, MatchCase{8, 0.0, false, 2},
                      MatchCase{8, 0.5, false, 3}, MatchCase{8, 0.0, true, 4},
                      MatchCase{8, 0.5, true, 5}, MatchCase{14, 0.3, true, 6},
                      MatchCase{14, 0.3, false, 7}, MatchCase{20, 0.2, true, 8}));

// Hand-built edge cases of the missing-value rules: a numeric split with missing type Zero and one
// without on the same feature, NaN as zero, thresholds in the zero zone.
TEST(PathsTest, MissingZeroAndNanAsZeroMergeExactly) {
  HandForest h(1);
  const uint16_t mz = kNodeMissingZero;
  const uint16_t naz = kNodeNanAsZero;
  // x < 0.5 (missing zero, default right) -> left: x < 1e-36 (no missing rule) -> ...
  h.AddTree({h.Split(0, 0.5f, 1, 2, 10, mz), h.Split(0, 1e-36f, 3, 4, 6, naz), h.Leaf(1.0, 4),
             h.Split(0, -0.25f, 5, 6, 3, mz | kNodeDefaultLeft), h.Leaf(2.0, 3), h.Leaf(3.0, 1),
             h.Leaf(4.0, 2)});
  ForestPtr f = h.Build();
  PathLayoutPtr l = Build(*f);
  std::vector<float> rows = {kNan,   0.0f,  -0.0f, 1e-36f, -1e-36f, 1e-35f, -1e-35f, 2e-35f,
                             -2e-35f, 0.25f, 0.5f,  -0.25f, -0.3f,  1.0f,   -1.0f,
                             std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity()};
  ExpectMatchesTraversal(*f, *l, rows);
}

TEST(PathsTest, CategoricalSetsIntersect) {
  HandForest h(1);
  // Node 0: categories {1, 2, 40} go right; node 2 (right): {2, 3} go right; LightGBM-style on a
  // second tree.
  h.AddTree({h.CategoricalSplit(0, {1, 2, 40}, 1, 2, 10), h.Leaf(1.0, 5),
             h.CategoricalSplit(0, {2, 3}, 3, 4, 5), h.Leaf(2.0, 2), h.Leaf(3.0, 3)});
  const uint16_t lgb = kNodeCategoryInSetGoesLeft | kNodeCategoryTruncate;
  h.AddTree({h.CategoricalSplit(0, {0, 5}, 1, 2, 10, lgb), h.CategoricalSplit(0, {0, 70}, 3, 4, 6, lgb),
             h.Leaf(1.0, 4), h.Leaf(2.0, 3), h.Leaf(3.0, 3)});
  ForestPtr f = h.Build();
  PathLayoutPtr l = Build(*f);
  std::vector<float> rows;
  for (float x = -3.0f; x < 100.0f; x += 0.25f) rows.push_back(x);
  for (float x : {kNan, -0.5f, -0.99f, -1.0f, 1e9f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity()}) {
    rows.push_back(x);
  }
  ExpectMatchesTraversal(*f, *l, rows);
}

TEST(PathsTest, ZeroFractionsAndBiasMatchTheReference) {
  RandomForestOptions o;
  o.num_trees = 30;
  o.max_depth = 7;
  o.num_outputs = 3;
  o.extreme_cover_probability = 0.2;
  o.seed = 11;
  ForestPtr f = MakeRandomForest(o);
  PathLayoutPtr l = Build(*f);
  // Bias column of the reference = layout bias.
  std::vector<float> row(f->num_features, kNan);
  const int64_t width = ExplainWidth(*f, false);
  std::vector<float> out(width);
  ASSERT_TRUE(ExplainCpuReference(*f, MakeRowsView(row.data(), 1, f->num_features), {},
                                  MakeMatrixView(out.data(), 1, width), nullptr)
                  .ok());
  for (int k = 0; k < f->num_outputs; ++k) {
    EXPECT_NEAR(l->bias[k], out[k * (f->num_features + 1) + f->num_features],
                1e-6 * std::max(1.0, std::abs(l->bias[k])));
  }
  // Per tree: zero-fraction products over its paths sum to 1 (covers add up exactly).
  std::vector<double> total(f->trees.size(), 0.0);
  for (const PathInfo& p : l->paths) {
    double z = 1;
    for (int i = 0; i < p.length; ++i) z *= l->elements[p.element_begin + i].zero_fraction;
    total[p.tree] += z;
  }
  for (double t : total) EXPECT_NEAR(t, 1.0, 1e-9);
}

void ExpectValidPacking(const PathLayout& l) {
  ASSERT_GE(l.bin_offsets.size(), 1u);
  EXPECT_EQ(l.bin_offsets.front(), 0u);
  for (int64_t b = 0; b < l.num_bins(); ++b) {
    const uint32_t begin = l.bin_offsets[b], end = l.bin_offsets[b + 1];
    ASSERT_LT(begin, end);
    ASSERT_LE(end - begin, static_cast<uint32_t>(kWarpLanes));
    // Whole paths only.
    uint32_t i = begin;
    while (i < end) {
      const PathInfo& p = l.paths[l.elements[i].path];
      ASSERT_EQ(p.element_begin, i);
      ASSERT_EQ(p.bin, static_cast<uint32_t>(b));
      for (int k = 0; k < p.length; ++k) ASSERT_EQ(l.elements[i + k].path, l.elements[i].path);
      i += p.length;
    }
    ASSERT_EQ(i, end);
  }
  int64_t binned = 0;
  for (const PathInfo& p : l.paths) binned += p.bin != UINT32_MAX;
  EXPECT_EQ(binned + static_cast<int64_t>(l.long_paths.size()), l.stats.num_paths);
}

TEST(PathsTest, AllPackingsAreValidAndDecreasingOnesPackTighter) {
  ForestPtr f = MakeRandomForest({.num_trees = 200, .max_depth = 9, .seed = 21});
  PathLayoutPtr bfd = Build(*f, BinPacking::kBestFitDecreasing);
  PathLayoutPtr ffd = Build(*f, BinPacking::kFirstFitDecreasing);
  PathLayoutPtr nf = Build(*f, BinPacking::kNextFit);
  for (const PathLayoutPtr& l : {bfd, ffd, nf}) ExpectValidPacking(*l);
  EXPECT_LE(bfd->num_bins(), nf->num_bins());
  EXPECT_LE(ffd->num_bins(), nf->num_bins());
  EXPECT_GT(bfd->stats.utilisation, 0.8);
  // Lower bound: ceil(elements / 32).
  EXPECT_GE(bfd->num_bins() * kWarpLanes, bfd->stats.num_elements);
  const std::string d = bfd->stats.Describe();
  EXPECT_NE(d.find("utilisation"), std::string::npos) << d;
  EXPECT_NE(d.find("bfd"), std::string::npos) << d;
}

TEST(PathsTest, PackBinsSmallExamples) {
  int64_t bins = 0;
  // 20, 20, 12, 12: BFD/FFD give 2 bins ({20,12},{20,12}); NF in order gives 3.
  std::vector<int> sizes = {20, 20, 12, 12};
  PackBins(sizes, 32, BinPacking::kBestFitDecreasing, &bins);
  EXPECT_EQ(bins, 2);
  PackBins(sizes, 32, BinPacking::kFirstFitDecreasing, &bins);
  EXPECT_EQ(bins, 2);
  PackBins(sizes, 32, BinPacking::kNextFit, &bins);
  EXPECT_EQ(bins, 3);
  // Best fit picks the fullest bin: 30, 20, then 2 goes with 30.
  std::vector<uint32_t> b = PackBins({20, 30, 2}, 32, BinPacking::kBestFitDecreasing, &bins);
  EXPECT_EQ(b[2], b[1]);
  EXPECT_TRUE(PackBins({}, 32, BinPacking::kNextFit, &bins).empty());
  EXPECT_EQ(bins, 0);
  EXPECT_TRUE(ParseBinPacking("ffd").ok());
  EXPECT_FALSE(ParseBinPacking("worst").ok());
}

TEST(PathsTest, PathsLongerThanAWarpAreListedNotBinned) {
  RandomForestOptions o;
  o.num_trees = 3;
  o.max_depth = 60;
  o.num_features = 200;
  o.leaf_probability = 0.6;
  o.seed = 5;
  ForestPtr f = MakeRandomForest(o);
  PathLayoutPtr l = Build(*f);
  ASSERT_GT(l->long_paths.size(), 0u);
  EXPECT_GT(l->max_length, kWarpLanes);
  for (uint32_t id : l->long_paths) {
    EXPECT_GT(l->paths[id].length, kWarpLanes);
    EXPECT_EQ(l->paths[id].bin, UINT32_MAX);
  }
  ExpectValidPacking(*l);
  EXPECT_EQ(l->stats.num_long_paths, static_cast<int64_t>(l->long_paths.size()));
  ExpectMatchesTraversal(*f, *l, MakeRandomRows(*f, 50, 9));
}

TEST(PathsTest, LinearTreesAreRefused) {
  HandForest h(1);
  h.AddTree({h.Split(0, 0.5f, 1, 2, 10), h.Leaf(1.0, 6), h.Leaf(2.0, 4)});
  h.forest.linear_leaves.push_back({});
  Forest f = h.forest;
  f.has_linear_leaves = true;
  EXPECT_EQ(BuildPathLayout(f).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace grove
