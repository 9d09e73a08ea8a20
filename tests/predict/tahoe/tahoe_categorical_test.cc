// Categorical splits in the Tahoe format's fixed walk (core/predict/tahoe/tahoe_node.h,
// tahoe_walk.h): forests with categorical splits take the fixed walk; their splits are normalised
// (listed categories go left) with sets of categories 0..31 in the node and larger ones in the
// table; and every row reaches, tree by tree, the leaf that the reference walk of the model
// (core/model/traverse.h) reaches -- by the depth-first fixed walk, by the level layout's walk, with
// and without the NaN test, one and four rows at a time -- on seeded random forests with XGBoost's
// and LightGBM's rules (sets of 1 to 3 words, NaNs, invalid and fractional categories) and on every
// categorical model of the corpus. The tree-per-lane layout, whose step is numeric only, refuses
// them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/model/traverse.h"
#include "core/predict/tahoe/tahoe_forest.h"
#include "core/predict/tahoe/tahoe_lane.h"
#include "core/predict/tahoe/tahoe_level.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

bool HasCategorical(const Forest& f) {
  return std::any_of(f.nodes.begin(), f.nodes.end(),
                     [](const Node& n) { return !n.is_leaf() && n.is_categorical(); });
}

// The library's leaf id of every (row, tree) by the reference walk, tree t of the model at
// [r * T + t].
std::vector<int32_t> ReferenceLeaves(const Forest& f, const std::vector<float>& rows, int64_t n) {
  const int T = static_cast<int>(f.trees.size());
  std::vector<int32_t> ids(n * T);
  for (int64_t r = 0; r < n; ++r) {
    const float* row = rows.data() + r * f.num_features;
    for (int t = 0; t < T; ++t) {
      const Node* nodes = f.TreeNodes(t);
      ids[r * T + t] = nodes[TraverseTree(nodes, f.category_bits.data(), row)].leaf_id;
    }
  }
  return ids;
}

// `rows` as row chunk stages them for the code test: categorical features as category codes.
std::vector<float> CategoryCodes(const TahoeForest& tf, std::vector<float> rows) {
  const TahoeForestView v = tf.HostView();
  const size_t nf = static_cast<size_t>(tf.forest().num_features);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (TahoeIsCatFeature(v.cat_features, static_cast<uint32_t>(i % nf))) {
      rows[i] = TahoeCategoryCode(rows[i], v.cat_low);
    }
  }
  return rows;
}

