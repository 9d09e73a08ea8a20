// The Tahoe adaptive forest format on the CPU: every rearrangement (node, tree, both, none), both node
// widths and every thread-group assignment give PredictCpu's output -- leaf ids exactly, margins and
// predictions within 1e-5 * max(1, |ref|) -- on seeded random forests and on the library corpus,
// evaluated with the same GROVE_HD traversal the kernels run. Also checks the layout's invariants.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/types/span.h"
#include "core/model/loader.h"
#include "core/predict/predict.h"
#include "core/predict/tahoe/tahoe_forest.h"
#include "core/predict/tahoe/tahoe_lane.h"
#include "gtest/gtest.h"
#include "tests/testing/corpus.h"
#include "tests/testing/predict_reference.h"
#include "tests/testing/random_forest.h"

namespace grove {
namespace {

constexpr double kTolerance = 1e-5;

std::vector<float> Tahoe(const TahoeForest& tf, const std::vector<float>& rows,
                         const PredictOptions& o, int groups) {
  const Forest& f = tf.forest();
  const int64_t n = static_cast<int64_t>(rows.size()) / f.num_features;
  const int64_t width = PredictWidth(f, o);
  std::vector<float> out(n * width, -777.0f);
  absl::Status s = TahoePredictHost(tf, MakeRowsView(rows.data(), n, f.num_features), o,
                                    MakeMatrixView(out.data(), n, width), groups);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// Every format variant against PredictCpu on `rows`.
void CheckAllVariants(const ForestPtr& f, const std::vector<float>& rows, const std::string& what) {
  std::vector<PredictOptions> kinds = {Kind(OutputKind::kMargin), Kind(OutputKind::kPrediction),
                                       Kind(OutputKind::kLeaf)};
  if (f->num_iterations > 2) {
    kinds.push_back(Kind(OutputKind::kMargin, 1, f->num_iterations - 1));
    kinds.push_back(Kind(OutputKind::kLeaf, 1, 0));
  }
  for (int variant = 0; variant < 5; ++variant) {
    TahoeFormatOptions fo;
    fo.node_rearrangement = variant & 1;
    fo.tree_rearrangement = variant & 2;
    fo.force_wide_nodes = variant == 4;
    absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f, fo);
    ASSERT_TRUE(tf.ok()) << tf.status();
    for (const PredictOptions& o : kinds) {
      const std::vector<float> want = ReferencePrediction(*f, rows, o);
      for (int groups : {1, 4, 32}) {
        SCOPED_TRACE(what + " variant " + std::to_string(variant) + " kind " +
                     OutputKindName(o.kind) + " range [" + std::to_string(o.iteration_begin) + "," +
                     std::to_string(o.iteration_end) + ") groups " + std::to_string(groups));
        const std::vector<float> got = Tahoe(**tf, rows, o, groups);
        if (o.kind == OutputKind::kLeaf) {
          EXPECT_EQ(got, want);
        } else {
          EXPECT_LE(MaxRelativeError(got, want), kTolerance);
        }
      }
    }
  }
}

TEST(TahoeForestTest, RandomForestsMatchTheCpuReference) {
  int cases = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    for (int shape = 0; shape < 6; ++shape) {
      RandomForestOptions o;
      o.seed = seed * 31 + shape;
      o.num_trees = 12 + 7 * shape;
      o.max_depth = 3 + (seed + shape) % 7;
      o.num_features = 3 + static_cast<int>(seed * 5 % 40);
      o.categorical_fraction = shape % 3 == 1 ? 0.4 : 0.0;
      o.lightgbm_rules = shape % 2 == 1;
      o.num_outputs = shape >= 4 ? 3 : 1;
      o.vector_leaves = shape == 5;
      o.extreme_cover_probability = shape == 2 ? 0.3 : 0.0;
      ForestPtr f = MakeRandomForest(o);
      const std::vector<float> rows = MakeRandomRows(*f, 97, seed + 1000, 0.15);
      CheckAllVariants(f, rows, "seed " + std::to_string(o.seed));
      ++cases;
    }
  }
  EXPECT_EQ(cases, 36);
}

TEST(TahoeForestTest, CorpusMatchesTheCpuReferenceAndTheLibrary) {
  const std::vector<std::string> dirs = testing::CorpusCaseDirs();
  if (dirs.empty()) GTEST_SKIP() << "no corpus found";
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    absl::StatusOr<testing::CorpusCase> c = testing::LoadCorpusCase(dir);
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<ForestPtr> f = LoadModelFile(c->model_path);
    if (!f.ok()) {
      ADD_FAILURE() << "cannot load " << c->model_path << ": " << f.status();
      continue;
    }
    CheckAllVariants(*f, c->X, c->name);
    absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(*f);
    ASSERT_TRUE(tf.ok()) << tf.status();
    // Against the library too, for XGBoost (LightGBM compares float64 inputs: rows whose float32
    // rounding crosses a threshold differ from the library for every float engine, PredictCpu
    // included; the CPU reference comparison above covers those cases).
    if (c->library == "xgboost" && c->leaf) {
      const std::vector<float> leaf = Tahoe(**tf, c->X, Kind(OutputKind::kLeaf), 1);
      EXPECT_EQ(testing::CountMismatches(absl::MakeConstSpan(leaf), *c->leaf), 0);
    }
    if (c->library == "xgboost" && c->margin) {
      const std::vector<float> m = Tahoe(**tf, c->X, Kind(OutputKind::kMargin), 8);
      EXPECT_LE(testing::MaxRelError(absl::MakeConstSpan(m), *c->margin).max_error, kTolerance);
    }
    std::printf("%-40s %s\n", c->name.c_str(), (*tf)->Describe().c_str());
  }
}

