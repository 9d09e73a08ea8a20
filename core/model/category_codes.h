// Category names to category codes: what every interface that takes a categorical feature's values
// as text (KServe BYTES tensors, grove.v1 string columns, CSV cells) calls, so that each maps a name
// to the code the model's splits test exactly as the model's library maps it (XGBoost and LightGBM
// recode a DataFrame's categorical column by the categories recorded at training,
// Forest::categories).
//
// Rules:
//  * a name is its position in the feature's recorded categories (category i is code i);
//  * the empty string is a missing value (NaN), as an empty CSV field is;
//  * for a feature whose categories are numbers (pandas categories of ints or floats), the text is
//    parsed as a number (std::from_chars, the whole text) and looked up by value: "10" and "10.0"
//    both name the category 10;
//  * an unknown name (not recorded; for number categories also text that is not a number) follows
//    the library: XGBoost (3.1+, the versions that record categories) refuses it ("Found a category
//    not in the training set"), so it is INVALID_ARGUMENT naming the feature and the value;
//    LightGBM makes it missing (pandas.Categorical(set_categories) gives it code -1, i.e. NaN), so it
//    is NaN, routed by the missing-value direction;
//  * a name longer than kMaxCategoryNameBytes is INVALID_ARGUMENT (untrusted input is bounded; no
//    recorded category is near this long).
//  * hashed categories (CatBoost one-hot and CTR features, FeatureCategories::hashes): every name
//    is a category, the empty one and digits included ("3" is what CatBoost makes of the integer
//    3); its code is the position of its hash (CatboostCategoryHash) in the recorded hashes, and a
//    name whose hash is not recorded (unseen in training, or seen but never split on) gets the code
//    hashes.size(): it takes every one-hot split's "not equal" side and each CTR split's side of
//    the CTR's prior-only value, as in CatBoost. No name is missing and none is unknown (CatBoost itself refuses a missing value in a
//    categorical column, and a name is never missing here).
//
// Thread safety: a CategoryCodes is immutable after construction; Code and CodeColumn may be called
// from any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/model/forest.h"

namespace grove {

inline constexpr size_t kMaxCategoryNameBytes = size_t{1} << 16;

// What a value that names no recorded category becomes.
enum class UnknownCategory : uint8_t {
  kMissing,  // NaN (LightGBM)
  kError,    // INVALID_ARGUMENT (XGBoost)
};
// The rule of the library that wrote models of `format` (CatBoost: kMissing, which none of its
// recorded categories uses: they are hashed, and hashed categories have no unknown name).
UnknownCategory UnknownCategoryOf(ModelFormat format);
const char* UnknownCategoryName(UnknownCategory rule);  // "missing" / "error"

// The name-to-code map of one categorical feature. Building it costs one hash insertion per
// recorded category; callers build one per feature and request (or once per stream).
class CategoryCodes {
 public:
  // `categories` (non-empty) must outlive this object; `feature` names the feature in errors.
  CategoryCodes(const FeatureCategories& categories, UnknownCategory unknown, std::string feature);
  CategoryCodes(CategoryCodes&&) = default;
  CategoryCodes& operator=(CategoryCodes&&) = default;

  // The code of `name` as a float (exact: codes are below kMaxCategoriesPerFeature < 2^24), NaN for
  // a missing or (kMissing) unknown one; INVALID_ARGUMENT as the top of this file says.
  absl::StatusOr<float> Code(absl::string_view name) const;
  // The code of `name` when it is a recorded category (number categories: by value; hashed
  // categories: every name up to kMaxCategoryNameBytes, as above); -1 otherwise (unknown, empty or
  // too long). Never an error: for callers with a rule of their own.
  int64_t Find(absl::string_view name) const;
  // Codes of `names` into out[i * stride]; the first error names the value's position (`row` i).
  absl::Status CodeColumn(absl::Span<const absl::string_view> names, float* out,
                          int64_t stride) const;

  const std::string& feature() const { return feature_; }
  UnknownCategory unknown() const { return unknown_; }
  size_t size() const { return size_; }

 private:
  absl::Status Unknown(absl::string_view name) const;

  enum class Kind : uint8_t { kStrings, kNumbers, kHashes };

  absl::flat_hash_map<absl::string_view, int64_t> strings_;  // views into the forest's strings
  absl::flat_hash_map<double, int64_t> numbers_;
  absl::flat_hash_map<uint32_t, int64_t> hashes_;
  Kind kind_ = Kind::kStrings;
  size_t size_ = 0;
  UnknownCategory unknown_ = UnknownCategory::kMissing;
  std::string feature_;
};

// The coder of feature `feature` of `forest`: its recorded categories, the library's rule and the
// feature's name (FeatureNamesOrDefault's). FAILED_PRECONDITION naming the feature when the model
// records no categories for it (category codes must then be given as numbers); INVALID_ARGUMENT for
// a feature index out of range. `forest` must outlive the result.
absl::StatusOr<CategoryCodes> CategoryCodesFor(const Forest& forest, int feature);

// CategoryCodesFor's errors, without building the coder: OK when `forest` records category names
// for `feature`.
absl::Status CheckCategoryNames(const Forest& forest, int64_t feature);

}  // namespace grove
