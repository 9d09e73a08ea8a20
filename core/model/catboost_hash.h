// The hash CatBoost gives a categorical feature's value: CityHash64 (Google's CityHash, the v1.0.x
// function CatBoost vendors) of the value's text, truncated to its low 32 bits. A CatBoost JSON
// model's one-hot splits and `features_info.categorical_features[].values` hold these hashes (as
// signed int32), so Grove hashes a category name to find the code its one-hot splits test
// (core/model/category_codes.h). Integer categories are hashed as their decimal text ("3").
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace grove {

// CityHash64 of `bytes`, v1.0.x (v1.1 and later give other values for every length).
uint64_t CityHash64V1(absl::string_view bytes);

// CatBoost's hash of a category's text: the low 32 bits of CityHash64V1. The JSON writes it as a
// signed int32: static_cast<uint32_t> of that int is this value.
inline uint32_t CatboostCategoryHash(absl::string_view name) {
  return static_cast<uint32_t>(CityHash64V1(name));
}

// The key under which a CTR over one categorical feature files a category in its table (the keys
// of ctr_data's hash_map): the category's hash, sign-extended to 64 bits, times the square of the
// odd multiplier kCatboostCtrKeyMultiplier, modulo 2^64 (checked against every key of the models
// scripts/make_golden_corpus.py trains).
inline constexpr uint64_t kCatboostCtrKeyMultiplier = 0x4906ba494954cb65ULL;
uint64_t CatboostCtrKey(uint32_t category_hash);
// The inverse: the category hash whose key is `key` (the multiplier is odd, so the map is a
// bijection of 64-bit words), or nullopt when the word it gives is no sign-extended 32-bit hash, so
// that no category has the key (CatBoost's tables hold such a key for an empty slot: 2^64 - 1).
std::optional<uint32_t> CatboostCategoryOfCtrKey(uint64_t key);

}  // namespace grove
