// Tahoe format, part 2: the per-row, per-tree logic written once as GROVE_HD code (the GPU kernels and
// TahoePredictHost run the same functions): the walks of a tree (generic, simple, fixed), leaf values,
// accumulation over trees and the finalisation of a row. The nodes are tahoe_node.h's.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/common/hd.h"
#include "core/model/decision.h"
#include "core/model/transform.h"
#include "core/predict/tahoe/tahoe_node.h"

namespace grove {

// The walk of TahoeTraverse (kSimple false) and of TahoeTraverseSimple (kSimple true), one loop
// whose step is chosen at compile time.
template <bool kSimple, typename Node, typename Row>
GROVE_HD uint32_t TahoeWalk(const Node* nodes, uint32_t idx, const Row& row,
                            const TahoeForestView& f, TahoeDecoded& leaf) {
  for (;;) {
    const TahoeDecoded d = TahoeDecode(TahoeLoad(nodes + idx), f.feature_bits);
    if (d.flags & tahoe_bits::kLeaf) {
      leaf = d;
      return idx;
    }
    if constexpr (kSimple) {
      const float x = row[d.feature];
      const bool left = IsNan(x) ? (d.flags & tahoe_bits::kDefaultLeft) != 0
                                 : x < TahoeBitsToFloat(d.value);
      idx += left != ((d.flags & tahoe_bits::kHotRight) != 0) ? 1u : d.distant;
    } else {
      idx += TahoeGoesAdjacent(d, f, row[d.feature]) ? 1u : d.distant;
    }
  }
}

// Index (into `nodes`) of the leaf that `row` reaches from `idx`; the decoded leaf goes to `leaf`.
// `row[f]` gives feature f.
template <typename Node, typename Row>
GROVE_HD uint32_t TahoeTraverse(const Node* nodes, uint32_t idx, const Row& row,
                                const TahoeForestView& f, TahoeDecoded& leaf) {
  return TahoeWalk<false>(nodes, idx, row, f, leaf);
}

// The same walk for "simple" forests (TahoeForest::simple(): numeric splits only, no missing-zero
// rule), which covers most XGBoost models: NaN takes the default direction, else x < threshold goes
// left -- exactly NumericGoesLeft for such nodes -- with the decode masks hoisted out of the loop.
// About half the instructions per node of TahoeTraverse.
template <typename Node, typename Row>
GROVE_HD uint32_t TahoeTraverseSimple(const Node* nodes, uint32_t idx, const Row& row,
                                      const TahoeForestView& f, TahoeDecoded& leaf) {
  return TahoeWalk<true>(nodes, idx, row, f, leaf);
}

// TahoeNode8 specialisation: masks and shifts computed once per tree.
template <typename Row>
GROVE_HD uint32_t TahoeTraverseSimple(const TahoeNode8* nodes, uint32_t idx, const Row& row,
                                      const TahoeForestView& f, TahoeDecoded& leaf) {
  const uint32_t fb = f.feature_bits;
  const uint32_t fmask = (1u << fb) - 1u;
  const uint32_t leaf_bit = tahoe_bits::kLeaf << fb;
  const uint32_t default_left_bit = tahoe_bits::kDefaultLeft << fb;
  const uint32_t hot_right_bit = tahoe_bits::kHotRight << fb;
  const uint32_t dshift = fb + tahoe_bits::kNumFlags;
  for (;;) {
    const TahoeNode8 n = TahoeLoad(nodes + idx);
    if (n.word & leaf_bit) {
      leaf = TahoeDecode(n, fb);
      return idx;
    }
    const float x = row[n.word & fmask];
    const bool left = IsNan(x) ? (n.word & default_left_bit) != 0 : x < TahoeBitsToFloat(n.value);
    idx += left != ((n.word & hot_right_bit) != 0) ? 1u : (n.word >> dshift);
  }
}

// Walks of a tree, from the most general to the cheapest per node (TahoeAccumulateTrees' kWalk):
//  * kGeneric: every split kind (TahoeTraverse);
//  * kSimple: TahoeForest::simple() forests (TahoeTraverseSimple);
//  * kFixed: TahoeForest::fixed_walk() forests with rows padded by a NaN column (TahoeWalkFixed);
//  * kFixedCat: the same for fixed-walk forests with categorical splits (TahoeForest::categorical():
//    the step tests for a categorical split, which numeric forests do not pay for);
//  * kFixedCatPairs: the same for TahoeForest::cat_pairs() forests (sets of up to 64 categories),
//    whose step reads every set as 64 bits with no branch.
enum TahoeWalk : int {
  kTahoeWalkGeneric = 0,
  kTahoeWalkSimple = 1,
  kTahoeWalkFixed = 2,
  kTahoeWalkFixedCat = 3,
  kTahoeWalkFixedCatPairs = 4
};
GROVE_HD constexpr bool TahoeWalkIsFixed(int walk) {
  return walk == kTahoeWalkFixed || walk == kTahoeWalkFixedCat || walk == kTahoeWalkFixedCatPairs;
}

// The categorical test of a fixed step (TahoeFixedStep's kCat): none (numeric forests), the
// general one (TahoeCatGoesLeft: any set), the pair test of cat_pairs forests, or the code test:
// the pair test on rows whose categorical features hold category codes (TahoeCategoryCode) instead
// of values, which row chunk stages for cat_pairs forests.
enum TahoeCatTest : int {
  kTahoeCatNone = 0,
  kTahoeCatGeneral = 1,
  kTahoeCatPairs = 2,
  kTahoeCatCodes = 3
};

// The staged form of a categorical feature's value `x` for the code test, stored in the row's float
// as its bits: the category c in 0..63 (CategoryInSet's rule under `cat_low`,
// TahoeForestView::cat_low), kTahoeNoCategory for a value that is no category (below cat_low, 64 or
// more), and NaN unchanged (its bits are above 63 too, so it is in no set, and the walk's NaN test
// still sees it). A code is never NaN. The code test is then one 64-bit shift of the set.
inline constexpr uint32_t kTahoeNoCategory = 64;
GROVE_HD float TahoeCategoryCode(float x, float cat_low) {
  if (IsNan(x)) return x;
  const uint32_t c = x >= cat_low && x < 64.0f ? static_cast<uint32_t>(x < 0.0f ? 0.0f : x)
                                                : kTahoeNoCategory;
  return TahoeBitsToFloat(c);
}
// Is feature `feature` categorical in a forest whose categorical features are the bits of
// `cat_features` (TahoeForestView::cat_features)?
GROVE_HD bool TahoeIsCatFeature(const uint32_t* cat_features, uint32_t feature) {
  return ((cat_features[feature >> 5] >> (feature & 31u)) & 1u) != 0;
}
GROVE_HD constexpr int TahoeWalkCat(int walk) {
  return walk == kTahoeWalkFixedCat        ? kTahoeCatGeneral
         : walk == kTahoeWalkFixedCatPairs ? kTahoeCatPairs
                                           : kTahoeCatNone;
}

// Steps TahoeWalkFixed takes between two tests of whether every lane has reached its leaf.
inline constexpr int kTahoeFixedUnroll = 4;
// The level walk's steps between votes: its step is cheaper, so a vote costs relatively more, but
// the steps a warp takes past its deepest lane's leaf (up to kTahoeFixedUnroll - 1 per tree, every
// lane issuing) cost more than the extra votes on deep leaf-wise trees.
inline constexpr int kTahoeLevelUnroll = 2;

// Branch-free walk for TahoeForest::fixed_walk() forests. Every leaf names the padding feature
// `num_features` (whose value is NaN in every row the caller passes) and has no flag that a split
// reads, so at a leaf the comparison fails, NaN does not go left, and the walk adds the leaf's
// distant offset, 0: leaves loop to themselves. The walk can therefore take kTahoeFixedUnroll steps
// between leaf tests with no test or branch per node, and on the GPU one test serves the warp
// (lanes loop until all of them are at a leaf; extra steps are no-ops). Routing is TahoeTraverseSimple's
// (NaN takes the default direction, else x < threshold goes left). `row[num_features]` must be NaN.
// Returns the leaf's index; its node goes to `leaf`.
// Categorical splits (kCat) route by TahoeCatGoesLeft, or by the pair test (TahoeCatTest); the step
// tests a node for one only when the forest has them. A leaf is never taken for one (kLeafTable
// shares kCategorical's bit: the test reads both bits), so leaves still step to themselves.
// The packed word's fields for a forest's feature_bits (the view's word_* and cat_word_* fields);
// Step is one fixed step (a leaf steps to itself).
struct TahoeFixedStep {
  uint32_t fmask, leaf_bit, default_left_bit, hot_right_bit, dshift;
  uint32_t cat_bit, cat_test;  // a split is categorical when (word & cat_test) == cat_bit
  // A split's set is in the table when word & cat_table_bit: kCatTable is kMissingZero's bit, which
  // no split of a fixed-walk forest sets otherwise and no leaf sets.
  uint32_t cat_table_bit;
  // The forest's category sets (TahoeCatGoesLeft reads these four).
  const TahoeCatSplit* cat_splits;
  const uint32_t* cat_bits;
  bool cat_truncate;
  uint32_t cat_words;
  // The least value of a category under the forest's rule (the pair test; TahoeForestView::cat_low).
  float cat_low;
  GROVE_HD explicit TahoeFixedStep(const TahoeForestView& f)
      : fmask(f.word_feature_mask),
        leaf_bit(f.word_leaf_bit),
        default_left_bit(f.word_default_left_bit),
        hot_right_bit(f.word_hot_right_bit),
        dshift(f.word_distant_shift),
        cat_bit(f.cat_word_bit),
        cat_test(f.cat_word_test),
        cat_table_bit(f.cat_word_table),
        cat_splits(f.cat_splits),
        cat_bits(f.cat_bits),
        cat_truncate(f.cat_truncate),
        cat_words(f.cat_words),
        cat_low(f.cat_low) {}
  // Is `x` in the set of categorical split n of a cat_pairs forest? CategoryInSet of a one-word set
  // in the node or a two-word set of the table, written without branches (nvcc still branches
  // around it within a step; the code test's CodeLeftMask does not): the set's 64 bits (the node's
  // word and 0, or the pair) are loaded before x is known, so the step waits on the node, then on x
  // and the set together, as a numeric step waits on the node and x. A category of 32..63 meets
  // the node set's zero high word, which is CategoryInSet's range test for one word. NaN is not in
  // any set (the caller applies the NaN direction).
  GROVE_HD TahoeCatPair PairSet(const TahoeNode8& n) const {
    TahoeCatPair set{n.value, 0u};
    if ((n.word & cat_table_bit) != 0) {
#if defined(__CUDA_ARCH__)
      set = TahoeLoadPair(reinterpret_cast<const TahoeCatPair*>(cat_bits) + (n.value >> 1));
#else
      // The host reads the two words as the uint32_t they are (no access through another type).
      const uint32_t* w = cat_bits + (n.value & ~1u);
      set = TahoeCatPair{w[0], w[1]};
#endif
    }
    return set;
  }
  GROVE_HD bool InPairSet(const TahoeNode8& n, float x) const {
    const TahoeCatPair set = PairSet(n);
    const bool in_range = (x >= cat_low) & (x < 64.0f);
#if defined(__CUDA_ARCH__)
    // The category in the low bits of 2^23 + x rounded toward zero (x in [0, 64): one add instead
    // of a conversion); out-of-range values give bits that in_range discards.
    const uint32_t c = __float_as_uint(__fadd_rz(fmaxf(x, 0.0f), 8388608.0f));
#else
    // Clamped so that the conversion is defined for every x (out-of-range ones are discarded).
    const uint32_t c = static_cast<uint32_t>(fminf(fmaxf(x, 0.0f), 63.0f));
#endif
    const uint32_t word = (c & 32u) != 0 ? set.hi : set.lo;
    return in_range & (((word >> (c & 31u)) & 1u) != 0);
  }
  // InPairSet for a row holding the category code `x` (TahoeCategoryCode): the set's bit c, where
  // codes of 64 and more (no category, NaN) find none. The host's code test; the GPU's is
  // CodeLeftMask (one clamped 64-bit shift where InPairSet takes a range test, a conversion and a
  // word select).
  GROVE_HD bool InCodeSet(const TahoeNode8& n, float x) const {
    const TahoeCatPair set = PairSet(n);
    const uint64_t bits = (static_cast<uint64_t>(set.hi) << 32) | set.lo;
    uint32_t c;
    std::memcpy(&c, &x, sizeof c);
    return c < 64u && ((bits >> c) & 1u) != 0;
  }
  // kNanFree: the row holds no NaN but its padding feature, so the NaN test drops out (a leaf still
  // steps to itself: NaN < threshold is false and a leaf has no hot-right flag). The operators are
  // bitwise so that the step compiles without branches (but for the categorical tests, which nvcc
  // branches around: the code test on the GPU is CodeLeftMask's PTX).
  // kLevel: the node is in the level layout (tahoe_level.h): its children are a pair at
  // distant (right) and distant + 1 (left), and a leaf (distant 0, NaN never left) stays put.
  // kCat: the categorical test (TahoeCatTest) of a forest with categorical splits.
  template <bool kNanFree = false, bool kLevel = false, int kCat = kTahoeCatNone, typename Row>
  GROVE_HD uint32_t Offset(const TahoeNode8& n, const Row& row) const {
#if defined(__CUDA_ARCH__)
    if constexpr (kCat == kTahoeCatCodes) {
      const uint32_t r = CodeLeftMask<kNanFree>(n, row);
      if constexpr (kLevel) return (n.word >> dshift) - r;
      return (r != 0) != ((n.word & hot_right_bit) != 0) ? 1u : (n.word >> dshift);
    }
#endif
    const float x = row[n.word & fmask];
    bool left = x < TahoeBitsToFloat(n.value);
    // The pair test: the split's kind selects between the two tests, and the NaN direction is
    // applied to both, with no branch per node.
    if constexpr (kCat == kTahoeCatPairs) {
      left = (n.word & cat_test) == cat_bit ? InPairSet(n, x) : left;
    }
    if constexpr (kCat == kTahoeCatCodes) {
      // The categorical bit alone selects, as CodeLeftMask's does (see there).
      left = (n.word & cat_bit) != 0 ? InCodeSet(n, x) : left;
    }
    if constexpr (!kNanFree) left = left | (IsNan(x) & ((n.word & default_left_bit) != 0));
    if constexpr (kCat == kTahoeCatGeneral) {
      if ((n.word & cat_test) == cat_bit) {
        left = TahoeCatGoesLeft(n.value, (n.word >> (dshift - tahoe_bits::kNumFlags)), *this, x);
      }
    }
    if constexpr (kLevel) return (n.word >> dshift) + static_cast<uint32_t>(left);
    return left != ((n.word & hot_right_bit) != 0) ? 1u : (n.word >> dshift);
  }
#if defined(__CUDA_ARCH__)
  // The code test's outcome at split n (0xffffffff: goes left) without a branch: PTX shr.b64 gives
  // 0 for shifts of 64 or more, so a code's test is one shift of the set. Written in C++, the
  // select between the code test and the numeric test, and the table set's load, compile into
  // branches around the categorical part, and a warp whose lanes mix categorical and numeric splits
  // (most warps of a forest with many categorical splits) runs both parts at every step. Here both
  // tests run on every lane, the table set's load is predicated, and a select picks the outcome.
  // The two asm variants differ by the NaN test only (kNanFree drops two instructions a step,
  // which an operand of zero inside one asm block could not). NaN codes
  // are in no set; both tests then take the split's NaN direction (kNanFree: none). The select
  // reads the categorical bit alone, without the leaf bit that cat_test adds: a leaf whose flags
  // share that bit (kLeafTable) takes the code test on the padding feature's NaN, in no set, and
  // has no NaN direction, so it stays put either way.
  template <bool kNanFree, typename Row>
  __device__ uint32_t CodeLeftMask(const TahoeNode8& n, const Row& row) const {
    const float x = row[n.word & fmask];
    uint32_t lo = n.value, hi = 0;
    // A table set's words are at n.value (even: an aligned pair).
    asm("{\n\t.reg .pred p;\n\t"
        "setp.ne.u32 p, %2, 0;\n\t"
        "@p ld.global.nc.v2.u32 {%0, %1}, [%3];\n\t}"
        : "+r"(lo), "+r"(hi)
        : "r"(n.word & cat_table_bit),
          "l"(__cvta_generic_to_global(cat_bits + n.value)));
    uint32_t r;
    if constexpr (kNanFree) {
      asm("{\n\t.reg .pred c, k;\n\t.reg .b64 s;\n\t.reg .b32 b;\n\t"
          "set.lt.u32.f32 %0, %1, %2;\n\t"
          "mov.b64 s, {%3, %4};\n\t"
          "shr.b64 s, s, %5;\n\t"
          "cvt.u32.u64 b, s;\n\t"
          "and.b32 b, b, 1;\n\t"
          "setp.ne.u32 c, b, 0;\n\t"
          "setp.ne.u32 k, %6, 0;\n\t"
          "@k selp.b32 %0, -1, 0, c;\n\t}"
          : "=r"(r)
          : "f"(x), "f"(__uint_as_float(n.value)), "r"(lo), "r"(hi), "r"(__float_as_uint(x)),
            "r"(n.word & cat_bit));
    } else {
      asm("{\n\t.reg .pred q, p, c, k;\n\t.reg .b64 s;\n\t.reg .b32 b;\n\t"
          "setp.ne.u32 q, %7, 0;\n\t"
          "setp.nan.and.f32 p, %1, %1, q;\n\t"
          "set.lt.or.u32.f32 %0, %1, %2, p;\n\t"
          "mov.b64 s, {%3, %4};\n\t"
          "shr.b64 s, s, %5;\n\t"
          "cvt.u32.u64 b, s;\n\t"
          "and.b32 b, b, 1;\n\t"
          "setp.ne.or.u32 c, b, 0, p;\n\t"
          "setp.ne.u32 k, %6, 0;\n\t"
          "@k selp.b32 %0, -1, 0, c;\n\t}"
          : "=r"(r)
          : "f"(x), "f"(__uint_as_float(n.value)), "r"(lo), "r"(hi), "r"(__float_as_uint(x)),
            "r"(n.word & cat_bit), "r"(n.word & default_left_bit));
    }
    return r;
  }
#endif
  // The level layout's step, Offset<kNanFree, true> added to idx. On the GPU the comparison goes
  // straight into an integer (-1 or 0) that one three-way add takes (set.lt instead of a predicate
  // and a select: the step is issue-bound on deep forests).
  template <bool kNanFree, int kCat = kTahoeCatNone, typename Row>
  GROVE_HD uint32_t LevelChild(const TahoeNode8& n, const Row& row, uint32_t idx) const {
    if constexpr (kCat != kTahoeCatNone) return idx + Offset<kNanFree, true, kCat>(n, row);
#if defined(__CUDA_ARCH__)
    const float x = row[n.word & fmask];
    const float t = __uint_as_float(n.value);
    uint32_t r;  // 0xffffffff: goes left
    if constexpr (kNanFree) {
      asm("set.lt.u32.f32 %0, %1, %2;" : "=r"(r) : "f"(x), "f"(t));
    } else {
      asm("{\n\t.reg .pred q, p;\n\t"
          "setp.ne.u32 q, %3, 0;\n\t"
          "setp.nan.and.f32 p, %1, %1, q;\n\t"
          "set.lt.or.u32.f32 %0, %1, %2, p;\n\t}"
          : "=r"(r)
          : "f"(x), "f"(t), "r"(n.word & default_left_bit));
    }
    return idx + (n.word >> dshift) - r;
#else
    return idx + Offset<kNanFree, true>(n, row);
#endif
  }
  // One step from node n at idx. kSkipAtLeaf: a lane already at its leaf loads nothing. That pays
  // in the vote and cursor walks of deep, uneven trees, where lanes wait at their leaves for the
  // warp's deepest walk (or their thread's other rows) and their loads would take the L1's time
  // from the lanes still walking (13% on a 255-leaf LightGBM forest); in exact-step walks of
  // shallow trees the test costs more (7%).
  template <bool kNanFree = false, bool kSkipAtLeaf = false, bool kLevel = false,
            int kCat = kTahoeCatNone, typename Row>
  GROVE_HD void Next(const TahoeNode8* nodes, const Row& row, uint32_t& idx, TahoeNode8& n) const {
    if constexpr (kLevel) {
      // Only the load is skipped at a leaf (the step itself leaves idx there): a predicated load
      // instead of a predicated step, whose predicate copies cost more than the step.
      const bool at_leaf = kSkipAtLeaf && (n.word & leaf_bit) != 0;
      idx = LevelChild<kNanFree, kCat>(n, row, idx);
      if (!at_leaf) n = TahoeLoad(nodes + idx);
      return;
    }
    if (kSkipAtLeaf && (n.word & leaf_bit) != 0) return;
    idx += Offset<kNanFree, false, kCat>(n, row);
    n = TahoeLoad(nodes + idx);
  }
};

// `steps` > 0: exactly that many steps (at least the tree's depth: a shallower leaf steps to itself),
// with no test between them; 0: until every lane is at a leaf, tested every kTahoeFixedUnroll steps.
// kNanFree, kLevel, kCat: TahoeFixedStep::Offset's. `f`: the forest (its feature_bits and category
// sets).
template <bool kNanFree = false, bool kLevel = false, int kCat = kTahoeCatNone, typename Row>
GROVE_HD uint32_t TahoeWalkFixed(const TahoeNode8* nodes, uint32_t idx, const Row& row,
                                 const TahoeForestView& f, TahoeNode8& leaf, int steps = 0) {
  const TahoeFixedStep step(f);
  TahoeNode8 n = TahoeLoad(nodes + idx);
#if defined(__CUDA_ARCH__)
#pragma unroll 4
#endif
  for (int s = 0; s < steps; ++s) step.Next<kNanFree, false, kLevel, kCat>(nodes, row, idx, n);
  for (; steps == 0;) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int s = 0; s < (kLevel ? kTahoeLevelUnroll : kTahoeFixedUnroll); ++s) {
      step.Next<kNanFree, true, kLevel, kCat>(nodes, row, idx, n);
    }
    const bool done = (n.word & step.leaf_bit) != 0;
#if defined(__CUDA_ARCH__)
    if (__all_sync(__activemask(), done)) break;
#else
    if (done) break;
#endif
  }
  leaf = n;
  return idx;
}