// The view's packed-word fields (the fixed walks' masks and shifts) decode every node as
// TahoeDecode does from feature_bits, for forests of 1 to 12 feature bits.
TEST(TahoeForestTest, ViewWordFieldsDecodeEveryNode) {
  for (int num_features : {1, 2, 5, 30, 200, 3000}) {
    SCOPED_TRACE("features " + std::to_string(num_features));
    ForestPtr f = MakeRandomForest({.num_trees = 8, .max_depth = 7, .num_features = num_features,
                                    .categorical_fraction = 0.3, .max_categories = 64,
                                    .seed = static_cast<uint64_t>(num_features)});
    absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
    ASSERT_TRUE(tf.ok()) << tf.status();
    ASSERT_FALSE((*tf)->wide());
    const TahoeForestView v = (*tf)->HostView();
    EXPECT_EQ(v.word_feature_mask, (1u << v.feature_bits) - 1u);
    for (const TahoeNode8& n : (*tf)->nodes8()) {
      const TahoeDecoded d = TahoeDecode(n, v.feature_bits);
      ASSERT_EQ(n.word & v.word_feature_mask, d.feature);
      ASSERT_EQ(n.word >> v.word_distant_shift, d.distant);
      ASSERT_EQ((n.word & v.word_leaf_bit) != 0, (d.flags & tahoe_bits::kLeaf) != 0);
      ASSERT_EQ((n.word & v.word_default_left_bit) != 0, (d.flags & tahoe_bits::kDefaultLeft) != 0);
      ASSERT_EQ((n.word & v.word_hot_right_bit) != 0, (d.flags & tahoe_bits::kHotRight) != 0);
      ASSERT_EQ((n.word & v.cat_word_bit) != 0, (d.flags & tahoe_bits::kCategorical) != 0);
      ASSERT_EQ((n.word & v.cat_word_table) != 0, (d.flags & tahoe_bits::kCatTable) != 0);
    }
  }
}

