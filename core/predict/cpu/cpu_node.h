// The CPU prediction engine's node: a split in 16 bytes (a quarter of a cache line; the Forest's
// Node is 40), with the decision branch-free for the splits most models are made of.
//
// Layout contract (built by CpuForest::Build, read by cpu_walk.h):
//  * a tree's nodes follow their parents, the two children of a split adjacent: the left child at
//    byte offset `left` from the tree's first node, the right one 16 bytes further (byte offsets,
//    so that a step of the walk is an add, not a scaled index); breadth-first, or for a tree
//    deeper than the complete layout, in clusters of a pair and its children's pairs;
//  * a leaf routes every row to itself: its threshold is NaN (`x < NaN` is false for every x, so
//    the row "goes right"), its `left` is its own offset - 16 and its NaN bit is clear. A walk can
//    therefore run a fixed number of levels without asking whether it has reached a leaf;
//  * `kCpuNanLeft` holds where a missing value goes, resolved at load: the default direction, or
//    for LightGBM's missing type None (NaN compared as 0) the side 0.0f takes;
//  * `kCpuGeneral` marks splits the fast decision cannot take (categorical, LightGBM missing type
//    Zero): the scalar walk decides them by GoesLeft (core/model/decision.h) on the Forest's own
//    node, so both engines share one statement of every library's rule;
//  * `kCpuCategory` marks, among those, a categorical split the vector walks decide themselves:
//    its set lists categories below CpuForest::category_limit() only and follows the model's one
//    truncation rule (CpuForest::category_truncate). Its `threshold` holds, as bits, the index p
//    of its set in CpuForest::category_words (the stride words from p x category_stride(): the
//    categories that go left), and `kCpuOutsideLeft` where a value outside them (at or past the
//    limit, or invalid under the rule) goes left (the split sends the listed categories right). A
//    missing value follows kCpuNanLeft.
#pragma once

#include <cstdint>

namespace grove::cpu {

inline constexpr uint32_t kCpuNanLeft = 1u << 0;  // a missing value takes the left child
inline constexpr uint32_t kCpuGeneral = 1u << 1;  // decide with GoesLeft on the Forest node
inline constexpr uint32_t kCpuLeaf = 1u << 2;     // a leaf (routes to itself)
inline constexpr uint32_t kCpuCategory = 1u << 3;  // a categorical split the vector walks decide
inline constexpr uint32_t kCpuOutsideLeft = 1u << 4;  // kCpuCategory: an unlisted value goes left

struct CpuNode {
  float threshold = 0;  // x < threshold goes left; NaN for a leaf; kCpuCategory: the set's index
  int32_t feature = 0;  // split feature; 0 for a leaf (read, never decisive)
  int32_t left = 0;     // left child's byte offset in the tree; the right child's is left + 16
  uint32_t bits = 0;    // kCpuNanLeft | kCpuGeneral | kCpuLeaf | kCpuCategory | kCpuOutsideLeft
};
static_assert(sizeof(CpuNode) == 16, "CpuNode must stay a quarter of a cache line");
inline constexpr int kCpuNodeShift = 4;  // log2(sizeof(CpuNode))

// The child (0 left, 1 right) for a row whose value is `x`, when no value of the block is
// missing: one compare.
inline int32_t GoRightNoNan(const CpuNode& n, float x) { return !(x < n.threshold); }

// The same with missing values: NaN compares false, so the NaN bit alone decides for it.
inline int32_t GoRight(const CpuNode& n, float x) {
  const bool nan = x != x;
  const bool left = (x < n.threshold) | (nan & static_cast<bool>(n.bits & kCpuNanLeft));
  return !left;
}

}  // namespace grove::cpu
