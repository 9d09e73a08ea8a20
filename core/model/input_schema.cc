#include "core/model/input_schema.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace grove {

std::string FeatureNameOf(const std::vector<std::string>& names, int64_t num_features,
                          int64_t f) {
  if (static_cast<int64_t>(names.size()) == num_features && f >= 0 && f < num_features) {
    return names[static_cast<size_t>(f)];
  }
  return absl::StrCat("f", f);
}

std::vector<std::string> FeatureNamesOrDefault(const std::vector<std::string>& names,
                                               int64_t num_features) {
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(num_features, 0)));
  for (int64_t f = 0; f < num_features; ++f) out.push_back(FeatureNameOf(names, num_features, f));
  return out;
}

InputSchema::InputSchema(const Forest& forest)
    : forest_(forest), names_(FeatureNamesOrDefault(forest.feature_names, forest.num_features)) {
  index_.reserve(names_.size());
  for (size_t f = 0; f < names_.size(); ++f) index_.try_emplace(names_[f], static_cast<int64_t>(f));
  coders_.resize(names_.size());
  for (size_t f = 0; f < forest.categories.size() && f < coders_.size(); ++f) {
    if (forest.categories[f].empty()) continue;
    absl::StatusOr<CategoryCodes> coder = CategoryCodesFor(forest, static_cast<int>(f));
    if (coder.ok()) coders_[f].emplace(*std::move(coder));
  }
}

int64_t InputSchema::FeatureIndex(absl::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? -1 : it->second;
}

absl::StatusOr<const CategoryCodes*> InputSchema::Coder(int64_t feature) const {
  if (feature >= 0 && feature < static_cast<int64_t>(coders_.size()) &&
      coders_[static_cast<size_t>(feature)].has_value()) {
    return &*coders_[static_cast<size_t>(feature)];
  }
  // The reason, worded only for the request that asked (an error path).
  if (absl::Status why = CheckCategoryNames(forest_, feature); !why.ok()) return why;
  return absl::InternalError(absl::StrCat("feature ", feature, " has categories but no coder"));
}

}  // namespace grove