TEST(TahoeForestTest, HotChildIsAdjacentAndAtLeastAsProbable) {
  ForestPtr f =
      MakeRandomForest({.num_trees = 30, .max_depth = 8, .extreme_cover_probability = 0.2});
  absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
  ASSERT_TRUE(tf.ok());
  ASSERT_FALSE((*tf)->wide());
  const TahoeForestView v = (*tf)->HostView();
  const std::vector<TahoeNode8>& nodes = (*tf)->nodes8();
  // Reconstruct each tree's covers in the Tahoe layout by mapping leaf ids: check instead that the
  // expected-visit order holds: walking hot children only visits nodes whose probability is at
  // least that of their cold sibling, i.e. the cover of the hot child's subtree leaves >= cold.
  for (int i = 0; i < v.num_trees; ++i) {
    const TahoeTree& t = v.trees[i];
    const Forest& forest = *f;
    const Node* src = forest.TreeNodes(t.orig);
    // Walk both layouts in parallel: source node s <-> Tahoe node j.
    std::vector<std::pair<int32_t, uint32_t>> stack = {{0, t.root}};
    while (!stack.empty()) {
      auto [s, j] = stack.back();
      stack.pop_back();
      const TahoeDecoded d = TahoeDecode(nodes[j], v.feature_bits);
      ASSERT_EQ(src[s].is_leaf(), (d.flags & tahoe_bits::kLeaf) != 0);
      if (src[s].is_leaf()) {
        EXPECT_EQ(v.leaf_ids[j], src[s].leaf_id);
        continue;
      }
      EXPECT_EQ(d.feature, static_cast<uint32_t>(src[s].feature));
      const bool hot_right = d.flags & tahoe_bits::kHotRight;
      const int32_t hot = hot_right ? src[s].right : src[s].left;
      const int32_t cold = hot_right ? src[s].left : src[s].right;
      EXPECT_GE(src[hot].cover, src[cold].cover);
      stack.push_back({hot, j + 1});
      stack.push_back({cold, j + d.distant});
    }
  }
}

TEST(TahoeForestTest, FeatureIndexUsesTheFewestBits) {
  for (int features : {1, 2, 8, 9, 14, 784, 2048, 5000}) {
    ForestPtr f = MakeRandomForest({.num_trees = 3, .num_features = features});
    absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
    ASSERT_TRUE(tf.ok());
    int bits = 1;  // features 0..num_features: the last is the leaves' padding feature
    while ((1 << bits) < features + 1) ++bits;
    EXPECT_EQ((*tf)->stats().feature_bits, bits) << features;
    EXPECT_EQ((*tf)->node_bytes(), 8);
  }
}

TEST(TahoeForestTest, FixedWalkOnlyWhereLeavesCanLoopToThemselves) {
  RandomForestOptions o;
  o.num_trees = 20;
  EXPECT_TRUE((*TahoeForest::Build(MakeRandomForest(o)))->fixed_walk());
  o.vector_leaves = true;  // table leaves: their flags are not routing bits
  o.num_outputs = 3;
  EXPECT_TRUE((*TahoeForest::Build(MakeRandomForest(o)))->fixed_walk());
  o.vector_leaves = false;
  o.num_outputs = 1;
  o.categorical_fraction = 0.5;  // categorical splits are tested by the walk (kCat)
  const TahoeForestPtr categorical = *TahoeForest::Build(MakeRandomForest(o));
  EXPECT_TRUE(categorical->fixed_walk());
  EXPECT_TRUE(categorical->categorical());
  EXPECT_FALSE(categorical->simple());
  o.categorical_fraction = 0;
  o.lightgbm_rules = true;  // missing type Zero: a rule the fixed walk does not test
  ForestPtr zero = MakeRandomForest(o);
  ASSERT_TRUE(std::any_of(zero->nodes.begin(), zero->nodes.end(),
                          [](const Node& n) { return (n.flags & kNodeMissingZero) != 0; }));
  EXPECT_FALSE((*TahoeForest::Build(zero))->fixed_walk());
  o.lightgbm_rules = false;
  TahoeFormatOptions wide;
  wide.force_wide_nodes = true;
  EXPECT_FALSE((*TahoeForest::Build(MakeRandomForest(o), wide))->fixed_walk());
}