// Every walk of the fixed family with the categorical test kCat against the reference leaves of
// `rows`, walking `walk_rows` (`rows`, or for kTahoeCatCodes their CategoryCodes); returns the
// walks compared.
template <int kCat>
int64_t CheckWalksWith(const TahoeForest& tf, const std::vector<float>& rows,
                       const std::vector<float>& walk_rows, int64_t n, const std::string& what) {
  const Forest& f = tf.forest();
  EXPECT_TRUE(tf.fixed_walk()) << what;
  EXPECT_TRUE(tf.categorical()) << what;
  if (!tf.fixed_walk()) return 0;
  const std::vector<int32_t> want = ReferenceLeaves(f, rows, n);
  std::vector<TahoeNode8> nodes = tf.nodes8();
  absl::StatusOr<TahoeLevelLayout> level =
      BuildTahoeLevelLayout(tf, static_cast<uint32_t>(nodes.size()));
  EXPECT_TRUE(level.ok()) << what << ": " << level.status();
  if (!level.ok()) return 0;
  nodes.insert(nodes.end(), level->nodes.begin(), level->nodes.end());
  // The level layout's leaves carry the depth-first leaves' words and values; their library ids
  // are found through the depth-first leaf with the same value and word in the same tree.
  const TahoeForestView v = tf.HostView();
  const int T = static_cast<int>(f.trees.size());
  const uint32_t nf = static_cast<uint32_t>(f.num_features);
  int64_t walks = 0;
  for (int64_t r = 0; r < n; ++r) {
    const TahoePlainRow plain{rows.data() + r * f.num_features};
    const TahoeNanPaddedRow<TahoePlainRow> row{
        TahoePlainRow{walk_rows.data() + r * f.num_features}, nf};
    bool has_nan = false;
    for (uint32_t j = 0; j < nf; ++j) has_nan |= std::isnan(plain[j]);  // codes keep NaN
    for (size_t i = 0; i < tf.trees().size(); ++i) {
      const TahoeTree& t = tf.trees()[i];
      const int32_t expected = want[r * T + t.orig];
      const std::string where = what + " row " + std::to_string(r) + " tree " +
                                std::to_string(t.orig);
      TahoeNode8 a, b, c, d;
      const uint32_t ia = TahoeWalkFixed<false, false, kCat>(nodes.data(), t.root, row, v, a);
      EXPECT_EQ(tf.leaf_ids()[ia], expected) << where;
      if (tf.leaf_ids()[ia] != expected) return walks;  // one report per forest
      const uint32_t ib =
          TahoeWalkFixed<false, false, kCat>(nodes.data(), t.root, row, v, b, v.fixed_steps);
      EXPECT_EQ(ib, ia) << where << " (exact steps)";
      TahoeWalkFixed<false, true, kCat>(nodes.data(), level->roots[i], row, v, c, v.fixed_steps);
      EXPECT_EQ(c.value, a.value) << where << " (level layout)";
      EXPECT_EQ(c.word, a.word) << where << " (level layout)";
      if (!has_nan) {
        TahoeWalkFixed<true, true, kCat>(nodes.data(), level->roots[i], row, v, d, v.fixed_steps);
        EXPECT_EQ(d.word, a.word) << where << " (level layout, NaN-free walk)";
      }
      // The format's generic walk (the other kernels' walk) agrees too.
      TahoeDecoded g;
      EXPECT_EQ(TahoeTraverse(tf.nodes8().data(), t.root, plain, v, g), ia) << where;
      ++walks;
    }
  }
  // Four rows at a time, from the roots, over both layouts: the one-row sums bit for bit.
  std::vector<uint32_t> dfs_roots;
  for (const TahoeTree& t : tf.trees()) dfs_roots.push_back(t.root);
  const uint32_t num_trees = static_cast<uint32_t>(dfs_roots.size());
  if (f.num_outputs == 1 && !tf.trees().empty()) {
    for (int64_t r = 0; r + 4 <= n; r += 4) {
      TahoeNanPaddedRow<TahoePlainRow> four[4], one[1];
      for (int j = 0; j < 4; ++j) {
        four[j] = {TahoePlainRow{walk_rows.data() + (r + j) * f.num_features}, nf};
      }
      double s4[4], s4_level[4];
      TahoeSumFixedRoots<false, 4, false, kCat>(v, nodes.data(), dfs_roots.data(), 0, num_trees,
                                                four, s4);
      TahoeSumFixedRoots<false, 4, true, kCat>(v, nodes.data(), level->roots.data(), 0, num_trees,
                                               four, s4_level);
      for (int j = 0; j < 4; ++j) {
        one[0] = four[j];
        double s1[1];
        TahoeSumFixedRoots<false, 1, false, kCat>(v, nodes.data(), dfs_roots.data(), 0, num_trees,
                                                  one, s1);
        EXPECT_EQ(s4[j], s1[0]) << what << " row " << r + j;
        EXPECT_EQ(s4_level[j], s1[0]) << what << " row " << r + j << " (level layout)";
      }
    }
  }
  return walks;
}

// The general test on every categorical forest, and the pair and code tests on cat_pairs()
// forests (the walks the GPU runs for them).
int64_t CheckWalks(const TahoeForest& tf, const std::vector<float>& rows, int64_t n,
                   const std::string& what) {
  int64_t walks = CheckWalksWith<kTahoeCatGeneral>(tf, rows, rows, n, what);
  if (tf.cat_pairs()) {
    walks += CheckWalksWith<kTahoeCatPairs>(tf, rows, rows, n, what + " (pairs)");
    walks += CheckWalksWith<kTahoeCatCodes>(tf, rows, CategoryCodes(tf, rows), n,
                                            what + " (codes)");
  }
  return walks;
}

