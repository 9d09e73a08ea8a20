// Tahoe format, part 4: the lane layout (a tree per lane of a half-warp, bank-conflict-free) that
// splitting shared forest walks on scalar forests, its builder and its GROVE_HD walk.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/hd.h"
#include "core/common/rows.h"
#include "core/predict/tahoe/tahoe_forest.h"
#include "core/predict/tahoe/tahoe_node.h"

namespace grove {

// Lane layout: the format rearranged for a tree-per-lane walk (splitting shared forest on scalar
// forests). With one row per half-warp and one tree per lane, the lanes read different trees, so
// where those trees sit decides the bank conflicts. Shared memory is seen as kTahoeLaneTrees columns
// of 8-byte slots (slot s is in column s % 16: with 8-byte slots column j is bank pair j), in rows of
// 16 slots. Trees go in bundles of 16, lane j of a half-warp walking tree j of each bundle, and the
// layout makes the 16 lanes read 16 different columns at every step, so every node load of the warp
// (both halves walk the same bundle for two rows) takes the two wavefronts of a 64-bit access
// whatever paths the trees take (the row-per-thread walk measured 3.8 on adult-large).
//  * single: tree j of every bundle lives in column j, each node's left child in the next row;
//  * paired (when a tree is taller than a column): lanes j and j + 8 share columns j and j + 8, and
//    a tree's nodes alternate between them by depth: lane j reads column j at even steps and j + 8
//    at odd ones, lane j + 8 the other way round, so a tree may use up to two columns. Each of the
//    pair's two "virtual columns" v = 0, 1 is a sequence of rows whose cell r is in column
//    j + 8 * ((r + v) % 2): a left child is again in the next row of its parent's virtual column.
// Steps are lockstep: a bundle walks `steps` (its deepest tree) steps, a lane at a leaf staying
// there (leaves read the NaN column and step by 0). In the paired layout a lane resting on a leaf
// may then share a column with its partner (a conflict, never a wrong result).
// The left child is always the next row (no hot-child flag), and rows are staged with each feature
// twice (NaN read as -inf and as +inf; a split reads the copy that sends NaN its default way), so a
// step is `x < threshold ? next row : this + delta`, with no NaN test and no flag.
inline constexpr int kTahoeLaneTrees = 16;
inline constexpr int kTahoeLaneUnroll = 4;  // steps per bundle are a multiple of this
static_assert(kTahoeLaneUnroll % 2 == 0, "the walk's unrolled steps keep the step parity");

// word = column | delta << column_bits, delta (signed) = bytes from this slot to the right child
// (0 for a leaf, whose column is the NaN column).
struct alignas(8) TahoeLaneNode {
  uint32_t value;  // split: float threshold bits; leaf: float value bits (weight included)
  uint32_t word;
};
static_assert(sizeof(TahoeLaneNode) == 8, "TahoeLaneNode must stay 8 bytes");

// One tree of a bundle: record b * kTahoeLaneTrees + j of TahoeLaneLayout::bundles.
struct TahoeLaneBundle {
  uint32_t slot_begin;  // the tree's root slot (absolute)
  uint32_t steps;       // deepest tree of the bundle, rounded up to kTahoeLaneUnroll (same for all j)
};

// Bundles [bundle_begin, bundle_end) (records [bundle_begin * 16, bundle_end * 16)) and their slots.
struct TahoeLanePart {
  uint32_t bundle_begin, bundle_end;
  uint32_t slot_begin, slot_end;
};

enum class TahoeLaneMode { kAuto, kSingle, kPaired };  // kAuto: single where every tree fits

struct TahoeLaneLayout {
  std::vector<TahoeLaneNode> slots;
  std::vector<TahoeLaneBundle> bundles;  // kTahoeLaneTrees records per bundle
  std::vector<TahoeLanePart> parts;
  bool paired = false;
  uint32_t column_bits = 1;
  int columns = 1;            // 2 * num_features + 1
  int64_t part_bytes = 0;     // shared memory of the largest part (TahoeLanePartBytes)
  double padding = 0;         // fraction of slots that hold no node
};

// Shared memory of a part: its slots, then its bundle records (the kernel puts them right after the
// part's own slots, so the largest part bounds the kernel's memory).
inline int64_t TahoeLanePartBytes(int64_t slots, int64_t bundles) {
  return slots * int64_t{sizeof(TahoeLaneNode)} +
         bundles * kTahoeLaneTrees * int64_t{sizeof(TahoeLaneBundle)};
}

// Whether BuildTahoeLaneLayout applies: fixed_walk() with numeric splits only (the lane step has
// no categorical test), one output, inline float leaves (so no leaf needs the table), finite
// thresholds.
bool TahoeLaneEligible(const TahoeForest& tf);

// Builds the lane layout with parts of at most `max_part_bytes` (INVALID_ARGUMENT when the forest is
// not eligible or one bundle does not fit). Trees are bundled deepest first, so that a bundle's
// trees take like numbers of steps and the columns grow evenly.
absl::StatusOr<TahoeLaneLayout> BuildTahoeLaneLayout(const TahoeForest& tf, int64_t max_part_bytes,
                                                     TahoeLaneMode mode = TahoeLaneMode::kAuto);

// Stages feature value x into its two lane-layout columns.
GROVE_HD void TahoeLaneStage(float x, float* two_columns) {
  const bool nan = IsNan(x);
  two_columns[0] = nan ? -TahoeBitsToFloat(0x7f800000u) : x;
  two_columns[1] = nan ? TahoeBitsToFloat(0x7f800000u) : x;
}

GROVE_HD TahoeLaneNode TahoeLoad(const TahoeLaneNode* p) { return TahoeLoadPair(p); }

// Bytes from a slot to its left child (the next row of its virtual column) at even and odd steps,
// for lane `lane` (0..15) of a half-warp.
struct TahoeLaneAdvance {
  int32_t even, odd;
};
GROVE_HD TahoeLaneAdvance TahoeLaneAdvanceFor(bool paired, int lane) {
  constexpr int32_t kRow = kTahoeLaneTrees * 8, kHalf = kRow / 2;
  if (!paired) return {kRow, kRow};
  // Lane j (< 8) is in column j at even steps: the next row's cell is half a row further on.
  return lane < kTahoeLaneTrees / 2 ? TahoeLaneAdvance{kRow + kHalf, kRow - kHalf}
                                    : TahoeLaneAdvance{kRow - kHalf, kRow + kHalf};
}

// Where the lane walk reads: host pointers here (the reference); the kernel passes 32-bit
// shared-memory addresses (tahoe_kernels.cuh), so that a feature read is one shift-add and one load.
struct TahoeLaneHostMemory {
  using Addr = const char*;
  GROVE_HD static TahoeLaneNode Node(Addr a) { return TahoeLoad(reinterpret_cast<const TahoeLaneNode*>(a)); }
  GROVE_HD static float Feature(Addr row, uint32_t column) {
    return reinterpret_cast<const float*>(row)[column];
  }
};

// Walks one tree of a bundle for one staged row (`row`: `columns` floats) and returns its leaf value.
// `slot`: the tree's root; `steps` >= the tree's depth and a multiple of kTahoeLaneUnroll.
template <typename Memory = TahoeLaneHostMemory>
GROVE_HD float TahoeLaneWalk(typename Memory::Addr slot, uint32_t steps, typename Memory::Addr row,
                             uint32_t column_bits, TahoeLaneAdvance adv) {
  const uint32_t cmask = (1u << column_bits) - 1u;
  TahoeLaneNode n = Memory::Node(slot);
  for (uint32_t s = 0; s < steps; s += kTahoeLaneUnroll) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int u = 0; u < kTahoeLaneUnroll; ++u) {
      const bool left = Memory::Feature(row, n.word & cmask) < TahoeBitsToFloat(n.value);
      slot += left ? ((u & 1) ? adv.odd : adv.even) : (static_cast<int32_t>(n.word) >> column_bits);
      n = Memory::Node(slot);
    }
  }
  return TahoeBitsToFloat(n.value);
}

// Margin sums (base margin not included) of `rows` through the lane layout, adding the trees of each
// part lane by lane as the kernel does. Host reference for tests.
absl::Status TahoeLaneSumsHost(const TahoeLaneLayout& layout, RowsView rows, std::vector<double>* sums);

}  // namespace grove
