// The row layout's geometry: where CpuForest keeps each tree's complete-layout nodes for one row
// walked across trees (cpu::PredictRow's AVX-512 walk, WalkAndAddRowSimd). A value type: built
// once at load, then read by any number of threads.
#ifndef GROVE_CORE_PREDICT_CPU_CPU_ROW_LAYOUT_H_
#define GROVE_CORE_PREDICT_CPU_CPU_ROW_LAYOUT_H_

#include <array>
#include <cstdint>

namespace grove::cpu {

// Trees of the row layout interleaved in one block (the lanes of one AVX-512 vector).
inline constexpr int kRowBlockTrees = 16;
// Levels of the row layout read with vector loads (LoadTop512): few positions per level there.
inline constexpr int kRowTopLevels = 3;
// Levels a row layout can hold: at least CpuForest's complete layout's kDenseMaxDepth
// (static_assert in cpu_forest.h).
inline constexpr int kRowMaxDepth = 16;

// Where the row layout (CpuForest::row_nodes) keeps the complete layout's nodes of the tree in
// slot s, for one row walked across trees sixteen to a vector. Two regions:
//  - the first interleaved() levels, by block of kRowBlockTrees trees position by position: the
//    node at position p < 2^interleaved() - 1 is
//    TopNode(s, p) = ((s / 16) * (2^interleaved() - 1) + p) * 16 + s % 16, so a level where a
//    block's trees have few candidates (the first kRowTopLevels) is read with vector loads;
//  - the deeper levels tree by tree (tree_nodes() nodes per slot from deep_base()), in groups of
//    up to three levels: for each node at a group's first level, the subtree of the group's
//    levels below it, breadth first, in a slot of 8 nodes (4 for two levels, 1 for one) aligned
//    to its size, so the three nodes of a path through a group share one 64-byte line instead
//    of three. A walk there reads one line per group per tree, not one per level; it pays a few
//    more operations per level to find the node, which is why a layout that stays in a core's L2
//    interleaves every level instead (CpuForest chooses, by the layout's bytes).
// Positions are the complete layout's: level d's q-th node (0 <= q < 2^d) is position
// 2^d - 1 + q. Node indices fit int32 (CpuForest builds no row layout otherwise).
class RowGeometry {
 public:
  // Per level at or below interleaved(): DeepNode's terms.
  struct Level {
    int32_t offset = 0;     // first node of the level's group within a tree's deep region
    int32_t shift = 0;      // levels between the group's first level and this one
    int32_t slot_log2 = 0;  // log2 of the group's slot, in nodes
  };

  RowGeometry() = default;
  // Geometry of `depth` levels (0 .. kRowMaxDepth: the caller's contract) for `slots` trees,
  // the first max(interleaved, kRowTopLevels) of them interleaved (all where depth is less).
  RowGeometry(int depth, int64_t slots, int interleaved) : depth_(depth) {
    interleaved = interleaved > kRowTopLevels ? interleaved : kRowTopLevels;
    interleaved_ = depth < interleaved ? depth : interleaved;
    const int64_t blocks = (slots + kRowBlockTrees - 1) / kRowBlockTrees;
    const int64_t top_nodes = blocks * kRowBlockTrees * ((int64_t{1} << interleaved_) - 1);
    // Deep nodes start on a whole 64-byte line of 8 nodes (row_nodes() itself is line-aligned).
    deep_base_ = (top_nodes + 7) / 8 * 8;
    int32_t offset = 0;
    for (int first = interleaved_; first < depth; first += 3) {
      const int group = depth - first < 3 ? depth - first : 3;
      const int slot_log2 = group == 1 ? 0 : group;
      for (int d = first; d < first + group; ++d) levels_[d] = {offset, d - first, slot_log2};
      offset += static_cast<int32_t>(int64_t{1} << (first + slot_log2));
    }
    tree_nodes_ = offset;  // a multiple of 8: every group starts at a level >= 3
    size_ = deep_base_ + blocks * kRowBlockTrees * tree_nodes_;
  }

  int depth() const { return depth_; }
  int interleaved() const { return interleaved_; }
  int64_t deep_base() const { return deep_base_; }
  int32_t tree_nodes() const { return tree_nodes_; }
  // Nodes of the layout (row_nodes()'s length), padding included.
  int64_t size() const { return size_; }
  const Level& level(int d) const { return levels_[d]; }

  // The node at position p < 2^interleaved() - 1 of the tree in slot s.
  int64_t TopNode(int64_t s, int64_t p) const {
    return ((s / kRowBlockTrees) * ((int64_t{1} << interleaved_) - 1) + p) * kRowBlockTrees +
           s % kRowBlockTrees;
  }
  // The q-th node of level d >= interleaved() of the tree in slot s.
  int64_t DeepNode(int64_t s, int d, int64_t q) const {
    const Level& l = levels_[d];
    const int64_t in_group = q & ((int64_t{1} << l.shift) - 1);
    return deep_base_ + s * tree_nodes_ + l.offset + ((q >> l.shift) << l.slot_log2) +
           ((int64_t{1} << l.shift) - 1) + in_group;
  }

 private:
  int depth_ = 0;
  int interleaved_ = 0;
  int64_t deep_base_ = 0;
  int32_t tree_nodes_ = 0;
  int64_t size_ = 0;
  std::array<Level, kRowMaxDepth> levels_{};
};

}  // namespace grove::cpu

#endif  // GROVE_CORE_PREDICT_CPU_CPU_ROW_LAYOUT_H_
