// Engine-independent parts of the explanation API: output widths and what can be explained.
#include "core/explain/explain.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace grove {

int64_t ExplainWidth(const Forest& forest, bool interactions, const FeatureGroups* groups) {
  const int64_t f1 = static_cast<int64_t>(NumPlayers(forest.num_features, groups)) + 1;
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

absl::Status CheckExplainCall(const Forest& forest, RowsView rows, bool interactions,
                              MatrixView<float> out, const FeatureGroups* groups) {
  if (absl::Status s = CheckExplainable(forest); !s.ok()) return s;
  if (rows.cols != forest.num_features) {
    return absl::InvalidArgumentError(absl::StrCat("rows have ", rows.cols, " columns; the model has ",
                                                   forest.num_features, " features"));
  }
  if (rows.rows < 0 || rows.stride < rows.cols || (rows.rows > 0 && rows.data == nullptr)) {
    return absl::InvalidArgumentError("malformed rows view");
  }
  if (groups != nullptr &&
      static_cast<int64_t>(groups->group_of.size()) != forest.num_features) {
    return absl::InvalidArgumentError(absl::StrCat("groups were resolved for ",
                                                   groups->group_of.size(),
                                                   " features; the model has ",
                                                   forest.num_features));
  }
  const int64_t width = ExplainWidth(forest, interactions, groups);
  if (out.rows != rows.rows || out.cols != width || out.stride < out.cols ||
      (out.rows > 0 && out.data == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("output is ", out.rows, " x ", out.cols,
                                                   "; expected ", rows.rows, " x ", width));
  }
  return absl::OkStatus();
}

absl::StatusOr<IterationRange> CheckExplainCall(const Forest& forest, RowsView rows,
                                                bool interactions, int iteration_begin,
                                                int iteration_end, MatrixView<float> out,
                                                const FeatureGroups* groups) {
  if (absl::Status s = CheckExplainCall(forest, rows, interactions, out, groups); !s.ok()) {
    return s;
  }
  IterationRange range;
  if (absl::Status s = ResolveIterationRange(forest, iteration_begin, iteration_end, &range);
      !s.ok()) {
    return s;
  }
  return range;
}

}  // namespace grove