TEST(TahoeCategoricalTest, RandomForestsTakeTheFixedWalkToTheReferenceLeaves) {
  int64_t walks = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    RandomForestOptions o;
    o.seed = seed;
    o.num_trees = 20;
    o.max_depth = 2 + static_cast<int>(seed * 5 % 14);  // past kMaxFixedSteps: the vote walk too
    o.num_features = 2 + static_cast<int>(seed * 7 % 20);
    o.categorical_fraction = 0.6;
    o.lightgbm_rules = seed % 2 == 0;
    o.missing_zero = false;  // a rule that keeps a forest off the fixed walk
    o.leaf_probability = 0.25;
    ForestPtr f = MakeRandomForest(o);
    if (!HasCategorical(*f)) continue;
    const std::vector<float> rows = MakeRandomRows(*f, 48, seed + 300, 0.15);
    for (bool rearrange : {true, false}) {
      TahoeFormatOptions fo;
      fo.node_rearrangement = rearrange;
      absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f, fo);
      ASSERT_TRUE(tf.ok()) << tf.status();
      EXPECT_FALSE((*tf)->simple());
      walks += CheckWalks(**tf, rows, 48,
                          "seed " + std::to_string(seed) + (rearrange ? "" : " (no rearrangement)"));
    }
  }
  EXPECT_GT(walks, 10000);
}

// Sets of up to 64 categories (the node's word or a two-word table set) are read as 64 bits by the
// fixed walk (TahoeForestView::cat_pairs); a forest with a wider set keeps the general test. Both
// reach the reference leaves on rows with categories in and out of the sets, past 63, negative,
// in (-1, 0), fractional and NaN.
TEST(TahoeCategoricalTest, SetsOfUpTo64CategoriesAreReadAsPairsToTheReferenceLeaves) {
  int64_t walks = 0;
  int pairs = 0, pair_tables = 0, general = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    for (int max_categories : {64, 0}) {
      RandomForestOptions o;
      o.seed = 700 + seed;
      o.num_trees = 16;
      o.max_depth = 3 + static_cast<int>(seed * 5 % 12);
      o.num_features = 3 + static_cast<int>(seed * 3 % 12);
      o.categorical_fraction = 0.7;
      o.max_categories = max_categories;
      o.lightgbm_rules = seed % 2 == 1;
      o.missing_zero = false;
      ForestPtr f = MakeRandomForest(o);
      if (!HasCategorical(*f)) continue;
      uint32_t widest = 0;
      for (const Node& n : f->nodes) {
        if (!n.is_leaf() && n.is_categorical()) widest = std::max(widest, n.aux);
      }
      absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
      ASSERT_TRUE(tf.ok()) << tf.status();
      const TahoeForestView v = (*tf)->HostView();
      const std::string what = "seed " + std::to_string(seed) + " categories up to " +
                               std::to_string(max_categories == 0 ? 70 : max_categories);
      // Sets of two words or fewer: pairs (a table only when some set lists a category past 31).
      EXPECT_EQ((*tf)->cat_pairs(), widest <= 2) << what;
      if ((*tf)->cat_pairs()) {
        EXPECT_TRUE(v.cat_words == 0 || v.cat_words == 2) << what;
        EXPECT_TRUE((*tf)->cat_splits().empty()) << what;
        // The pair test reads a table set as pair value / 2 of cat_bits (one aligned 8-byte load).
        for (const TahoeNode8& n : (*tf)->nodes8()) {
          const TahoeDecoded d = TahoeDecode(n, v.feature_bits);
          if (!(d.flags & tahoe_bits::kLeaf) && (d.flags & tahoe_bits::kCategorical) &&
              (d.flags & tahoe_bits::kCatTable)) {
            ASSERT_EQ(d.value % 2, 0u) << what;
          }
        }
        ++pairs;
        pair_tables += v.cat_words == 2;
      } else {
        ++general;
      }
      const std::vector<float> rows = MakeRandomRows(*f, 64, seed + 900, 0.15);
      walks += CheckWalks(**tf, rows, 64, what);
    }
  }
  EXPECT_GE(pair_tables, 3);
  EXPECT_GE(pairs, pair_tables);
  EXPECT_GE(general, 3);
  EXPECT_GT(walks, 5000);
}

