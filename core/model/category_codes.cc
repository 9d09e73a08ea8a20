#include "core/model/category_codes.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/model/catboost_hash.h"
#include "core/model/input_schema.h"

namespace grove {
namespace {

constexpr float kMissing = std::numeric_limits<float>::quiet_NaN();

// The whole of `text` as a number; false when it is not one.
bool ParseNumber(absl::string_view text, double* value) {
  if (text.empty()) return false;
  const char* b = text.data();
  const char* e = b + text.size();
  if (*b == '+') ++b;  // from_chars takes no '+'; pandas never writes one, people may
  auto [ptr, ec] = std::from_chars(b, e, *value, std::chars_format::general);
  return ec == std::errc() && ptr == e && !std::isnan(*value);
}

// At most this much of a value is quoted in an error.
std::string Quoted(absl::string_view text) {
  constexpr size_t kMax = 60;
  return text.size() <= kMax ? absl::StrCat("'", text, "'")
                             : absl::StrCat("'", text.substr(0, kMax), "...'");
}

}  // namespace

UnknownCategory UnknownCategoryOf(ModelFormat format) {
  switch (format) {
    case ModelFormat::kXgboostJson:
    case ModelFormat::kXgboostUbjson:
      return UnknownCategory::kError;
    case ModelFormat::kLightgbmText:
    case ModelFormat::kCatboostJson:
    case ModelFormat::kTreeliteCheckpoint:
      break;
  }
  return UnknownCategory::kMissing;
}

const char* UnknownCategoryName(UnknownCategory rule) {
  return rule == UnknownCategory::kError ? "error" : "missing";
}

CategoryCodes::CategoryCodes(const FeatureCategories& categories, UnknownCategory unknown,
                             std::string feature)
    : kind_(categories.hashed()             ? Kind::kHashes
            : categories.strings.empty() ? Kind::kNumbers
                                         : Kind::kStrings),
      size_(categories.size()),
      unknown_(unknown),
      feature_(std::move(feature)) {
  // try_emplace keeps the first of equal entries: the loaders refuse none, and the libraries
  // themselves map a name to its first position.
  if (kind_ == Kind::kHashes) {
    hashes_.reserve(categories.hashes.size());
    for (size_t i = 0; i < categories.hashes.size(); ++i) {
      hashes_.try_emplace(categories.hashes[i], static_cast<int64_t>(i));
    }
  } else if (kind_ == Kind::kNumbers) {
    numbers_.reserve(categories.numbers.size());
    for (size_t i = 0; i < categories.numbers.size(); ++i) {
      numbers_.try_emplace(categories.numbers[i], static_cast<int64_t>(i));
    }
  } else {
    strings_.reserve(categories.strings.size());
    for (size_t i = 0; i < categories.strings.size(); ++i) {
      strings_.try_emplace(categories.strings[i], static_cast<int64_t>(i));
    }
  }
}

int64_t CategoryCodes::Find(absl::string_view name) const {
  if (name.size() > kMaxCategoryNameBytes) return -1;
  if (kind_ == Kind::kHashes) {
    auto it = hashes_.find(CatboostCategoryHash(name));
    return it == hashes_.end() ? static_cast<int64_t>(size_) : it->second;
  }
  if (name.empty()) return -1;
  if (kind_ == Kind::kNumbers) {
    double v;
    if (!ParseNumber(name, &v)) return -1;
    if (v == 0) v = 0;  // -0 names the category 0
    auto it = numbers_.find(v);
    return it == numbers_.end() ? -1 : it->second;
  }
  auto it = strings_.find(name);
  return it == strings_.end() ? -1 : it->second;
}

absl::Status CategoryCodes::Unknown(absl::string_view name) const {
  if (name.size() > kMaxCategoryNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feature '", feature_, "': a category name of ", name.size(), " bytes is longer than the ",
        kMaxCategoryNameBytes, " bytes a name may have"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "feature '", feature_, "': ", Quoted(name), " is not one of the ", size_,
      " categories the model was trained with (XGBoost refuses a category not in the training "
      "set; the model's metadata lists its categories)"));
}

absl::StatusOr<float> CategoryCodes::Code(absl::string_view name) const {
  if (name.empty() && kind_ != Kind::kHashes) return kMissing;
  const int64_t code = Find(name);
  if (code >= 0) return static_cast<float>(code);
  if (unknown_ == UnknownCategory::kError || name.size() > kMaxCategoryNameBytes) {
    return Unknown(name);
  }
  return kMissing;
}

absl::Status CategoryCodes::CodeColumn(absl::Span<const absl::string_view> names, float* out,
                                       int64_t stride) const {
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StatusOr<float> code = Code(names[i]);
    if (!code.ok()) {
      return absl::Status(code.status().code(),
                          absl::StrCat("row ", i, ": ", code.status().message()));
    }
    out[static_cast<int64_t>(i) * stride] = *code;
  }
  return absl::OkStatus();
}

absl::Status CheckCategoryNames(const Forest& forest, int64_t feature) {
  if (feature < 0 || feature >= forest.num_features) {
    return absl::InvalidArgumentError(absl::StrCat("feature ", feature, " is not one of the model's ",
                                                   forest.num_features, " features"));
  }
  const size_t f = static_cast<size_t>(feature);
  if (f >= forest.categories.size() || forest.categories[f].empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "feature '", FeatureNameOf(forest.feature_names, forest.num_features, feature),
        "' has no category names in the model file (",
        forest.categories.empty() ? "the model records none: it was not trained on a DataFrame "
                                    "with categorical columns"
                                  : "it is not a recorded categorical feature",
        "); give its values as numbers (category codes for a categorical feature)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CategoryCodes> CategoryCodesFor(const Forest& forest, int feature) {
  if (absl::Status s = CheckCategoryNames(forest, feature); !s.ok()) return s;
  return CategoryCodes(forest.categories[static_cast<size_t>(feature)],
                       UnknownCategoryOf(forest.format),
                       FeatureNameOf(forest.feature_names, forest.num_features, feature));
}

}  // namespace grove