// The branch-free walk ends on the leaf the general walk reaches, from every root, for rows with
// NaNs, on unbalanced trees (early leaves loop to themselves), with and without node rearrangement.
TEST(TahoeForestTest, FixedWalkReachesTheSameLeafAsTheGeneralWalk) {
  int walks = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    RandomForestOptions o;
    o.seed = seed;
    o.num_trees = 25;
    o.max_depth = 2 + static_cast<int>(seed * 3 % 13);
    o.num_features = 1 + static_cast<int>(seed * 7 % 30);
    o.leaf_probability = 0.3;
    ForestPtr f = MakeRandomForest(o);
    const std::vector<float> rows = MakeRandomRows(*f, 64, seed + 77, 0.2);
    for (bool rearrange : {true, false}) {
      TahoeFormatOptions fo;
      fo.node_rearrangement = rearrange;
      absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f, fo);
      ASSERT_TRUE(tf.ok()) << tf.status();
      ASSERT_TRUE((*tf)->fixed_walk());
      const int depth = (*tf)->stats().max_depth;
      EXPECT_EQ((*tf)->fixed_steps(),
                depth <= TahoeForest::kMaxFixedSteps ? std::max(1, depth) : 0);
      const TahoeForestView v = (*tf)->HostView();
      EXPECT_EQ(v.fixed_steps, (*tf)->fixed_steps());
      const TahoeNode8* nodes = (*tf)->nodes8().data();
      for (int64_t r = 0; r < 64; ++r) {
        const TahoePlainRow row{rows.data() + r * f->num_features};
        const TahoeNanPaddedRow<TahoePlainRow> padded{row, static_cast<uint32_t>(f->num_features)};
        for (const TahoeTree& t : (*tf)->trees()) {
          TahoeDecoded want, got;
          const uint32_t a = TahoeTraverse(nodes, t.root, row, v, want);
          TahoeNode8 n, m;
          const uint32_t b = TahoeWalkFixed(nodes, t.root, padded, v, n);
          got = TahoeDecode(n, v.feature_bits);
          ASSERT_EQ(a, b) << "seed " << seed << " row " << r << " tree " << t.orig;
          // Exactly the forest's depth in steps (TahoeForest::fixed_steps) reaches the same leaf.
          const int steps = std::max(1, (*tf)->stats().max_depth);
          EXPECT_EQ(TahoeWalkFixed(nodes, t.root, padded, v, m, steps), a);
          EXPECT_EQ(m.value, n.value);
          EXPECT_EQ(got.value, want.value);
          EXPECT_EQ(got.feature, static_cast<uint32_t>(f->num_features));  // padding feature
          EXPECT_EQ(got.distant, 0u);
          EXPECT_EQ(got.flags & (tahoe_bits::kDefaultLeft | tahoe_bits::kHotRight), 0u);
          ++walks;
        }
      }
    }
  }
  EXPECT_EQ(walks, 8 * 2 * 64 * 25);
}

// TahoeForest::covers(): each node's model cover, categorical splits whose children the format
// renames included. A leaf's cover is its model leaf's (found by leaf id); a split's is the sum of
// its children's, as the random forests' covers are built.
TEST(TahoeForestTest, EveryNodeKeepsItsModelCover) {
  RandomForestOptions o;
  o.seed = 11;
  o.num_trees = 12;
  o.max_depth = 8;
  o.num_features = 10;
  o.leaf_probability = 0.25;
  o.categorical_fraction = 0.4;
  ForestPtr f = MakeRandomForest(o);
  absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
  ASSERT_TRUE(tf.ok()) << tf.status();
  const TahoeForest& x = **tf;
  ASSERT_EQ(x.covers().size(), x.nodes8().size());
  const uint32_t fb = x.HostView().feature_bits;
  const uint32_t dshift = fb + tahoe_bits::kNumFlags;
  int leaves = 0, splits = 0;
  for (const TahoeTree& t : x.trees()) {
    const Node* nodes = f->TreeNodes(static_cast<int>(t.orig));
    std::vector<uint32_t> stack{t.root};
    while (!stack.empty()) {
      const uint32_t d = stack.back();
      stack.pop_back();
      const TahoeNode8& n = x.nodes8()[d];
      const uint32_t flags = (n.word >> fb) & ((1u << tahoe_bits::kNumFlags) - 1u);
      if ((flags & tahoe_bits::kLeaf) != 0) {
        const int32_t id = x.leaf_ids()[d];
        int found = 0;
        for (uint32_t k = 0; k < f->trees[t.orig].num_nodes; ++k) {
          if (nodes[k].is_leaf() && nodes[k].leaf_id == id) {
            EXPECT_EQ(x.covers()[d], nodes[k].cover) << "tree " << t.orig << " leaf " << id;
            ++found;
          }
        }
        EXPECT_EQ(found, 1) << "tree " << t.orig << " leaf " << id;
        ++leaves;
        continue;
      }
      const uint32_t other = d + (n.word >> dshift);
      EXPECT_DOUBLE_EQ(x.covers()[d], x.covers()[d + 1] + x.covers()[other]) << "tree " << t.orig;
      ++splits;
      stack.push_back(d + 1);
      stack.push_back(other);
    }
  }
  EXPECT_GT(splits, 100);
  EXPECT_GT(leaves, 100);
}