TEST(TahoeCategoricalTest, SetsOfSmallCategoriesLiveInTheNodeAndListedCategoriesGoLeft) {
  for (bool lightgbm : {false, true}) {
    RandomForestOptions o;
    o.seed = 41;
    o.num_trees = 30;
    o.max_depth = 7;
    o.num_features = 8;
    o.categorical_fraction = 0.7;
    o.lightgbm_rules = lightgbm;
    o.missing_zero = false;
    ForestPtr f = MakeRandomForest(o);
    absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
    ASSERT_TRUE(tf.ok()) << tf.status();
    const TahoeForestView v = (*tf)->HostView();
    EXPECT_EQ(v.cat_truncate, lightgbm);
    EXPECT_FALSE(TahoeLaneEligible(**tf));  // the tree-per-lane step is numeric only
    // Count the model's categorical splits by where their set fits, and the format's by where it
    // put them; the table's sets are padded to its widest (the random sets have 1 to 3 words).
    int64_t small = 0, large = 0, in_node = 0, in_table = 0;
    uint32_t widest = 0;
    for (const Node& n : f->nodes) {
      if (n.is_leaf() || !n.is_categorical()) continue;
      bool fits = true;
      for (uint32_t w = 1; w < n.aux; ++w) fits &= f->category_bits[n.payload + w] == 0;
      (fits ? small : large) += 1;
      if (!fits) widest = std::max(widest, n.aux);
    }
    SCOPED_TRACE(lightgbm ? "LightGBM rules" : "XGBoost rules");
    EXPECT_EQ(v.cat_words, widest);
    EXPECT_TRUE((*tf)->cat_splits().empty());
    EXPECT_EQ((*tf)->cat_bits().size(), static_cast<size_t>(large * widest));
    for (const TahoeNode8& n : (*tf)->nodes8()) {
      const TahoeDecoded d = TahoeDecode(n, v.feature_bits);
      if ((d.flags & tahoe_bits::kLeaf) || !(d.flags & tahoe_bits::kCategorical)) continue;
      if (d.flags & tahoe_bits::kCatTable) {
        ++in_table;
        EXPECT_EQ(d.value % widest, 0u);
        EXPECT_LT(d.value, (*tf)->cat_bits().size());
      } else {
        ++in_node;
      }
    }
    EXPECT_GT(small, 0);
    EXPECT_GT(large, 0);
    EXPECT_EQ(in_node, small);
    EXPECT_EQ(in_table, large);
  }
}