// TahoeWalkFixed for kRows rows (2 or 4) through the same tree at once: independent chains of node
// and feature loads per thread, so a thread keeps kRows loads in flight (latency-bound walks of wide,
// deep or many-output forests run at full occupancy and still wait on L2). Same routing, same
// leaves.
template <bool kNanFree, int kRows, bool kLevel = false, int kCat = kTahoeCatNone, typename Row>
GROVE_HD void TahoeWalkFixedN(const TahoeNode8* nodes, uint32_t root, const Row (&rows)[kRows],
                              const TahoeForestView& f, TahoeNode8 (&leaves)[kRows],
                              int steps = 0) {
  const TahoeFixedStep step(f);
  uint32_t idx[kRows];
  const TahoeNode8 top = TahoeLoad(nodes + root);
  for (int j = 0; j < kRows; ++j) idx[j] = root, leaves[j] = top;
  for (int s = 0; s < steps; ++s) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < kRows; ++j) {
      step.Next<kNanFree, false, kLevel, kCat>(nodes, rows[j], idx[j], leaves[j]);
    }
  }
  // One step of every row, written out between votes (kTahoeFixedUnroll times; kTahoeLevelUnroll
  // for the level walk): nvcc left a counted loop of `#pragma unroll`, four instructions of
  // overhead per step of the level walk.
  const auto step_all = [&]() {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < kRows; ++j) {
      step.template Next<kNanFree, true, kLevel, kCat>(nodes, rows[j], idx[j], leaves[j]);
    }
  };
  static_assert(kTahoeFixedUnroll == 4 && kTahoeLevelUnroll == 2,
                "the vote walk below takes four steps (two in the level layout) between votes");
  for (; steps == 0;) {
    step_all();
    step_all();
    if constexpr (!kLevel) {  // the level walk votes every two steps (see kTahoeLevelUnroll)
      step_all();
      step_all();
    }
    uint32_t all = step.leaf_bit;
    for (int j = 0; j < kRows; ++j) all &= leaves[j].word;
    const bool done = all != 0;
#if defined(__CUDA_ARCH__)
    if (__all_sync(__activemask(), done)) break;
#else
    if (done) break;
#endif
  }
}

