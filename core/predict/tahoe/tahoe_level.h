// Tahoe format, level layout: a second copy of a fixed-walk forest's nodes in which every tree is
// stored depth by depth with the two children of a split side by side (right, then left), and the
// pairs of one depth in the order of their parents' covers, largest first.
//
// Why: row chunk's lanes walk one tree in lockstep, one level per step, so at step s every lane of
// a warp reads a node of depth s. Depth-first with the hot child adjacent (tahoe_forest.h) keeps
// one row's path contiguous, but the nodes of one depth are spread over the whole tree: a warp step
// on a deep LightGBM tree touches ~6 distinct 128-byte lines. Breadth-first, the nodes of one depth
// are contiguous and siblings share a line: ~2.4 lines a step on the same rows (counted on
// prod-lgb-binary, 256 rows; ~2.7x fewer on depth-8 XGBoost forests). Below the first depths the
// lanes of a warp read nodes far apart, and the line count of a step sets the kernel's speed (the
// L1's data pipe, one wavefront a line, is its busiest unit on deep forests); pairs in cover order
// put the pairs that most rows reach in the same lines (the counts and timings are in
// docs/benchmarks/prediction-gpu.md). Covers are the model's (TahoeForest::covers); without them
// the order is breadth-first. The walk's step adds the comparison to the pair's offset
// (TahoeFixedStep::Offset<kLevel>) instead of choosing between the adjacent and the distant child;
// leaves still loop to themselves (distant 0, NaN never goes left).
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
