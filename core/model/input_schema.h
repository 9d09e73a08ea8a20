// How a request's named columns meet the model's features, built once per model (not per request):
// the feature names, a name -> index map, and the category coders (core/model/category_codes.h) of
// the features whose category names the model file records.
//
// Thread safety: immutable after construction; every method may be called from any number of
// threads. Holds views into the forest, which must outlive it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model/category_codes.h"
#include "core/model/forest.h"

namespace grove {

// The name of feature `f` of a model of `num_features` features whose file records `names`:
// names[f] when the model names every feature, XGBoost's default "f<f>" otherwise (no names, or
// not one per feature). The one naming rule of request columns, feature groups and category
// coders.
std::string FeatureNameOf(const std::vector<std::string>& names, int64_t num_features, int64_t f);

// FeatureNameOf of every feature of the model, in order.
std::vector<std::string> FeatureNamesOrDefault(const std::vector<std::string>& names,
                                               int64_t num_features);

class InputSchema {
 public:
  explicit InputSchema(const Forest& forest);
  InputSchema(const InputSchema&) = delete;
  InputSchema& operator=(const InputSchema&) = delete;

  // FeatureNamesOrDefault's names, one per feature.
  const std::vector<std::string>& names() const { return names_; }
  // The feature named `name` (the first, should a model repeat a name); -1 when none is.
  int64_t FeatureIndex(absl::string_view name) const;
  // The coder of feature `feature`; CategoryCodesFor's errors when the model records no category
  // names for it or `feature` is out of range (CheckCategoryNames': no coder is built for them).
  absl::StatusOr<const CategoryCodes*> Coder(int64_t feature) const;

 private:
  const Forest& forest_;
  std::vector<std::string> names_;
  absl::flat_hash_map<std::string, int64_t> index_;
  std::vector<std::optional<CategoryCodes>> coders_;  // per feature; empty: none recorded
};

}  // namespace grove