// Value of a leaf of a fixed-walk forest (inline float or leaf-table double; no linear leaves).
GROVE_HD double TahoeFixedLeafValue(const TahoeForestView& f, const TahoeNode8& leaf) {
  static_assert(tahoe_bits::kLeafTable == tahoe_bits::kCategorical, "cat_word_bit is kLeafTable's bit");
  return (leaf.word & f.cat_word_bit) != 0
             ? f.leaf_table[leaf.value]
             : static_cast<double>(TahoeBitsToFloat(leaf.value));
}

// TahoeSumFixedRoots' walk for forests walked by votes: one tree cursor per thread over
// roots[begin, end) (begin < end), the thread's kRows rows stepping together and moving on to the
// next tree when all of them are at a leaf. Adds each leaf to `sums` one tree late through
// `pending`, in tree order (TahoeSumFixedRoots adds the last).
template <bool kNanFree, int kRows, bool kLevel, int kCat, typename Row>
GROVE_HD void TahoeSumCursor(const TahoeForestView& f, const TahoeNode8* nodes,
                             const uint32_t* roots, uint32_t begin, uint32_t end,
                             const Row (&rows)[kRows], double (&sums)[kRows],
                             double (&pending)[kRows]) {
  const TahoeFixedStep step(f);
  uint32_t idx[kRows];
  TahoeNode8 n[kRows];
  uint32_t i = begin;
  uint32_t next = i + 1 < end ? roots[i + 1] : 0;
  {
    const uint32_t root = roots[i];
    const TahoeNode8 top = TahoeLoad(nodes + root);
    for (int j = 0; j < kRows; ++j) idx[j] = root, n[j] = top;
  }
  for (;;) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int s = 0; s < (kLevel ? kTahoeLevelUnroll : kTahoeFixedUnroll); ++s) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int j = 0; j < kRows; ++j) {
        step.template Next<kNanFree, true, kLevel, kCat>(nodes, rows[j], idx[j], n[j]);
      }
    }
    uint32_t all = step.leaf_bit;
    for (int j = 0; j < kRows; ++j) all &= n[j].word;
    if (all == 0) continue;
    for (int j = 0; j < kRows; ++j) {
      sums[j] += pending[j];
      pending[j] = TahoeFixedLeafValue(f, n[j]);
    }
    if (++i == end) return;
    const uint32_t root = next;
    if (i + 1 < end) next = roots[i + 1];
    const TahoeNode8 top = TahoeLoad(nodes + root);
    for (int j = 0; j < kRows; ++j) idx[j] = root, n[j] = top;
  }
}

