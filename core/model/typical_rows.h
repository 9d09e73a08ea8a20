// Rows shaped like the training data, made from the forest alone: for timing engines at load.
//
// The load-time probes (prediction's strategy and shape choice) time kernels on synthetic rows. Rows
// drawn at random around split thresholds stop at shallow leaves of deep leaf-wise trees, where
// real rows follow the high-cover paths to deep leaves, so timings on them rank the strategies and
// shapes differently from real rows (docs/benchmarks/archive.md). A typical row instead walks trees from their roots, taking each free split
// with the probability of its children's covers (the training rows that went each way), and keeps
// the interval of values that its choices allow for each feature, so later trees see the same
// values; the values are then drawn inside the intervals. Categorical features likewise keep the
// set of categories their choices allow: a row that kept one category for every categorical
// feature would send whole warps down the same categorical branches, which real rows do not.
//
// Thread-safe (pure function of its arguments, own RNG).
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/forest.h"

namespace grove {

// `rows` x forest.num_features row-major rows. Each row walks up to `max_trees_per_row` trees (all
// when 0), starting at a tree chosen per row and continuing in order. Categorical splits are taken
// the same way over the categories the row's earlier choices still allow (a split whose allowed
// categories all go one way sends the row there), and the row's category is drawn among those
// left at the end; numeric features no walked split constrains get one of their thresholds (or 0),
// categorical ones any category their splits name. No NaN: how often real rows miss a value is not
// in the model.
std::vector<float> TypicalRows(const Forest& forest, int64_t rows, uint64_t seed,
                               int max_trees_per_row = 256);

}  // namespace grove