TEST(TahoeForestTest, TreesAreGroupedByOutputAndAssignmentsArePermutations) {
  RandomForestOptions o;
  o.num_trees = 90;
  o.num_outputs = 3;
  o.max_depth = 7;
  o.leaf_probability = 0.35;
  ForestPtr f = MakeRandomForest(o);
  absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
  ASSERT_TRUE(tf.ok());
  const std::vector<TahoeTree>& trees = (*tf)->trees();
  ASSERT_EQ(trees.size(), 90u);
  for (size_t i = 1; i < trees.size(); ++i) EXPECT_LE(trees[i - 1].group, trees[i].group);
  std::vector<int> seen(90, 0);
  for (const TahoeTree& t : trees) ++seen[t.orig];
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 90);
  for (const TahoeAssignment& a : (*tf)->assignments()) {
    std::vector<uint32_t> order = a.order;
    std::sort(order.begin(), order.end());
    ASSERT_EQ(order.size(), 90u);
    for (uint32_t i = 0; i < 90; ++i) EXPECT_EQ(order[i], i);
    EXPECT_EQ(a.offsets.size(), static_cast<size_t>(a.groups) + 1);
  }
}

// Row chunk's class-aware assignments: group g walks only trees of output g % K, every tree exactly
// once; none where there are fewer groups than outputs, vector leaves, or a single output.
TEST(TahoeForestTest, ClassAssignmentsGiveEachGroupOneOutput) {
  RandomForestOptions o;
  o.num_trees = 90;
  o.num_outputs = 3;
  o.max_depth = 6;
  ForestPtr f = MakeRandomForest(o);
  absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
  ASSERT_TRUE(tf.ok());
  const std::vector<TahoeTree>& trees = (*tf)->trees();
  const std::vector<TahoeAssignment>& classed = (*tf)->class_assignments();
  ASSERT_EQ(classed.size(), (*tf)->assignments().size());
  for (size_t i = 0; i < classed.size(); ++i) {
    const int groups = 1 << i;
    const TahoeAssignment& a = classed[i];
    if (groups < 3) {
      EXPECT_TRUE(a.offsets.empty()) << groups;
      continue;
    }
    ASSERT_EQ(a.offsets.size(), static_cast<size_t>(groups) + 1);
    std::vector<int> seen(trees.size(), 0);
    for (int g = 0; g < groups; ++g) {
      for (uint32_t k = a.offsets[g]; k < a.offsets[g + 1]; ++k) {
        EXPECT_EQ(trees[a.order[k]].group, g % 3) << "groups " << groups << " group " << g;
        ++seen[a.order[k]];
      }
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(trees.size()));
  }
  o.vector_leaves = true;
  absl::StatusOr<TahoeForestPtr> vec = TahoeForest::Build(MakeRandomForest(o));
  ASSERT_TRUE(vec.ok());
  for (const TahoeAssignment& a : (*vec)->class_assignments()) EXPECT_TRUE(a.offsets.empty());
}

