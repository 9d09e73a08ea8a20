// Tahoe format, part 1: the packed nodes, tree records and the by-value forest view the GPU kernels
// and the host evaluator read (tahoe_forest.h describes the format as a whole), with the per-node
// decode and routing shared by every walk.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/common/hd.h"
#include "core/model/decision.h"

namespace grove {

// Five flag bits of a packed node. kDefaultLeft and kMissingZero coincide with decision_bits so a
// numeric node's flags go to NumericGoesLeft unchanged (bit 3, kHotRight, is ignored there).
namespace tahoe_bits {
inline constexpr uint32_t kLeaf = 1u << 0;
inline constexpr uint32_t kDefaultLeft = 1u << 1;  // NaN direction (LightGBM NaN-as-zero resolved)
inline constexpr uint32_t kCategorical = 1u << 2;  // split: categorical (TahoeCatGoesLeft)
inline constexpr uint32_t kHotRight = 1u << 3;     // split: the adjacent child is the right child
inline constexpr uint32_t kMissingZero = 1u << 4;
inline constexpr int kNumFlags = 5;
// Categorical splits reuse the numeric-only bit: set, the set is in the forest's table (the value
// is its first word in cat_bits when TahoeForestView::cat_words > 0, else its TahoeCatSplit);
// clear, the value is the set itself (categories 0..31: no load).
inline constexpr uint32_t kCatTable = kMissingZero;
// Leaves reuse the split-only bits.
inline constexpr uint32_t kLeafTable = kCategorical;  // value indexes leaf_table (else: float bits)
inline constexpr uint32_t kLeafLinear = kHotRight;    // value indexes linear_leaves
static_assert(kDefaultLeft == decision_bits::kDefaultLeft);
static_assert(kMissingZero == decision_bits::kMissingZero);
}  // namespace tahoe_bits

// 8-byte node: `word` = feature | flags << feature_bits | distant << (feature_bits + 5), where
// feature_bits is the fewest bits that index features 0..num_features (TahoeForestView::
// feature_bits): a leaf's feature is the padding feature num_features (see TahoeWalkFixed).
struct alignas(8) TahoeNode8 {
  uint32_t value;  // split: float threshold bits or cat_splits index; leaf: see tahoe_bits
  uint32_t word;
};
static_assert(sizeof(TahoeNode8) == 8, "TahoeNode8 must stay 8 bytes");

// 16-byte node for models whose trees or feature counts do not fit the packed word.
struct alignas(16) TahoeNode16 {
  uint32_t value;
  uint32_t feature;
  uint32_t flags;
  uint32_t distant;  // offset from this node to its distant child (0 for a leaf)
};
static_assert(sizeof(TahoeNode16) == 16, "TahoeNode16 must stay 16 bytes");

struct TahoeTree {
  uint32_t root;       // index of the root in the node array
  uint32_t orig;       // index of the tree in the model (leaf-output column)
  int32_t group;       // output group of a scalar-leaf tree; -1 for vector leaves (num_outputs values)
  int32_t iteration;   // boosting round
};
static_assert(sizeof(TahoeTree) == 16, "TahoeTree must stay 16 bytes");

struct TahoeCatSplit {
  uint32_t offset;     // first word in cat_bits
  uint32_t num_words;
  uint32_t flags;      // decision_bits for CategoricalGoesLeft
  uint32_t pad = 0;
};

// Categorical splits in the Tahoe format are normalised so that listed categories go left (the
// builder swaps the children of an XGBoost split and flips its NaN direction: the same routing), so
// a split held in the node needs no in-set bit, only the NaN direction (kDefaultLeft) and the
// forest's truncation rule (TahoeForestView::cat_truncate).

struct TahoeLinearLeaf {
  double constant;
  double plain;        // the leaf's plain value (used when a feature is NaN)
  double weight;       // tree weight
  uint32_t begin;      // terms in linear_features / linear_coeffs
  uint32_t count;
};

// A decoded node.
struct TahoeDecoded {
  uint32_t value;
  uint32_t feature;
  uint32_t flags;
  uint32_t distant;
};

// Raw pointers to a TahoeForest's arrays, host or device; passed by value into kernels.
struct TahoeForestView {
  const void* nodes = nullptr;  // TahoeNode8 or TahoeNode16 (node_bytes)
  const TahoeTree* trees = nullptr;  // in the Tahoe order
  const TahoeCatSplit* cat_splits = nullptr;
  const uint32_t* cat_bits = nullptr;
  // Bit f of word f / 32: feature f is split by categorical splits only (TahoeIsCatFeature).
  // Empty when the forest is not cat_pairs (TahoeForest::cat_features).
  const uint32_t* cat_features = nullptr;
  const double* leaf_table = nullptr;
  const TahoeLinearLeaf* linear_leaves = nullptr;
  const int32_t* linear_features = nullptr;
  const double* linear_coeffs = nullptr;
  const int32_t* leaf_ids = nullptr;   // per node: the library's leaf id (-1 for splits)
  const double* base_margin = nullptr; // num_outputs
  int32_t num_trees = 0;
  int32_t num_nodes = 0;
  int32_t num_features = 0;
  int32_t num_outputs = 1;
  uint32_t feature_bits = 1;           // TahoeNode8 only
  // The category rule of the forest's in-node category sets (kCategoryTruncate: LightGBM's).
  bool cat_truncate = false;
  // > 0: every table set is this many words at its offset in cat_bits (zero-padded: categories
  // past a set's own words are not in it, as before), under cat_truncate's rule, so a split reads
  // one word of it; 0: table sets are read through cat_splits.
  uint32_t cat_words = 0;
  // The least value of a category under cat_truncate's rule (the fixed walk's pair test): x > -1
  // (LightGBM: (-1, 0) is category 0) is x >= the float after -1; else x >= 0.
  float cat_low = 0.0f;
  // The packed word's categorical flags for feature_bits (kCategorical, kCategorical | kLeaf,
  // kCatTable shifted past the feature): in the view, kernels read them as operands of their
  // parameters instead of holding them in registers.
  uint32_t cat_word_bit = 0, cat_word_test = 0, cat_word_table = 0;
  // The packed word's fields for feature_bits (TahoeNode8): the feature mask, the kLeaf,
  // kDefaultLeft and kHotRight bits shifted past the feature, and the distant offset's shift. Set
  // with feature_bits (TahoeForest::HostView) for the same reason as the categorical flags: every
  // fixed walk reads them from its parameters, which frees the registers that held them (defaults:
  // feature_bits 1).
  uint32_t word_feature_mask = 1u, word_leaf_bit = tahoe_bits::kLeaf << 1,
           word_default_left_bit = tahoe_bits::kDefaultLeft << 1,
           word_hot_right_bit = tahoe_bits::kHotRight << 1,
           word_distant_shift = 1 + tahoe_bits::kNumFlags;
  // > 0: fixed walks take exactly this many steps (the forest's deepest leaf, TahoeForest::
  // fixed_steps) instead of testing for leaves every kTahoeFixedUnroll steps.
  int32_t fixed_steps = 0;
};

GROVE_HD float TahoeBitsToFloat(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// The value of the padding feature (TahoeWalkFixed, TahoeLaneLayout).
GROVE_HD float TahoeNan() { return TahoeBitsToFloat(0x7fc00000u); }

// One wide load per node (a plain struct copy may become two 32-bit loads). `Pair`: an 8-byte node
// of two 32-bit words.
template <typename Pair>
GROVE_HD Pair TahoeLoadPair(const Pair* p) {
  static_assert(sizeof(Pair) == 8 && alignof(Pair) == 8);
#if defined(__CUDA_ARCH__)
  const uint2 v = *reinterpret_cast<const uint2*>(p);
  return Pair{v.x, v.y};
#else
  return *p;
#endif
}
GROVE_HD TahoeNode8 TahoeLoad(const TahoeNode8* p) { return TahoeLoadPair(p); }
GROVE_HD TahoeNode16 TahoeLoad(const TahoeNode16* p) {
#if defined(__CUDA_ARCH__)
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  return TahoeNode16{v.x, v.y, v.z, v.w};
#else
  return *p;
#endif
}

GROVE_HD TahoeDecoded TahoeDecode(const TahoeNode8& n, uint32_t feature_bits) {
  TahoeDecoded d;
  d.value = n.value;
  d.feature = n.word & ((1u << feature_bits) - 1u);
  d.flags = (n.word >> feature_bits) & ((1u << tahoe_bits::kNumFlags) - 1u);
  d.distant = n.word >> (feature_bits + tahoe_bits::kNumFlags);
  return d;
}

GROVE_HD TahoeDecoded TahoeDecode(const TahoeNode16& n, uint32_t /*feature_bits*/) {
  return TahoeDecoded{n.value, n.feature, n.flags, n.distant};
}

// A category set of one word, held in a node (categories 0..31): word w of the set for w = 0, the
// only word CategoryInSet reads for a one-word set.
struct TahoeInlineCats {
  uint32_t word;
  GROVE_HD uint32_t operator[](uint32_t /*w*/) const { return word; }
};

// A two-word set of the padded table read with one 8-byte load (TahoeForest::cat_pairs()).
struct alignas(8) TahoeCatPair {
  uint32_t lo, hi;  // categories 0..31, 32..63
};

// Does a row with value `x` go from categorical split (`value`, `flags`: tahoe_bits) to its left
// child? CategoricalGoesLeft of core/model/decision.h (the rule of the CPU reference) on the split's
// set, in the node or in the forest's table. `Cats`: the forest's cat_splits, cat_bits,
// cat_truncate and cat_words (a TahoeForestView, or the fixed walk's copy of them); bits of `flags`
// above the five flags are ignored.
template <typename Cats>
GROVE_HD bool TahoeCatGoesLeft(uint32_t value, uint32_t flags, const Cats& f, float x) {
  const uint16_t rule = static_cast<uint16_t>(
      decision_bits::kCategorical | decision_bits::kCategoryInSetGoesLeft |
      (flags & tahoe_bits::kDefaultLeft) | (f.cat_truncate ? decision_bits::kCategoryTruncate : 0u));
  if (!(flags & tahoe_bits::kCatTable)) return CategoricalGoesLeft(rule, TahoeInlineCats{value}, 1u, x);
  if (f.cat_words > 0) return CategoricalGoesLeft(rule, f.cat_bits + value, f.cat_words, x);
  const TahoeCatSplit& c = f.cat_splits[value];
  return CategoricalGoesLeft(static_cast<uint16_t>(c.flags), f.cat_bits + c.offset, c.num_words, x);
}

// Does `row` go from split `d` to its adjacent child (node + 1)? Same rules as the CPU reference.
GROVE_HD bool TahoeGoesAdjacent(const TahoeDecoded& d, const TahoeForestView& f, float x) {
  const bool left = (d.flags & tahoe_bits::kCategorical)
                        ? TahoeCatGoesLeft(d.value, d.flags, f, x)
                        : NumericGoesLeft(static_cast<uint16_t>(d.flags), TahoeBitsToFloat(d.value), x);
  return left != ((d.flags & tahoe_bits::kHotRight) != 0);
}

}  // namespace grove
