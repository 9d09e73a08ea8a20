// Tahoe format, level layout: a second copy of a fixed-walk forest's nodes in which every tree is
// stored breadth-first with the two children of a split side by side (right, then left).
//
// Why: row chunk's lanes walk one tree in lockstep, one level per step, so at step s every lane of
// a warp reads a node of depth s. Depth-first with the hot child adjacent (tahoe_forest.h) keeps
// one row's path contiguous, but the nodes of one depth are spread over the whole tree: a warp step
// on a deep LightGBM tree touches ~6 distinct 128-byte lines. Breadth-first, the nodes of one depth
// are contiguous and siblings share a line: ~2.4 lines a step on the same rows (counted on
// prod-lgb-binary, 256 rows; ~2.7x fewer on depth-8 XGBoost forests). The walk's step adds the
// comparison to the pair's offset (TahoeFixedStep::Offset<kLevel>) instead of choosing between the
// adjacent and the distant child; leaves still loop to themselves (distant 0, NaN never goes left).
//
// The copy carries the same values, features and flags (routing and leaf values are identical, so
// sums are bit-identical to the depth-first walk); it serves TahoeSumFixedRoots only (row chunk's
// walks from the roots), where the engine measures at load whether it pays (tahoe_probe.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/predict/tahoe/tahoe_forest.h"
#include "core/predict/tahoe/tahoe_node.h"

namespace grove {

struct TahoeLevelLayout {
  std::vector<TahoeNode8> nodes;  // tree by tree, in the Tahoe tree order
  std::vector<uint32_t> roots;    // per Tahoe tree: its root's index, `base` + position in nodes
};

// Builds the level layout of `tf` with root indices offset by `base` (the layout is meant to sit
// after tf.nodes8() in one device array, so base = tf.nodes8().size()). FAILED_PRECONDITION unless
// tf.fixed_walk(); INVALID_ARGUMENT when an index or offset does not fit the packed node.
absl::StatusOr<TahoeLevelLayout> BuildTahoeLevelLayout(const TahoeForest& tf, uint32_t base);

}  // namespace grove