// The two-row walk reaches the leaves the one-row walk reaches, for every pair of rows.
TEST(TahoeForestTest, TwoRowFixedWalkMatchesTheOneRowWalk) {
  ForestPtr f = MakeRandomForest({.num_trees = 30, .max_depth = 9, .num_features = 12});
  absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
  ASSERT_TRUE(tf.ok());
  ASSERT_TRUE((*tf)->fixed_walk());
  const TahoeForestView v = (*tf)->HostView();
  const std::vector<float> rows = MakeRandomRows(*f, 40, 11, 0.2);
  const auto* nodes = static_cast<const TahoeNode8*>(v.nodes);
  for (int r = 0; r + 1 < 40; r += 2) {
    const TahoeNanPaddedRow<TahoePlainRow> a{TahoePlainRow{rows.data() + r * 12}, 12};
    const TahoeNanPaddedRow<TahoePlainRow> b{TahoePlainRow{rows.data() + (r + 1) * 12}, 12};
    const TahoeNanPaddedRow<TahoePlainRow> both[2] = {a, b};
    double sums[2] = {0, 0};
    TahoeAccumulateFixedN<2>(v, nodes, v.trees, nullptr, 0, v.num_trees,
                             TahoeRowParams{0, 1 << 30, 0}, both, sums);
    const double sa = sums[0], sb = sums[1];
    TahoeScalarAcc ea, eb;
    TahoeAccumulateTrees<kTahoeWalkFixed>(v, nodes, 0, v.trees, nullptr, 0, v.num_trees,
                                          TahoeRowParams{0, 1 << 30, 0}, a, ea,
                                          static_cast<float*>(nullptr));
    TahoeAccumulateTrees<kTahoeWalkFixed>(v, nodes, 0, v.trees, nullptr, 0, v.num_trees,
                                          TahoeRowParams{0, 1 << 30, 0}, b, eb,
                                          static_cast<float*>(nullptr));
    EXPECT_EQ(sa, ea.sum) << "row " << r;
    EXPECT_EQ(sb, eb.sum) << "row " << r + 1;
  }
}

// Row chunk's walk from the roots adds the same leaves in the same order as TahoeAccumulateTrees:
// bit-identical sums, for inline-float and leaf-table leaves, one and two rows, every thread group
// of an assignment (including empty ones), deep trees, and rows with and without NaN (the NaN-free
// step on rows without NaN).
TEST(TahoeForestTest, WalkFromTheRootsMatchesTheTreeWalkBitForBit) {
  int table_cases = 0, inline_cases = 0;
  for (int variant = 0; variant < 4; ++variant) {
    RandomForestOptions o;
    o.num_trees = 40;
    o.max_depth = variant < 2 ? 7 : 20;
    o.leaf_probability = variant < 2 ? 0.2 : 0.35;
    o.num_features = 12;
    o.seed = 7 + variant;
    auto f = std::make_shared<Forest>(*MakeRandomForest(o));
    if (variant % 2 == 1) {  // inline float leaves
      for (double& v : f->leaf_values) v = static_cast<float>(v);
      for (Tree& t : f->trees) t.weight = 1;
    }
    absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
    ASSERT_TRUE(tf.ok());
    ASSERT_TRUE((*tf)->fixed_walk());
    ((*tf)->stats().inline_leaves ? inline_cases : table_cases) += 1;
    const TahoeForestView v = (*tf)->HostView();
    // Trees of depth up to 7 take the exact-step loop; deeper than TahoeForest::kMaxFixedSteps,
    // the tree-cursor loop of vote walks.
    if (variant < 2) {
      EXPECT_GT(v.fixed_steps, 0);
    } else {
      EXPECT_EQ(v.fixed_steps, 0);
    }
    const auto* nodes = static_cast<const TahoeNode8*>(v.nodes);
    for (double missing : {0.0, 0.2}) {
      const std::vector<float> rows = MakeRandomRows(*f, 30, 12 + variant, missing);
      for (int groups : {1, 8, 64}) {
        const TahoeAssignment& a = (*tf)->Assignment(groups);
        std::vector<uint32_t> roots(a.order.size());
        for (size_t i = 0; i < roots.size(); ++i) roots[i] = (*tf)->trees()[a.order[i]].root;
        for (int r = 0; r + 1 < 30; r += 2) {
          using Padded = TahoeNanPaddedRow<TahoePlainRow>;
          const Padded two[2] = {Padded{TahoePlainRow{rows.data() + r * 12}, 12},
                                 Padded{TahoePlainRow{rows.data() + (r + 1) * 12}, 12}};
          for (int g = 0; g < groups; ++g) {
            double expected[2];
            for (int j = 0; j < 2; ++j) {
              TahoeScalarAcc acc;
              TahoeAccumulateTrees<kTahoeWalkFixed>(v, nodes, 0, v.trees, a.order.data(),
                                                    a.offsets[g], a.offsets[g + 1],
                                                    TahoeRowParams{0, 1 << 30, 0}, two[j], acc,
                                                    static_cast<float*>(nullptr));
              expected[j] = acc.sum;
            }
            double pair[2], one[1], quad[4];
            const Padded first[1] = {two[0]};
            const Padded four[4] = {two[0], two[1], two[1], two[0]};
            // The NaN-free step on rows without NaN, the full step otherwise.
            auto sums = [&](auto nan_free) {
              constexpr bool kNanFree = decltype(nan_free)::value;
              TahoeSumFixedRoots<kNanFree, 2>(v, nodes, roots.data(), a.offsets[g],
                                              a.offsets[g + 1], two, pair);
              TahoeSumFixedRoots<kNanFree, 1>(v, nodes, roots.data(), a.offsets[g],
                                              a.offsets[g + 1], first, one);
              TahoeSumFixedRoots<kNanFree, 4>(v, nodes, roots.data(), a.offsets[g],
                                              a.offsets[g + 1], four, quad);
            };
            if (missing == 0) {
              sums(std::true_type{});
            } else {
              sums(std::false_type{});
            }
            for (int j = 0; j < 4; ++j) {
              const double e = expected[j == 1 || j == 2 ? 1 : 0];
              EXPECT_EQ(std::memcmp(&quad[j], &e, 8), 0) << "quad " << j << ": " << quad[j];
            }
            SCOPED_TRACE(::testing::Message() << "variant " << variant << " missing " << missing
                                            << " groups " << groups << " group " << g << " row " << r);
            EXPECT_EQ(std::memcmp(&one[0], &expected[0], 8), 0) << one[0] << " vs " << expected[0];
            EXPECT_EQ(std::memcmp(&pair[0], &expected[0], 8), 0) << pair[0] << " vs " << expected[0];
            EXPECT_EQ(std::memcmp(&pair[1], &expected[1], 8), 0) << pair[1] << " vs " << expected[1];
          }
        }
      }
    }
  }
  EXPECT_GT(table_cases, 0);
  EXPECT_GT(inline_cases, 0);
}

