// The CPU engine's walk: a block of rows through a group of trees, one level at a time.
//
// Every (tree, row) pair is a lane; a round moves every lane one level down. Lanes are
// independent, so the processor overlaps their node and feature loads (a single row's walk is a
// chain of dependent loads: the reason the reference walk is slow); leaves route to themselves
// (cpu_node.h), so a round needs no test for a finished lane and has no data-dependent branch on
// the fast decision. A group runs as many rounds as its deepest tree; trees deeper than
// kCheckDepth stop early once every lane is at a leaf (leaf-wise LightGBM trees are deep on a few
// paths only).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/model/decision.h"
#include "core/predict/cpu/cpu_forest.h"

namespace grove::cpu {

// Lanes of one walk: enough independent loads in flight to cover a cache miss, few enough that
// the lane indices stay in L1.
inline constexpr int kMaxLanes = 64;
// Rows of a block: the fused AVX-512 walk takes up to this many at once (a tree chunk walked over
// every row of the block before the next, so a large model is read from L3 once per block); the
// other walks take a block kMaxLanes rows at a time.
inline constexpr int kMaxBlockRows = 256;
inline constexpr int kMaxGroupTrees = 32;
inline constexpr int kCheckDepth = 12;
// Rows the complete-layout walk takes at once where no tree of a chunk goes on below the layout:
// eight vectors of one tree in flight, whose gathers overlap (the walks' other calls take
// kMaxLanes).
inline constexpr int kDenseLanes = 128;
// Trees the vector walks take over every row of a block before the next ones: a few tens of KB of
// nodes, which stay in a core's L2 while the block's rows pass.
inline constexpr int kTreeChunk = 16;

// The vector walks' order over a block: trees [t0, t0 + n) in chunks of kTreeChunk, each chunk
// over the block's num_rows rows `lanes` at a time, fn(first tree, trees, first row, rows). A
// block of many rows reads a chunk's nodes from memory once, and each row still adds its trees'
// leaves in tree order.
template <typename Fn>
inline void ForTreeChunks(int t0, int n, int num_rows, int lanes, Fn&& fn) {
  for (int c0 = t0; c0 < t0 + n; c0 += kTreeChunk) {
    const int cn = c0 + kTreeChunk < t0 + n ? kTreeChunk : t0 + n - c0;
    for (int r0 = 0; r0 < num_rows; r0 += lanes) {
      fn(c0, cn, r0, r0 + lanes < num_rows ? lanes : num_rows - r0);
    }
  }
}

// Trees walked together for a block of `rows` rows: all the lanes for small blocks.
inline int GroupTrees(int rows) {
  return std::min(kMaxGroupTrees, std::max(1, kMaxLanes / std::max(1, rows)));
}

// Walks rows [0, num_rows) of `block` (row r at block + r * stride) through the trees
// tree_ids[0, num_trees) (num_trees * num_rows <= kMaxLanes). On return idx[j * num_rows + r] is
// the leaf (relative to tree tree_ids[j]'s first node) that row r reaches. kNan: some value of the
// block may be missing. kGeneral: some split of the group needs the general decision.
template <bool kNan, bool kGeneral>
inline void WalkGroup(const CpuForest& cf, const int32_t* tree_ids, int num_trees,
                      const float* block, int64_t stride, int num_rows, int32_t* idx) {
  const CpuNode* all = cf.nodes();
  const CpuTree* trees = cf.trees();
  int depth = 0;
  for (int j = 0; j < num_trees; ++j) depth = std::max(depth, trees[tree_ids[j]].depth);
  const int lanes = num_trees * num_rows;
  // Byte offsets from each tree's first node while walking; node indices on return.
  for (int l = 0; l < lanes; ++l) idx[l] = 0;
  for (int d = 0; d < depth; ++d) {
    for (int j = 0; j < num_trees; ++j) {
      const uint32_t begin = trees[tree_ids[j]].node_begin;
      const char* nodes = reinterpret_cast<const char*>(all + begin);
      int32_t* at = idx + j * num_rows;
      const float* row = block;
      for (int r = 0; r < num_rows; ++r, row += stride) {
        const CpuNode& n = *reinterpret_cast<const CpuNode*>(nodes + at[r]);
        const float x = row[n.feature];
        int32_t right;
        if constexpr (kGeneral) {
          if (n.bits & kCpuGeneral) {
            const Node& o = cf.forest().nodes[cf.forest_node(begin + (at[r] >> kCpuNodeShift))];
            right = !GoesLeft(o.flags, o.threshold, o.payload, o.aux,
                              cf.forest().category_bits.data(), x);
          } else {
            right = kNan ? GoRight(n, x) : GoRightNoNan(n, x);
          }
        } else {
          right = kNan ? GoRight(n, x) : GoRightNoNan(n, x);
        }
        at[r] = n.left + (right << kCpuNodeShift);
      }
    }
    if (depth > kCheckDepth && (d & 3) == 3) {
      bool done = true;
      for (int j = 0; j < num_trees && done; ++j) {
        const char* nodes = reinterpret_cast<const char*>(all + trees[tree_ids[j]].node_begin);
        const int32_t* at = idx + j * num_rows;
        for (int r = 0; r < num_rows; ++r) {
          done &= (reinterpret_cast<const CpuNode*>(nodes + at[r])->bits & kCpuLeaf) != 0;
        }
      }
      if (done) break;
    }
  }
  for (int l = 0; l < lanes; ++l) idx[l] >>= kCpuNodeShift;
}

}  // namespace grove::cpu
