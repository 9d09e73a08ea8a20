// The level layout (core/predict/tahoe/tahoe_level.h): every tree depth by depth with siblings side
// by side, a depth's pairs in cover order, walks every row to the same leaf as the depth-first
// layout, and the sums of TahoeSumFixedRoots over it are bit-identical (seeded random forests with
// NaNs and early leaves, and every corpus model that takes the fixed walk); its shape invariants
// hold; forests without the fixed walk are refused with FAILED_PRECONDITION.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/loader.h"
#include "core/predict/tahoe/tahoe_forest.h"
#include "core/predict/tahoe/tahoe_level.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

struct Combined {
  std::vector<TahoeNode8> nodes;  // depth-first nodes, then the level layout
  TahoeLevelLayout level;
};

Combined Combine(const TahoeForest& tf) {
  Combined c;
  c.nodes = tf.nodes8();
  absl::StatusOr<TahoeLevelLayout> level =
      BuildTahoeLevelLayout(tf, static_cast<uint32_t>(c.nodes.size()));
  EXPECT_TRUE(level.ok()) << level.status();
  if (level.ok()) {
    c.level = *std::move(level);
    c.nodes.insert(c.nodes.end(), c.level.nodes.begin(), c.level.nodes.end());
  }
  return c;
}

// Every tree and row: the same leaf node (value and word) by both layouts, with the NaN test and,
// for rows without NaN, without it; then the sums over all trees, one row and four at a time.
// Adds the number of (row, tree) walks compared to *walks.
void CheckSameLeaves(const TahoeForest& tf, const std::vector<float>& rows, int64_t n,
                     const std::string& what, int* walks) {
  const Combined c = Combine(tf);
  ASSERT_EQ(c.level.roots.size(), tf.trees().size());
  const TahoeForestView v = tf.HostView();
  const int F = tf.forest().num_features;
  std::vector<uint32_t> dfs_roots, level_roots = c.level.roots;
  for (const TahoeTree& t : tf.trees()) dfs_roots.push_back(t.root);
  for (int64_t r = 0; r < n; ++r) {
    const TahoeNanPaddedRow<TahoePlainRow> row{TahoePlainRow{rows.data() + r * F},
                                               static_cast<uint32_t>(F)};
    bool has_nan = false;
    for (int j = 0; j < F; ++j) has_nan |= std::isnan(rows[r * F + j]);
    for (size_t i = 0; i < dfs_roots.size(); ++i) {
      TahoeNode8 a, b;
      TahoeWalkFixed(c.nodes.data(), dfs_roots[i], row, v, a, v.fixed_steps);
      TahoeWalkFixed<false, true>(c.nodes.data(), level_roots[i], row, v, b,
                                  v.fixed_steps);
      ASSERT_EQ(a.value, b.value) << what << " row " << r << " tree " << i;
      ASSERT_EQ(a.word, b.word) << what << " row " << r << " tree " << i;
      if (!has_nan) {
        TahoeNode8 d;
        TahoeWalkFixed<true, true>(c.nodes.data(), level_roots[i], row, v, d,
                                   v.fixed_steps);
        ASSERT_EQ(a.word, d.word) << what << " (NaN-free walk) row " << r << " tree " << i;
      }
      ++*walks;
    }
    const TahoeNanPaddedRow<TahoePlainRow> one[1] = {row};
    double want[1], got[1];
    const uint32_t T = static_cast<uint32_t>(dfs_roots.size());
    TahoeSumFixedRoots<false, 1>(v, c.nodes.data(), dfs_roots.data(), 0, T, one, want);
    TahoeSumFixedRoots<false, 1, true>(v, c.nodes.data(), level_roots.data(), 0, T, one, got);
    EXPECT_EQ(want[0], got[0]) << what << " row " << r;
  }
  if (n >= 4) {
    TahoeNanPaddedRow<TahoePlainRow> four[4];
    for (int j = 0; j < 4; ++j) {
      four[j] = {TahoePlainRow{rows.data() + j * F}, static_cast<uint32_t>(F)};
    }
    double want[4], got[4];
    const uint32_t T = static_cast<uint32_t>(dfs_roots.size());
    TahoeSumFixedRoots<false, 4>(v, c.nodes.data(), dfs_roots.data(), 0, T, four, want);
    TahoeSumFixedRoots<false, 4, true>(v, c.nodes.data(), level_roots.data(), 0, T, four, got);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(want[j], got[j]) << what << " four rows, row " << j;
  }
}