TEST(TahoeForestTest, TreeRearrangementBalancesThreadGroups) {
  // Trees of very different depths in model order: round-robin (FIL) is unbalanced.
  ForestPtr f =
      MakeRandomForest({.num_trees = 256, .max_depth = 12, .leaf_probability = 0.3, .seed = 7});
  absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
  ASSERT_TRUE(tf.ok());
  const TahoeFormatStats& s = (*tf)->stats();
  std::printf("CV of per-group work at 32 groups: round-robin %.1f%%, tahoe %.1f%%\n",
              100 * s.cv_before, 100 * s.cv_after);
  EXPECT_LT(s.cv_after, s.cv_before);
}

TEST(TahoeForestTest, SplitIntoPartsCoversEveryTreeWithinTheBudget) {
  ForestPtr f = MakeRandomForest({.num_trees = 60, .max_depth = 8});
  absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
  ASSERT_TRUE(tf.ok());
  const int64_t budget = 8 * 1024;
  absl::StatusOr<std::vector<TahoePart>> parts = (*tf)->SplitIntoParts(budget);
  ASSERT_TRUE(parts.ok()) << parts.status();
  uint32_t next = 0;
  for (const TahoePart& p : *parts) {
    EXPECT_EQ(p.tree_begin, next);
    EXPECT_GT(p.tree_end, p.tree_begin);
    EXPECT_LE((p.node_end - p.node_begin) * 8 + (p.tree_end - p.tree_begin) * 16, budget);
    next = p.tree_end;
  }
  EXPECT_EQ(next, 60u);
  EXPECT_FALSE((*tf)->SplitIntoParts(64).ok());
}

}  // namespace
}  // namespace grove

