#include "tests/testing/naive_predict.h"

#include <cmath>

#include "core/model/decision.h"

namespace grove::testing {

int NaiveLeafIndex(const Forest& forest, int t, const float* row) {
  const Node* nodes = forest.TreeNodes(t);
  int i = 0;
  while (!nodes[i].is_leaf()) {
    const Node& n = nodes[i];
    const bool left = GoesLeft(n.flags, n.threshold, n.payload, n.aux, forest.category_bits.data(),
                               row[n.feature]);
    i = left ? n.left : n.right;
  }
  return i;
}

int NaiveLeafId(const Forest& forest, int t, const float* row) {
  return forest.TreeNodes(t)[NaiveLeafIndex(forest, t, row)].leaf_id;
}

double NaiveTreeValue(const Forest& forest, int t, const float* row, int k) {
  const Tree& tree = forest.trees[t];
  const Node& leaf = forest.TreeNodes(t)[NaiveLeafIndex(forest, t, row)];
  const int slot = tree.leaf_width > 1 ? k : 0;
  double value = forest.leaf_values[leaf.payload + slot];
  if (leaf.aux != 0) {
    const LinearLeaf& linear = forest.linear_leaves[leaf.aux - 1];
    double sum = linear.constant;
    bool missing = false;
    for (uint32_t j = linear.begin; j < linear.begin + linear.count; ++j) {
      const float x = row[forest.linear_features[j]];
      if (std::isnan(x)) {
        missing = true;
        break;
      }
      sum += forest.linear_coeffs[j] * static_cast<double>(x);
    }
    if (!missing) value = sum;
  }
  return value * tree.weight;
}

void NaiveMargins(const Forest& forest, const float* row, double* margins, int iteration_begin,
                  int iteration_end) {
  for (int k = 0; k < forest.num_outputs; ++k) margins[k] = forest.base_margin[k];
  for (int t = 0; t < static_cast<int>(forest.trees.size()); ++t) {
    if (!forest.TreeInRange(t, iteration_begin, iteration_end)) continue;
    const Tree& tree = forest.trees[t];
    if (tree.leaf_width > 1) {
      for (int k = 0; k < forest.num_outputs; ++k) margins[k] += NaiveTreeValue(forest, t, row, k);
    } else {
      margins[tree.group] += NaiveTreeValue(forest, t, row, 0);
    }
  }
}

}  // namespace grove::testing
