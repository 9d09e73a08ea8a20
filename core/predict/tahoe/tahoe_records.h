// Tahoe format, record layout: a copy of a numeric fixed-walk forest's splits in which one 16-byte
// load decides two depths, and the walk that reads it (host and GPU).
//
// Why: on deep forests row chunk is bound by the L1's data pipe, which passes a warp's load in
// about one wavefront per distinct 128-byte line its lanes touch; below the first depths every lane
// reads its own line, so the count of a row's node loads sets the kernel's time
// (docs/benchmarks/prediction-gpu.md). A record holds a split and both of its children (three
// thresholds, three features and their NaN directions), so a walk takes one load per two depths.
// Thresholds stay floats (exact, no binning of the rows): the three features take 9 bits each, so
// records serve forests of up to 512 features, and there is no room for child offsets: each tree's
// records form a complete 4-ary heap (record i's grandchildren at 4i + 1 .. 4i + 4), which suits
// depth-bounded trees (XGBoost's) and is refused where it would waste memory (leaf-wise trees far
// deeper than their leaf count needs).
//
// Per tree of depth D: records of heap levels 0 .. K - 1 (K = ceil(D / 2); level k holds the nodes
// of depths 2k and 2k + 1), then its 4^K leaves at heap positions R .. R + 4^K - 1 (R = (4^K - 1) /
// 3, the records before them) as 32-bit values, four a record. A leaf above depth 2K fills every
// leaf position below it and the splits under it are zero records, so every walk takes exactly K
// loads and one leaf load, with no leaf test: a row that reaches such a leaf goes on through zero
// records to one of the positions that hold its value.
//
// Routing and leaf values are the fixed walk's (x < threshold goes left, NaN by its direction;
// leaves as TahoeFixedLeafValue), and the leaves are added in tree order as TahoeSumFixedRoots adds
// them, so sums are bit-identical to the depth-first and level walks.
// Thread-safe: the builder is a pure function; the walk reads only.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/common/hd.h"
#include "core/predict/tahoe/tahoe_forest.h"
#include "core/predict/tahoe/tahoe_node.h"

namespace grove {

// A split (slot 0) and its left (slot 1) and right (slot 2) children.
struct alignas(16) TahoeRecord {
  uint32_t value[3];  // float threshold bits (a zero record under a leaf: 0)
  // Slot s's feature in bits 9s .. 9s + 8 and its NaN direction (1: left) in bit
  // kDefaultLeftShift + s.
  uint32_t word;
};
static_assert(sizeof(TahoeRecord) == 16, "TahoeRecord must stay 16 bytes");

namespace tahoe_record_bits {
inline constexpr int kFeatureBits = 9;
inline constexpr uint32_t kFeatureMask = (1u << kFeatureBits) - 1u;
inline constexpr int kMaxFeatures = 1 << kFeatureBits;
inline constexpr int kDefaultLeftShift = 3 * kFeatureBits;
// A tree's root word: its first record << kLevelBits | its heap levels K.
inline constexpr int kLevelBits = 5;
inline constexpr int kMaxLevels = 15;  // the byte budget refuses far fewer in practice
}  // namespace tahoe_record_bits

struct TahoeRecordLayout {
  std::vector<TahoeRecord> records;  // tree by tree, in the Tahoe tree order
  std::vector<uint32_t> roots;       // per Tahoe tree: its root word (tahoe_record_bits)
  // Empty when every leaf value is a float (the leaf positions hold float bits); else every leaf's
  // value as a double (a leaf-table forest's), indexed by the leaf positions.
  std::vector<double> leaves;
  int64_t bytes() const {
    return static_cast<int64_t>(records.size() * sizeof(TahoeRecord) + leaves.size() * 8 +
                                roots.size() * 4);
  }
};

// Builds the record layout of `tf`. FAILED_PRECONDITION when the forest does not qualify (not the
// fixed walk, a categorical split, a feature past 511) or the layout would take more than
// `max_bytes` (complete heaps of deep, sparse trees); the message says which.
absl::StatusOr<TahoeRecordLayout> BuildTahoeRecordLayout(const TahoeForest& tf, int64_t max_bytes);

// Margin sums of kRows rows (1, 2 or 4, walked together) over the trees whose root words are
// roots[begin, end): TahoeSumFixedRoots' sums, bit for bit, on the record layout. `leaves`: the
// layout's leaves on this side (null when empty). kNanFree: the rows hold no NaN (the NaN test
// drops out). `Row`: any accessor of a row's features by index.
template <bool kNanFree, int kRows, typename Row>
GROVE_HD void TahoeSumRecords(const TahoeRecord* records, const double* leaves,
                              const uint32_t* roots, uint32_t begin, uint32_t end,
                              const Row (&rows)[kRows], double (&sums)[kRows]) {
  namespace rb = tahoe_record_bits;
  double pending[kRows];
  for (int j = 0; j < kRows; ++j) sums[j] = 0, pending[j] = -0.0;
  uint32_t next = begin < end ? roots[begin] : 0;
  for (uint32_t t = begin; t < end; ++t) {
    const uint32_t root = next;
    if (t + 1 < end) next = roots[t + 1];
    const TahoeRecord* heap = records + (root >> rb::kLevelBits);
    const int levels = static_cast<int>(root & ((1u << rb::kLevelBits) - 1u));
    uint32_t pos[kRows];
    for (int j = 0; j < kRows; ++j) pos[j] = 0;
    for (int k = 0; k < levels; ++k) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int j = 0; j < kRows; ++j) {
#if defined(__CUDA_ARCH__)
        const uint4 r = *reinterpret_cast<const uint4*>(heap + pos[j]);
        const uint32_t t0 = r.x, t1 = r.y, t2 = r.z, w = r.w;
#else
        const TahoeRecord& r = heap[pos[j]];
        const uint32_t t0 = r.value[0], t1 = r.value[1], t2 = r.value[2], w = r.word;
#endif
        const float x0 = rows[j][w & rb::kFeatureMask];
        bool left0 = x0 < TahoeBitsToFloat(t0);
        if constexpr (!kNanFree) left0 = left0 | (IsNan(x0) & ((w >> rb::kDefaultLeftShift) & 1u));
        const uint32_t slot = left0 ? 1u : 2u;
        const float x1 = rows[j][(w >> (slot * rb::kFeatureBits)) & rb::kFeatureMask];
        bool left1 = x1 < TahoeBitsToFloat(left0 ? t1 : t2);
        if constexpr (!kNanFree) {
          left1 = left1 | (IsNan(x1) & ((w >> (rb::kDefaultLeftShift + slot)) & 1u));
        }
        pos[j] = 4u * pos[j] + 2u * slot - (left1 ? 1u : 0u);
      }
    }
    // Every row ends among the tree's 4^K leaf positions, after its records.
    const uint32_t first_leaf = ((1u << (2 * levels)) - 1u) / 3u;
    const uint32_t* leaf = reinterpret_cast<const uint32_t*>(heap + first_leaf) - first_leaf;
    for (int j = 0; j < kRows; ++j) {
      const uint32_t value = leaf[pos[j]];
      sums[j] += pending[j];
      pending[j] = leaves != nullptr ? leaves[value] : static_cast<double>(TahoeBitsToFloat(value));
    }
  }
  for (int j = 0; j < kRows; ++j) sums[j] += pending[j];
}

}  // namespace grove