// Margin sums of one row (kRows = 1) or several (kRows = 2 or 4, TahoeWalkFixedN) over the trees whose root
// nodes are roots[begin, end), for fixed-walk forests with scalar leaves when the call takes every
// round (no round test, no tree record: the hot loop of row chunk). Leaves are added in tree
// order, as TahoeAccumulateTrees does, so the sums are bit-identical to it; a leaf's value is added
// one tree later (a table leaf's load then waits behind the next walk, not in front of it:
// -0.0 + ... and x + -0.0 leave every sum unchanged), and the next root is loaded during the walk.
// kLevel: `roots` index nodes of the level layout (tahoe_level.h). kCat: the categorical test
// (TahoeCatTest).
// Forests walked by votes (f.fixed_steps == 0: trees deeper than TahoeForest::kMaxFixedSteps)
// keep a tree cursor per thread: the thread's rows go on to their next tree as soon as all of them
// are at a leaf (tested every kTahoeFixedUnroll steps, kTahoeLevelUnroll in the level layout)
// instead of waiting for the warp's deepest row, which on deep leaf-wise trees lies well below
// most rows' leaves. The lanes of a warp then drift apart within their range of trees, and a lane
// whose trees are done leaves the loop while the others go on.
template <bool kNanFree, int kRows, bool kLevel = false, int kCat = kTahoeCatNone, typename Row>
GROVE_HD void TahoeSumFixedRoots(const TahoeForestView& f, const TahoeNode8* nodes,
                                 const uint32_t* roots, uint32_t begin, uint32_t end,
                                 const Row (&rows)[kRows], double (&sums)[kRows]) {
  static_assert(kRows == 1 || kRows == 2 || kRows == 4);
  double pending[kRows];
  for (int j = 0; j < kRows; ++j) sums[j] = 0, pending[j] = -0.0;
  if (f.fixed_steps == 0) {
    if (begin < end) {
      TahoeSumCursor<kNanFree, kRows, kLevel, kCat>(f, nodes, roots, begin, end, rows, sums,
                                                    pending);
    }
  } else {
    uint32_t next = begin < end ? roots[begin] : 0;
    for (uint32_t i = begin; i < end; ++i) {
      const uint32_t root = next;
      if (i + 1 < end) next = roots[i + 1];
      TahoeNode8 leaf[kRows];
      if constexpr (kRows == 1) {
        TahoeWalkFixed<kNanFree, kLevel, kCat>(nodes, root, rows[0], f, leaf[0], f.fixed_steps);
      } else {
        TahoeWalkFixedN<kNanFree, kRows, kLevel, kCat>(nodes, root, rows, f, leaf, f.fixed_steps);
      }
      for (int j = 0; j < kRows; ++j) {
        sums[j] += pending[j];
        pending[j] = TahoeFixedLeafValue(f, leaf[j]);
      }
    }
  }
  for (int j = 0; j < kRows; ++j) sums[j] += pending[j];
}

