// The split decision, written once for the CPU engines and the GPU kernels.
//
// Contract: given a node of a Forest (core/model/forest.h) and the row's value of the node's feature,
// GoesLeft says which child the library (XGBoost or LightGBM) would take. See forest.h for the
// normalised rules.
#pragma once

#include <cstdint>

#include "core/common/hd.h"

namespace grove {

// Bits of Node::flags needed by the decision; duplicated as plain constants so that kernels can
// include this header without <vector>/<string> (forest.h static_asserts they agree).
namespace decision_bits {
inline constexpr uint16_t kDefaultLeft = 1u << 1;
inline constexpr uint16_t kCategorical = 1u << 2;
inline constexpr uint16_t kCategoryInSetGoesLeft = 1u << 3;
inline constexpr uint16_t kMissingZero = 1u << 4;
inline constexpr uint16_t kNanAsZero = 1u << 5;
inline constexpr uint16_t kCategoryTruncate = 1u << 6;
}  // namespace decision_bits

GROVE_HD bool IsNan(float x) { return x != x; }

// Is `x` in the category bitset `bits` of `num_words` 32-bit words? Invalid categories
// (negative, or beyond the bitset) are not in it. `truncate` selects LightGBM's (int)x rule, under
// which (-1, 0) is category 0; XGBoost treats every negative value as invalid. `Words` is anything
// whose [w] is word w: a pointer into a bitset pool, or a one-word set held in a register (the GPU's
// fixed walk keeps sets of categories 0..31 in the node itself).
template <typename Words>
GROVE_HD bool CategoryInSet(const Words& bits, uint32_t num_words, float x, bool truncate) {
  if (truncate ? !(x > -1.0f) : !(x >= 0.0f)) return false;
  const float limit = static_cast<float>(num_words) * 32.0f;
  if (!(x < limit)) return false;
  const uint32_t c = static_cast<uint32_t>(x < 0.0f ? 0.0f : x);
  return (bits[c >> 5] >> (c & 31u)) & 1u;
}

// Numeric split: missing-value handling, then `x < threshold`.
GROVE_HD bool NumericGoesLeft(uint16_t flags, float threshold, float x) {
  if (IsNan(x)) {
    if (!(flags & decision_bits::kNanAsZero)) return flags & decision_bits::kDefaultLeft;
    x = 0.0f;
  }
  if ((flags & decision_bits::kMissingZero) && x >= -1e-35f && x <= 1e-35f) {
    return flags & decision_bits::kDefaultLeft;
  }
  return x < threshold;
}

// Categorical split: NaN takes the default direction; an in-set category goes to the in-set side.
template <typename Words>
GROVE_HD bool CategoricalGoesLeft(uint16_t flags, const Words& bits, uint32_t num_words, float x) {
  if (IsNan(x)) return flags & decision_bits::kDefaultLeft;
  const bool in_set =
      CategoryInSet(bits, num_words, x, flags & decision_bits::kCategoryTruncate);
  const bool in_set_left = flags & decision_bits::kCategoryInSetGoesLeft;
  return in_set == in_set_left;
}

// The whole decision for one node. `category_bits` is the forest's bitset pool.
GROVE_HD bool GoesLeft(uint16_t flags, float threshold, uint32_t payload, uint32_t aux,
                       const uint32_t* category_bits, float x) {
  if (flags & decision_bits::kCategorical) {
    return CategoricalGoesLeft(flags, category_bits + payload, aux, x);
  }
  return NumericGoesLeft(flags, threshold, x);
}

}  // namespace grove