TEST(TahoeLevelTest, RandomForestsReachTheSameLeavesAndSums) {
  int walks = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    RandomForestOptions o;
    o.seed = seed;
    o.num_trees = 25;
    o.max_depth = 2 + static_cast<int>(seed * 3 % 15);  // past kMaxFixedSteps: the vote walk too
    o.num_features = 1 + static_cast<int>(seed * 7 % 30);
    o.leaf_probability = 0.3;
    ForestPtr f = MakeRandomForest(o);
    const std::vector<float> rows = MakeRandomRows(*f, 64, seed + 77, seed % 2 ? 0.2 : 0.0);
    for (bool rearrange : {true, false}) {
      TahoeFormatOptions fo;
      fo.node_rearrangement = rearrange;
      absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f, fo);
      ASSERT_TRUE(tf.ok()) << tf.status();
      ASSERT_TRUE((*tf)->fixed_walk());
      CheckSameLeaves(**tf, rows, 64, "seed " + std::to_string(seed), &walks);
    }
  }
  EXPECT_EQ(walks, 8 * 2 * 64 * 25);
}

// TahoeForest::covers() by level-layout position: the depth-first tree walked alongside (the
// level layout stores a split's right child, then its left).
void CoversByPosition(const TahoeForest& tf, const TahoeLevelLayout& level, uint32_t base,
                      size_t t, std::vector<double>& cover) {
  const uint32_t fb = tf.HostView().feature_bits;
  const uint32_t dshift = fb + tahoe_bits::kNumFlags;
  const std::vector<TahoeNode8>& dfs = tf.nodes8();
  std::vector<std::pair<uint32_t, uint32_t>> stack{{level.roots[t] - base, tf.trees()[t].root}};
  while (!stack.empty()) {
    const auto [i, d] = stack.back();
    stack.pop_back();
    const uint32_t flags = (dfs[d].word >> fb) & ((1u << tahoe_bits::kNumFlags) - 1u);
    ASSERT_EQ(level.nodes[i].value, dfs[d].value);
    cover[i] = tf.covers()[d];
    if ((flags & tahoe_bits::kLeaf) != 0) continue;
    const uint32_t distant = dfs[d].word >> dshift;
    const bool hot_right = (flags & tahoe_bits::kHotRight) != 0;
    const uint32_t pair = i + (level.nodes[i].word >> dshift);
    stack.push_back({pair, hot_right ? d + 1 : d + distant});      // right
    stack.push_back({pair + 1, hot_right ? d + distant : d + 1});  // left
  }
}