// A row accessor with the NaN padding feature TahoeWalkFixed needs (host evaluation).
template <typename Row>
struct TahoeNanPaddedRow {
  Row row;
  uint32_t num_features;
  GROVE_HD float operator[](uint32_t feature) const {
    return feature < num_features ? row[feature] : TahoeNan();
  }
};

// Weighted value of a scalar leaf (CPU reference arithmetic: weight * value in double).
template <typename Row>
GROVE_HD double TahoeLeafScalar(const TahoeForestView& f, const TahoeDecoded& leaf,
                                const Row& row) {
  if (!(leaf.flags & tahoe_bits::kLeafTable)) return static_cast<double>(TahoeBitsToFloat(leaf.value));
  if (leaf.flags & tahoe_bits::kLeafLinear) {
    const TahoeLinearLeaf& l = f.linear_leaves[leaf.value];
    double v = l.constant;
    for (uint32_t i = l.begin; i < l.begin + l.count; ++i) {
      const float x = row[f.linear_features[i]];
      if (IsNan(x)) return l.weight * l.plain;
      v += f.linear_coeffs[i] * static_cast<double>(x);
    }
    return l.weight * v;
  }
  return f.leaf_table[leaf.value];
}

// Per-call parameters of the per-row logic.
struct TahoeRowParams {
  int32_t it_begin = 0;
  int32_t it_end = 0;
  int32_t leaf_col_base = 0;  // leaf output: column = TahoeTree::orig - leaf_col_base
};

