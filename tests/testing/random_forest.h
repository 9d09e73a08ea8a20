// Seeded random forests and rows for engine tests (CPU reference, GPU engines, fuzz-like sweeps).
//
// Everything is a pure function of its arguments (own RNG, no std:: distributions whose output
// differs between standard libraries), so a seed names the same forest on every machine.
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/forest.h"

namespace grove::testing {

struct RandomForestOptions {
  int num_trees = 10;
  int max_depth = 6;       // the deepest leaf is at this depth (root = depth 0)
  int num_features = 10;
  int num_outputs = 1;
  // true: every tree has num_outputs values per leaf (XGBoost multi_output_tree); false: scalar
  // trees, tree t in output group t % num_outputs, iteration t / num_outputs.
  bool vector_leaves = false;
  double categorical_fraction = 0.0;  // probability that a feature is categorical
  // > 0: a categorical feature has at most this many categories (0: up to 70, bitsets of 1 to 3
  // words); 64 keeps every set within two words.
  int max_categories = 0;
  // LightGBM rules: missing types None (NaN as 0) / Zero / NaN, categories in the set go left,
  // (int)x truncation of categories, leaf ids counted per leaf.
  bool lightgbm_rules = false;
  // With lightgbm_rules: missing type Zero is among the random missing types (false: such splits
  // get missing type NaN; the forest otherwise stays the same for a seed).
  bool missing_zero = true;
  double leaf_probability = 0.2;  // probability that a node above max_depth stops early
  // Probability that a split sends only 1e-6 of its parent's cover to one child.
  double extreme_cover_probability = 0.0;
  uint64_t seed = 1;
};

// A forest that passes BuildForest (aborts the test program otherwise) with:
//  * numeric and categorical splits (categorical features fixed per feature, bitsets of 1 to 3
//    words), random default directions, and with lightgbm_rules random missing types;
//  * features repeated along a path, per-feature threshold pools (so that rows can hit thresholds);
//  * unbalanced trees: early leaves with leaf_probability, and one path forced down to max_depth in
//    the first tree and in about half of the others; single-leaf trees occur;
//  * covers consistent bottom-up (parent = left + right exactly, in double), optionally with extreme
//    skew;
//  * random base margins, tree weights != 1 on about a third of the trees, identity link.
grove::ForestPtr MakeRandomForest(const RandomForestOptions& options);

// A copy of `forest` with another link (the random forests' is identity), e.g. a sigmoid for the
// probability output spaces.
grove::ForestPtr WithLink(const grove::Forest& forest, grove::Link link);

// Row-major num_rows x forest.num_features rows for `forest` (any forest, also a loaded one): many
// values exactly equal to a threshold the forest uses for that feature (and the next float below
// it), negatives, zeros and +-1e-36 (LightGBM missing type Zero), NaNs with probability nan_fraction;
// categorical features get categories in and out of the split sets, beyond the bitsets, negative
// and fractional values.
std::vector<float> MakeRandomRows(const grove::Forest& forest, int64_t num_rows, uint64_t seed,
                                  double nan_fraction = 0.1);

// A numeric split node (x < threshold goes left, missing values per `flags`).
grove::Node SplitNode(int feature, float threshold, int left, int right, double cover,
                      uint16_t flags = 0);
// A leaf node whose values start at leaf_values[payload] (appended by the caller).
grove::Node LeafNode(uint32_t payload, double cover, int leaf_id);

// Small hand-built forests for tests: add leaf values / bitsets, then trees of nodes, then Build().
//   HandForest h(/*num_features=*/2);
//   h.AddTree({h.Split(0, 0.5f, 1, 2, 10), h.Leaf(1.0, 6), h.Leaf(2.0, 4)});
//   ForestPtr f = h.Build();
struct HandForest {
  explicit HandForest(int num_features, int num_outputs = 1);
  // SplitNode.
  grove::Node Split(int feature, float threshold, int left, int right, double cover,
                    uint16_t flags = 0) const {
    return SplitNode(feature, threshold, left, right, cover, flags);
  }
  // A categorical split over `categories` (the in-set side: right, or left with
  // kNodeCategoryInSetGoesLeft in flags); appends the bitset.
  grove::Node CategoricalSplit(int feature, const std::vector<int>& categories, int left, int right,
                               double cover, uint16_t flags = 0);
  // A leaf with one value per entry of `values` (appended to leaf_values); leaf_id -1 means the
  // node's index in its tree, filled by AddTree.
  grove::Node Leaf(std::vector<double> values, double cover, int leaf_id = -1);
  grove::Node Leaf(double value, double cover, int leaf_id = -1) {
    return Leaf(std::vector<double>{value}, cover, leaf_id);
  }
  // iteration -1: the tree's index / num_outputs for scalar trees, the tree index otherwise.
  void AddTree(std::vector<grove::Node> nodes, int group = 0, double weight = 1.0,
               int leaf_width = 1, int iteration = -1);
  // BuildForest, aborting the test program on error.
  grove::ForestPtr Build();

  grove::Forest forest;
};

// The depth-2 tree the hand-computed SHAP tests work out:
//   node 0: x0 < 0.5, cover 10
//     node 1: x1 < 0.5, cover 6       node 2: x1 < 0.5, cover 4
//       leaf 3: 1 (cover 2)             leaf 5: 3 (cover 1)
//       leaf 4: 2 (cover 4)             leaf 6: 5 (cover 3)
grove::ForestPtr MakeDepth2Tree();

}  // namespace grove::testing

namespace grove {
using testing::HandForest;
// Also reachable unqualified from tests in namespace grove.
using testing::MakeDepth2Tree;
using testing::MakeRandomForest;
using testing::MakeRandomRows;
using testing::RandomForestOptions;
}  // namespace grove
