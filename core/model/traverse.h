// Per-row, per-tree traversal and leaf values, written once (GROVE_HD) for the CPU reference and the
// GPU kernels.
//
// A ForestView is a by-value bundle of raw pointers to a Forest's arrays: MakeForestView gives host
// pointers; a GPU engine fills the same struct with device pointers (d_ arrays it owns) and passes
// it into kernels by value. Nothing here allocates, throws or touches std:: containers.
//
// Rows are accessed through any `Row` with `float operator[](int feature) const` -- a plain
// `const float*` works, so do strided or shared-memory accessors.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/hd.h"
#include "core/model/decision.h"
#include "core/model/forest.h"

namespace grove {

struct ForestView {
  const Node* nodes = nullptr;             // all trees' nodes; tree t starts at trees[t].node_begin
  const Tree* trees = nullptr;
  int32_t num_trees = 0;
  int32_t num_features = 0;
  int32_t num_outputs = 1;
  const uint32_t* category_bits = nullptr;
  const double* leaf_values = nullptr;
  const LinearLeaf* linear_leaves = nullptr;  // may be null when the forest has none
  const int32_t* linear_features = nullptr;
  const double* linear_coeffs = nullptr;

  GROVE_HD const Node* TreeNodes(int32_t t) const { return nodes + trees[t].node_begin; }
};

// Host view of `forest`; valid while the forest lives.
inline ForestView MakeForestView(const Forest& forest) {
  ForestView v;
  v.nodes = forest.nodes.data();
  v.trees = forest.trees.data();
  v.num_trees = static_cast<int32_t>(forest.trees.size());
  v.num_features = forest.num_features;
  v.num_outputs = forest.num_outputs;
  v.category_bits = forest.category_bits.data();
  v.leaf_values = forest.leaf_values.data();
  v.linear_leaves = forest.linear_leaves.empty() ? nullptr : forest.linear_leaves.data();
  v.linear_features = forest.linear_features.empty() ? nullptr : forest.linear_features.data();
  v.linear_coeffs = forest.linear_coeffs.empty() ? nullptr : forest.linear_coeffs.data();
  return v;
}

GROVE_HD bool IsLeafNode(const Node& node) { return (node.flags & kNodeLeaf) != 0; }

// The child of split `node` that `row` takes (index relative to the tree's first node).
template <typename Row>
GROVE_HD int32_t NextNode(const Node& node, const uint32_t* category_bits, const Row& row) {
  const float x = row[node.feature];
  return GoesLeft(node.flags, node.threshold, node.payload, node.aux, category_bits, x) ? node.left
                                                                                       : node.right;
}

// Index (relative to `tree_nodes`) of the leaf that `row` reaches. The tree must have passed
// BuildForest (children in range, no cycles), so the loop ends within Tree::depth steps.
template <typename Row>
GROVE_HD int32_t TraverseTree(const Node* tree_nodes, const uint32_t* category_bits,
                              const Row& row) {
  int32_t i = 0;
  while (!IsLeafNode(tree_nodes[i])) i = NextNode(tree_nodes[i], category_bits, row);
  return i;
}

// Value `k` (< the tree's leaf_width) of `leaf`, before the tree weight. LightGBM linear leaves:
// constant + sum(coeff * x) accumulated in double, or the plain leaf value when any of the leaf's
// features is NaN (LightGBM's rule).
template <typename Row>
GROVE_HD double LeafValue(const ForestView& f, const Node& leaf, int k, const Row& row) {
  if (leaf.aux != 0) {
    const LinearLeaf& ll = f.linear_leaves[leaf.aux - 1];
    double value = ll.constant;
    for (uint32_t i = ll.begin; i < ll.begin + ll.count; ++i) {
      const float x = row[f.linear_features[i]];
      if (IsNan(x)) return f.leaf_values[leaf.payload];
      value += f.linear_coeffs[i] * static_cast<double>(x);
    }
    return value;
  }
  return f.leaf_values[leaf.payload + k];
}

// Boosting rounds [begin, end) resolved against a forest.
struct IterationRange {
  int begin = 0;
  int end = 0;
  int size() const { return end - begin; }
};

// Resolves options' [iteration_begin, iteration_end): end <= 0 means the last round. INVALID_ARGUMENT
// when begin < 0, end > num_iterations or the range is empty.
inline absl::Status ResolveIterationRange(const Forest& forest, int begin, int end,
                                          IterationRange* out) {
  const int resolved_end = end <= 0 ? forest.num_iterations : end;
  if (begin < 0 || resolved_end > forest.num_iterations || begin >= resolved_end) {
    return absl::InvalidArgumentError(absl::StrCat(
        "iteration range [", begin, ", ", end, ") is not a non-empty part of the model's ",
        forest.num_iterations, " boosting rounds (end <= 0 means the last round)"));
  }
  out->begin = begin;
  out->end = resolved_end;
  return absl::OkStatus();
}

}  // namespace grove