// One output: the margin sum stays in a register.
struct TahoeScalarAcc {
  double sum = 0;
  GROVE_HD void Add(int32_t /*group*/, double v) { sum += v; }
  GROVE_HD void AddVector(const double* /*v*/, int /*n*/) {}
  GROVE_HD void Flush() {}
};

// Several outputs: a running sum for the current group, flushed into m[group] (num_outputs doubles
// owned by the calling thread) when the group changes; trees are stored group by group so a thread
// flushes about once per group.
struct TahoeGroupAcc {
  double* m;
  int32_t cur = -1;
  double sum = 0;
  GROVE_HD explicit TahoeGroupAcc(double* margins) : m(margins) {}
  GROVE_HD void Add(int32_t group, double v) {
    if (group != cur) {
      Flush();
      cur = group;
    }
    sum += v;
  }
  GROVE_HD void AddVector(const double* v, int n) {
    for (int k = 0; k < n; ++k) m[k] += v[k];
  }
  GROVE_HD void Flush() {
    if (cur >= 0) m[cur] += sum;
    cur = -1;
    sum = 0;
  }
};

// Walks trees order[i] (or i when order is null) for i in [begin, end) with stride `step`, for one
// row. `nodes` holds the forest's nodes from node index `node_offset` on (a shared-memory part, or
// the whole array with offset 0). Margins go to `acc`; with `leaf_out` the leaf ids go there
// instead.
// kWalk: a TahoeWalk the forest allows (the fixed ones: TahoeNode8 nodes, `row` padded).
template <int kWalk = kTahoeWalkGeneric, typename Node, typename Row, typename Acc>
GROVE_HD void TahoeAccumulateTrees(const TahoeForestView& f, const Node* nodes,
                                   uint32_t node_offset, const TahoeTree* trees,
                                   const uint32_t* order, uint32_t begin, uint32_t end,
                                   const TahoeRowParams& p, const Row& row, Acc& acc,
                                   float* leaf_out) {
  for (uint32_t i = begin; i < end; ++i) {
    const TahoeTree t = trees[order != nullptr ? order[i] : i];
    if (t.iteration < p.it_begin || t.iteration >= p.it_end) continue;
    TahoeDecoded d;
    uint32_t leaf;
    if constexpr (TahoeWalkIsFixed(kWalk) && std::is_same_v<Node, TahoeNode8>) {
      TahoeNode8 n;
      leaf = TahoeWalkFixed<false, false, TahoeWalkCat(kWalk)>(nodes, t.root - node_offset, row, f,
                                                              n, f.fixed_steps);
      d = TahoeDecode(n, f.feature_bits);
    } else if constexpr (kWalk == kTahoeWalkSimple || kWalk == kTahoeWalkFixed) {
      leaf = TahoeTraverseSimple(nodes, t.root - node_offset, row, f, d);
    } else {
      leaf = TahoeTraverse(nodes, t.root - node_offset, row, f, d);
    }
    if (leaf_out != nullptr) {
      leaf_out[t.orig - p.leaf_col_base] = static_cast<float>(f.leaf_ids[leaf + node_offset]);
      continue;
    }
    if (t.group >= 0) {
      acc.Add(t.group, TahoeLeafScalar(f, d, row));
    } else {
      acc.AddVector(f.leaf_table + d.value, f.num_outputs);
    }
  }
  acc.Flush();
}