TEST(TahoeCategoricalTest, TheSplitRuleIsTheReferenceDecision) {
  // One split of each library's rule with a set in the node, one in a two-word table (read as a
  // pair), one in a three-word table and one of more than kMaxPaddedCatWords words (its record in
  // cat_splits), over values in, out of and beyond the set, at the words' edges, negative, in
  // (-1, 0) (category 0 under LightGBM's truncation), fractional, infinite and NaN.
  for (bool lightgbm : {false, true}) {
    for (const std::vector<int>& set :
         {std::vector<int>{0, 3, 31}, std::vector<int>{0, 32, 63}, std::vector<int>{1, 40, 70},
          std::vector<int>{1, 40, 3000}}) {
      for (bool default_left : {false, true}) {
        HandForest h(1);
        uint16_t flags = default_left ? kNodeDefaultLeft : 0;
        if (lightgbm) flags |= kNodeCategoryInSetGoesLeft | kNodeCategoryTruncate;
        h.AddTree({h.CategoricalSplit(0, set, 1, 2, 10, flags), h.Leaf(1.0, 4), h.Leaf(2.0, 6)});
        ForestPtr f = h.Build();
        absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
        ASSERT_TRUE(tf.ok()) << tf.status();
        ASSERT_TRUE((*tf)->fixed_walk());
        const TahoeForestView v = (*tf)->HostView();
        const TahoeDecoded root = TahoeDecode((*tf)->nodes8()[0], v.feature_bits);
        absl::StatusOr<TahoeLevelLayout> level = BuildTahoeLevelLayout(**tf, 0);
        ASSERT_TRUE(level.ok()) << level.status();
        EXPECT_EQ((root.flags & tahoe_bits::kCatTable) != 0, set.back() >= 32);
        const uint32_t words = static_cast<uint32_t>(set.back() / 32 + 1);
        EXPECT_EQ(v.cat_words, set.back() >= 32 && set.back() < 2048 ? words : 0u);
        EXPECT_EQ((*tf)->cat_splits().size(), set.back() >= 2048 ? 1u : 0u);
        EXPECT_EQ((*tf)->cat_pairs(), set.back() < 64);
        const float inf = std::numeric_limits<float>::infinity();
        for (float x : {0.0f, 3.0f, 31.0f, 1.0f, 40.0f, 70.0f, 2.0f, 32.0f, 95.0f, 96.0f, 1e9f,
                        3000.0f, 2999.0f, 3001.0f, 3008.0f, 33.0f, 62.0f, 63.0f, 63.5f, 64.0f,
                        64.5f, 65.0f, 127.0f, 31.5f, 32.5f, 1e30f, -0.5f, -1.0f, -3.0f,
                        -0.99999994f, -1.0000001f, -0.0f, -1e-30f, 0.7f, 3.9f, 40.5f,
                        std::nanf(""), inf, -inf}) {
          const float row[1] = {x};
          const Node& split = f->nodes[0];
          const bool want = GoesLeft(split.flags, split.threshold, split.payload, split.aux,
                                     f->category_bits.data(), x);
          const TahoeNanPaddedRow<TahoePlainRow> padded{TahoePlainRow{row}, 1};
          TahoeNode8 leaf;
          TahoeWalkFixed<false, false, kTahoeCatGeneral>((*tf)->nodes8().data(), 0, padded, v,
                                                         leaf);
          const double got = TahoeFixedLeafValue(v, leaf);
          const std::string where = std::string(lightgbm ? "LightGBM" : "XGBoost") +
                                    " set ending " + std::to_string(set.back()) +
                                    " default_left " + std::to_string(default_left) + " x " +
                                    std::to_string(x);
          EXPECT_EQ(got, want ? 1.0 : 2.0) << where;
          // The level layout's step, and without the NaN test for the values that are not NaN.
          TahoeNode8 level_leaf, nan_free_leaf;
          TahoeWalkFixed<false, true, kTahoeCatGeneral>(level->nodes.data(), 0, padded, v,
                                                        level_leaf);
          EXPECT_EQ(TahoeFixedLeafValue(v, level_leaf), got) << where << " (level layout)";
          if (!std::isnan(x)) {
            TahoeWalkFixed<true, true, kTahoeCatGeneral>(level->nodes.data(), 0, padded, v,
                                                         nan_free_leaf);
            EXPECT_EQ(TahoeFixedLeafValue(v, nan_free_leaf), got) << where << " (NaN-free step)";
          }
          // The pair test on the value and the code test on its category code, on both layouts.
          if ((*tf)->cat_pairs()) {
            const auto both_layouts = [&]<int kCat>(const TahoeNanPaddedRow<TahoePlainRow>& r,
                                                    const std::string& test) {
              TahoeNode8 dfs_leaf, level_leaf_of_test;
              TahoeWalkFixed<false, false, kCat>((*tf)->nodes8().data(), 0, r, v, dfs_leaf);
              EXPECT_EQ(TahoeFixedLeafValue(v, dfs_leaf), got) << where << " (" << test << ")";
              TahoeWalkFixed<false, true, kCat>(level->nodes.data(), 0, r, v, level_leaf_of_test);
              EXPECT_EQ(TahoeFixedLeafValue(v, level_leaf_of_test), got)
                  << where << " (" << test << ", level layout)";
            };
            both_layouts.template operator()<kTahoeCatPairs>(padded, "pairs");
            const float code[1] = {TahoeCategoryCode(x, v.cat_low)};
            EXPECT_EQ(std::isnan(code[0]), std::isnan(x)) << where;
            both_layouts.template operator()<kTahoeCatCodes>({TahoePlainRow{code}, 1}, "codes");
          }
        }
      }
    }
  }
}

