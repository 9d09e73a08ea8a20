// Saabas attributions of one row over one tree, written once (GROVE_HD) for every engine that
// computes them: the row's path is walked with the predictor's decision (traverse.h), and each
// split on it credits its feature with the change of the tree's expected value from the node to
// the child the row takes. The expected values are precomputed per node (SaabasModel), so the
// walk is O(depth) with one table read per step.
#pragma once

#include <cstdint>

#include "core/common/hd.h"
#include "core/model/traverse.h"

namespace grove {

// Adds the attributions of `row` over the tree whose nodes are `nodes` into `phi`: the `width`
// leaf values of the tree go to output blocks phi[b * f1 ...], b < width, the column of a
// split's player (its feature, or player[feature] when `player` is not null). `steps` holds per
// node, `width` values each, the tree weight times (expected value of the node) minus (expected
// value of its parent); the root's entry is unused.
template <typename Row>
GROVE_HD void AddSaabasTree(const Node* nodes, const uint32_t* category_bits, const double* steps,
                            int width, const int32_t* player, const Row& row, double* phi,
                            int64_t f1) {
  int32_t i = 0;
  while (!IsLeafNode(nodes[i])) {
    const Node& n = nodes[i];
    const int32_t child = NextNode(n, category_bits, row);
    const int32_t column = player != nullptr ? player[n.feature] : n.feature;
    for (int b = 0; b < width; ++b) phi[b * f1 + column] += steps[int64_t{child} * width + b];
    i = child;
  }
}

}  // namespace grove