TEST(TahoeLevelTest, TreesGoDepthByDepthWithSiblingsSideBySideInCoverOrder) {
  RandomForestOptions o;
  o.seed = 5;
  o.num_trees = 20;
  o.max_depth = 9;
  o.num_features = 12;
  o.leaf_probability = 0.25;
  // The random trees split their covers unevenly, so the cover order is not the breadth-first one;
  // categorical splits whose children the format renames take their own covers along.
  o.categorical_fraction = 0.3;
  ForestPtr f = MakeRandomForest(o);
  absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
  ASSERT_TRUE(tf.ok()) << tf.status();
  const uint32_t base = 1000;
  absl::StatusOr<TahoeLevelLayout> level = BuildTahoeLevelLayout(**tf, base);
  ASSERT_TRUE(level.ok()) << level.status();
  EXPECT_EQ(level->nodes.size(), (*tf)->nodes8().size());
  const uint32_t fb = (*tf)->HostView().feature_bits;
  const uint32_t dshift = fb + tahoe_bits::kNumFlags;
  int reordered = 0;
  for (size_t t = 0; t < level->roots.size(); ++t) {
    const uint32_t begin = level->roots[t] - base;
    const uint32_t end = t + 1 < level->roots.size() ? level->roots[t + 1] - base
                                                     : static_cast<uint32_t>(level->nodes.size());
    std::vector<double> cover(level->nodes.size(), -1);
    CoversByPosition(**tf, *level, base, t, cover);
    // Depth by depth: the pairs of one depth's splits follow one another with no gaps, right after
    // that depth, in non-increasing cover of their splits; a node's depth never decreases along
    // the array.
    std::vector<int> depth(end - begin, -1);
    depth[0] = 0;
    uint32_t next_pair = begin + 1;
    uint32_t i = begin;
    while (i < next_pair) {
      // The splits of one depth, [i, depth_end), in the order of their pairs.
      const uint32_t depth_end = next_pair;
      std::vector<std::pair<uint32_t, uint32_t>> pairs;  // (pair, split)
      for (; i < depth_end; ++i) {
        const TahoeNode8& n = level->nodes[i];
        ASSERT_GE(depth[i - begin], 0) << "tree " << t << " node " << i << " is unreachable";
        if (i > begin) EXPECT_GE(depth[i - begin], depth[i - begin - 1]);
        if (((n.word >> fb) & tahoe_bits::kLeaf) != 0) {
          EXPECT_EQ(n.word >> dshift, 0u);
          continue;
        }
        EXPECT_EQ(((n.word >> fb) & tahoe_bits::kHotRight), 0u);
        pairs.push_back({i + (n.word >> dshift), i});
      }
      std::sort(pairs.begin(), pairs.end());
      for (size_t k = 0; k < pairs.size(); ++k) {
        ASSERT_EQ(pairs[k].first, next_pair) << "tree " << t << " split " << pairs[k].second;
        ASSERT_LT(next_pair + 1, end);
        depth[next_pair - begin] = depth[next_pair + 1 - begin] = depth[pairs[k].second - begin] + 1;
        if (k > 0) {
          EXPECT_GE(cover[pairs[k - 1].second], cover[pairs[k].second]) << "tree " << t;
          reordered += pairs[k - 1].second > pairs[k].second;
        }
        next_pair += 2;
      }
    }
    EXPECT_EQ(next_pair, end) << "tree " << t;
  }
  EXPECT_GT(reordered, 0) << "no pair left breadth-first order: the test does not test the order";
}

TEST(TahoeLevelTest, CorpusModelsReachTheSameLeavesAndSums) {
  const std::vector<std::string> dirs = testing::CorpusCaseDirs();
  if (dirs.empty()) GTEST_SKIP() << "no corpus found";
  int fixed = 0;
  for (const std::string& dir : dirs) {
    absl::StatusOr<testing::CorpusModel> m = testing::LoadCorpusModel(dir);
    ASSERT_TRUE(m.ok()) << m.status();
    const testing::CorpusCase& c = m->c;
    const ForestPtr& f = m->forest;
    absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
    ASSERT_TRUE(tf.ok()) << tf.status();
    if (!(*tf)->fixed_walk()) {
      EXPECT_EQ(BuildTahoeLevelLayout(**tf, 0).status().code(),
                absl::StatusCode::kFailedPrecondition)
          << c.name;
      continue;
    }
    const std::vector<float> rows = testing::GroveRows(c, *f);
    const int64_t n = std::min<int64_t>(c.rows, 200);
    int walks = 0;
    CheckSameLeaves(**tf, rows, n, c.name, &walks);
    EXPECT_GT(walks, 0) << c.name;
    ++fixed;
  }
  EXPECT_GT(fixed, 0);
}

}  // namespace
}  // namespace grove