// Category codes replace a categorical feature's values for every split of the row chunk walk, so
// a forest that also splits such a feature numerically keeps the general test (still exact), and
// cat_pairs forests list their categorical features.
TEST(TahoeCategoricalTest, AFeatureSplitBothWaysKeepsTheGeneralTest) {
  for (bool mixed : {false, true}) {
    HandForest h(3);
    const uint16_t flags = kNodeCategoryInSetGoesLeft | kNodeCategoryTruncate;
    h.AddTree({h.CategoricalSplit(2, {1, 5, 40}, 1, 2, 10, flags),
               h.Split(mixed ? 2 : 0, 3.5f, 3, 4, 6), h.Leaf(3.0, 4), h.Leaf(1.0, 3),
               h.Leaf(2.0, 3)});
    ForestPtr f = h.Build();
    absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
    ASSERT_TRUE(tf.ok()) << tf.status();
    SCOPED_TRACE(mixed ? "feature 2 split both ways" : "feature 2 categorical only");
    EXPECT_TRUE((*tf)->fixed_walk());
    EXPECT_EQ((*tf)->cat_pairs(), !mixed);
    EXPECT_EQ((*tf)->cat_features(), mixed ? std::vector<uint32_t>{} : std::vector<uint32_t>{4u});
    std::vector<float> rows;
    for (float x : {0.0f, 1.0f, 2.0f, 5.0f, 40.0f, 41.0f, 63.0f, 64.0f, -0.5f, -2.0f, 3.0f, 4.0f,
                    std::nanf("")}) {
      for (float a : {-1.0f, 3.0f, 4.0f, std::nanf("")}) rows.insert(rows.end(), {a, 0.0f, x});
    }
    EXPECT_GT(CheckWalks(**tf, rows, static_cast<int64_t>(rows.size() / 3), "hand forest"), 0);
  }
}

TEST(TahoeCategoricalTest, CorpusCategoricalModelsTakeTheFixedWalkToTheReferenceLeaves) {
  const std::vector<std::string> dirs = testing::CorpusCaseDirs();
  if (dirs.empty()) GTEST_SKIP() << "no corpus found";
  int categorical = 0;
  for (const std::string& dir : dirs) {
    absl::StatusOr<testing::CorpusModel> m = testing::LoadCorpusModel(dir);
    ASSERT_TRUE(m.ok()) << m.status();
    if (!HasCategorical(*m->forest)) continue;
    absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(m->forest);
    ASSERT_TRUE(tf.ok()) << tf.status();
    if (!(*tf)->fixed_walk()) continue;  // the missing-zero rule or linear leaves besides
    const std::vector<float> rows = testing::GroveRows(m->c, *m->forest);
    EXPECT_GT(CheckWalks(**tf, rows, std::min<int64_t>(m->c.rows, 300), m->c.name), 0)
        << m->c.name;
    ++categorical;
  }
  EXPECT_GE(categorical, 2);  // lgb_categorical and xgb_categorical at least
}

}  // namespace
}  // namespace grove
