// A deliberately plain reference traversal of a Forest for tests: one row at a time, double
// arithmetic, the shared decision function (core/model/decision.h). It checks loaders against the
// libraries' leaf.csv / margin.csv and serves as the oracle for the real engines' tests.
//
// Thread-safe (pure functions).
#pragma once

#include "core/model/forest.h"

namespace grove::testing {

// Index (relative to the tree's first node) of the leaf that `row` reaches in tree `t`.
// `row` holds forest.num_features values, NaN = missing.
int NaiveLeafIndex(const Forest& forest, int t, const float* row);

// The library's leaf id (Node::leaf_id) of that leaf.
int NaiveLeafId(const Forest& forest, int t, const float* row);

// Value of the leaf reached in tree `t` for output `k` (leaf_width > 1 trees: value k; scalar
// trees: their only value), linear leaves included, times Tree::weight.
double NaiveTreeValue(const Forest& forest, int t, const float* row, int k);

// Raw margins of one row: base_margin plus the weighted leaf values of the trees whose iteration is
// in [iteration_begin, iteration_end) (iteration_end <= 0: all). `margins` has num_outputs values.
void NaiveMargins(const Forest& forest, const float* row, double* margins, int iteration_begin = 0,
                  int iteration_end = 0);

}  // namespace grove::testing
