// Engine-independent parts of the explanation API: output widths and what can be explained.
#include "core/explain/explain.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace grove {

int64_t ExplainWidth(const Forest& forest, bool interactions) {
  const int64_t f1 = static_cast<int64_t>(forest.num_features) + 1;
  return static_cast<int64_t>(forest.num_outputs) * (interactions ? f1 * f1 : f1);
}

absl::Status CheckExplainable(const Forest& forest) {
  if (forest.has_linear_leaves) {
    return absl::FailedPreconditionError(absl::StrCat(
        forest.source.empty() ? "<memory>" : forest.source,
        ": cannot explain a model with linear leaves, as LightGBM does: SHAP contributions are not "
        "implemented for linear trees"));
  }
  return absl::OkStatus();
}

}  // namespace grove