namespace grove {
namespace {

// XGBoost gbtree-like: unit tree weights and float leaf values, so the format inlines the leaves.
ForestPtr WithFloatLeaves(const ForestPtr& f) {
  Forest c = *f;
  for (Tree& t : c.trees) t.weight = 1.0;
  for (double& v : c.leaf_values) v = static_cast<float>(v);
  absl::StatusOr<ForestPtr> b = BuildForest(std::move(c));
  EXPECT_TRUE(b.ok()) << b.status();
  return *b;
}

// The lane layout (tree per lane), single and paired, gives PredictCpu's margins on seeded random
// forests with NaNs, whatever the part budget; ineligible forests are refused.
TEST(TahoeLaneLayoutTest, MarginsMatchTheCpuReferenceForEveryPartBudget) {
  int checked = 0, multi_part = 0, paired_smaller = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    RandomForestOptions o;
    o.seed = seed;
    o.num_trees = 5 + static_cast<int>(seed * 29 % 90);  // odd and even bundle counts
    o.max_depth = 1 + static_cast<int>(seed * 5 % 11);
    o.num_features = 1 + static_cast<int>(seed * 3 % 16);
    o.leaf_probability = 0.25;
    ForestPtr f = WithFloatLeaves(MakeRandomForest(o));
    const std::vector<float> rows = MakeRandomRows(*f, 50, seed + 5, 0.2);
    const std::vector<float> want = ReferencePrediction(*f, rows, Kind(OutputKind::kMargin));
    absl::StatusOr<TahoeForestPtr> tf = TahoeForest::Build(f);
    ASSERT_TRUE(tf.ok()) << tf.status();
    ASSERT_TRUE(TahoeLaneEligible(**tf));
    int64_t least_of[2] = {0, 0};
    for (TahoeLaneMode mode : {TahoeLaneMode::kSingle, TahoeLaneMode::kPaired}) {
      const bool paired = mode == TahoeLaneMode::kPaired;
      // Budgets: everything, the least that builds (bisected: the bundle that needs most), twice
      // that.
      int64_t lo = 0, hi = BuildTahoeLaneLayout(**tf, int64_t{1} << 30, mode)->part_bytes;
      while (hi - lo > 1) {
        const int64_t mid = (lo + hi) / 2;
        (BuildTahoeLaneLayout(**tf, mid, mode).ok() ? hi : lo) = mid;
      }
      const int64_t least = least_of[paired] = hi;
      EXPECT_FALSE(BuildTahoeLaneLayout(**tf, least - 1, mode).ok());
      for (int64_t budget : {int64_t{1} << 30, least, 2 * least}) {
        absl::StatusOr<TahoeLaneLayout> lay = BuildTahoeLaneLayout(**tf, budget, mode);
        ASSERT_TRUE(lay.ok()) << lay.status();
        EXPECT_EQ(lay->paired, paired);
        EXPECT_LE(lay->part_bytes, budget);
        std::vector<double> sums;
        ASSERT_TRUE(
            TahoeLaneSumsHost(*lay, MakeRowsView(rows.data(), 50, f->num_features), &sums).ok());
        std::vector<float> got(50);
        for (int r = 0; r < 50; ++r) got[r] = static_cast<float>(f->base_margin[0] + sums[r]);
        EXPECT_LE(MaxRelativeError(got, want), kTolerance)
            << "seed " << seed << " budget " << budget << (paired ? " paired" : " single");
        if (lay->parts.size() > 1) ++multi_part;
        ++checked;
      }
    }
    // Automatic: single where it fits, else paired, which fits trees up to two columns tall.
    EXPECT_FALSE(BuildTahoeLaneLayout(**tf, least_of[0]).value().paired);
    if (least_of[1] < least_of[0]) {
      ++paired_smaller;
      EXPECT_TRUE(BuildTahoeLaneLayout(**tf, least_of[0] - 1).value().paired);
    }
  }
  EXPECT_EQ(checked, 36);
  EXPECT_GE(multi_part, 12);
  EXPECT_GE(paired_smaller, 3);
  RandomForestOptions o;
  o.num_outputs = 3;
  EXPECT_FALSE(TahoeLaneEligible(**TahoeForest::Build(WithFloatLeaves(MakeRandomForest(o)))));
  o.num_outputs = 1;
  o.categorical_fraction = 0.5;
  EXPECT_FALSE(TahoeLaneEligible(**TahoeForest::Build(WithFloatLeaves(MakeRandomForest(o)))));
  o.categorical_fraction = 0;
  Forest weighted = *MakeRandomForest(o);
  weighted.trees[0].weight = 0.3;  // double leaves: a table, not inline floats
  EXPECT_FALSE(TahoeLaneEligible(**TahoeForest::Build(*BuildForest(std::move(weighted)))));
}

}  // namespace
}  // namespace grove