// Margin sums of kRows rows over trees order[i] (or i) for i in [begin, end) in the round range,
// every tree's leaf scalar (no vector leaves), with TahoeWalkFixedN; the one-output sums of
// TahoeAccumulateTrees (added to sums[]). kCat: the categorical test (TahoeCatTest).
template <int kRows, int kCat = kTahoeCatNone, typename Row>
GROVE_HD void TahoeAccumulateFixedN(const TahoeForestView& f, const TahoeNode8* nodes,
                                    const TahoeTree* trees, const uint32_t* order, uint32_t begin,
                                    uint32_t end, const TahoeRowParams& p, const Row (&rows)[kRows],
                                    double (&sums)[kRows]) {
  for (uint32_t i = begin; i < end; ++i) {
    const TahoeTree t = trees[order != nullptr ? order[i] : i];
    if (t.iteration < p.it_begin || t.iteration >= p.it_end) continue;
    TahoeNode8 leaves[kRows];
    TahoeWalkFixedN<false, kRows, false, kCat>(nodes, t.root, rows, f, leaves, f.fixed_steps);
    for (int j = 0; j < kRows; ++j) {
      sums[j] += TahoeLeafScalar(f, TahoeDecode(leaves[j], f.feature_bits), rows[j]);
    }
  }
}

