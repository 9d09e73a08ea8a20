// The hash CatBoost gives a categorical feature's value: CityHash64 (Google's CityHash, the v1.0.x
// function CatBoost vendors) of the value's text, truncated to its low 32 bits. A CatBoost JSON
// model's one-hot splits and `features_info.categorical_features[].values` hold these hashes (as
// signed int32), so Grove hashes a category name to find the code its one-hot splits test
// (core/model/category_codes.h). Integer categories are hashed as their decimal text ("3").
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "absl/strings/string_view.h"

namespace grove {

// CityHash64 of `bytes`, v1.0.x (v1.1 and later give other values for every length).
uint64_t CityHash64V1(absl::string_view bytes);

// CatBoost's hash of a category's text: the low 32 bits of CityHash64V1. The JSON writes it as a
// signed int32: static_cast<uint32_t> of that int is this value.
inline uint32_t CatboostCategoryHash(absl::string_view name) {
  return static_cast<uint32_t>(CityHash64V1(name));
}

}  // namespace grove