// Writes one row's output from its margin sum (base margin not included).
GROVE_HD void TahoeFinalizeScalar(const TahoeForestView& f, const TransformParams& tp,
                                  bool prediction, double sum, float* out_row) {
  const double m = f.base_margin[0] + sum;
  if (!prediction) {
    out_row[0] = static_cast<float>(m);
  } else if (tp.link == Link::kArgmax) {
    out_row[0] = 0.0f;  // TransformRow's argmax of a single output
  } else {
    // TransformRow for one output (softmax needs two or more, which BuildForest enforces).
    const double v = tp.average_divisor != 1.0 ? m / tp.average_divisor : m;
    out_row[0] = static_cast<float>(TransformScalar(tp, v));
  }
}

// `m`: num_outputs margin sums (base margin not included), overwritten with the margins.
GROVE_HD void TahoeFinalizeRow(const TahoeForestView& f, const TransformParams& tp,
                               bool prediction, double* m, float* out_row) {
  for (int k = 0; k < f.num_outputs; ++k) m[k] += f.base_margin[k];
  if (!prediction) {
    for (int k = 0; k < f.num_outputs; ++k) out_row[k] = static_cast<float>(m[k]);
  } else {
    TransformRow(tp, m, out_row);
  }
}

// Row accessors.
struct TahoePlainRow {
  const float* p;
  GROVE_HD float operator[](uint32_t feature) const { return p[feature]; }
};
struct TahoeStridedRow {  // feature-major tile: feature f of this row at p[f * stride]
  const float* p;
  uint32_t stride;
  GROVE_HD float operator[](uint32_t feature) const { return p[feature * stride]; }
};
// The same with the stride in bytes: one multiply-add per feature address (a float stride costs
// the walk a second one, the scaling by 4, on its hot path).
struct TahoeByteStridedRow {
  const float* p;
  uint32_t stride_bytes;
  GROVE_HD float operator[](uint32_t feature) const {
    return *reinterpret_cast<const float*>(reinterpret_cast<const char*>(p) +
                                           feature * stride_bytes);
  }
};

}  // namespace grove
