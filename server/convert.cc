#include "server/convert.h"

#include <cstring>
#include <limits>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"
#include "core/model/double_rows.h"

// Raw tensors (grove.v1 raw_f32 / raw_f64, KServe raw contents) are little-endian on the wire and
// read or written by pointing at the bytes (here, in grove_v1/grove_convert.cc and
// kserve/kserve_convert.cc): a big-endian host would need a byte swap.
#ifndef ABSL_IS_LITTLE_ENDIAN
#error "raw tensors are little-endian on the wire: a big-endian host needs byte swaps here"
#endif

namespace grove::server {

const char* FormatLabel(ModelFormat format) {
  switch (format) {
    case ModelFormat::kXgboostJson: return "xgboost_json";
    case ModelFormat::kXgboostUbjson: return "xgboost_ubjson";
    case ModelFormat::kLightgbmText: return "lightgbm_text";
    case ModelFormat::kCatboostJson: return "catboost_json";
    case ModelFormat::kTreeliteCheckpoint: return "treelite_checkpoint";
  }
  return "unknown";
}

absl::Time DeadlineFromChrono(std::chrono::system_clock::time_point deadline) {
  const auto now = std::chrono::system_clock::now();
  // gRPC's "no deadline" is gpr_inf_future converted to system_clock: far away (or max()).
  if (deadline >= now + std::chrono::hours(24 * 365 * 10)) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

absl::Status CheckShape(const registry::ModelVersion& model, int64_t rows, int64_t cols,
                        int64_t values) {
  const int64_t features = model.forest().num_features;
  const int64_t max_rows = model.config->max_request_rows;
  if (rows <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty request: rows must be at least 1 (got ", rows, ")"));
  }
  if (rows > max_rows) {
    return absl::InvalidArgumentError(absl::StrCat("request has ", rows,
                                                   " rows, above the limit of ", max_rows,
                                                   " rows per request (max_request_rows)"));
  }
  if (cols != features) {
    return absl::InvalidArgumentError(absl::StrCat("rows have ", cols, " features; model '",
                                                   model.name, "' expects ", features));
  }
  // rows is bounded by max_request_rows, which a config bounds, but a product must never wrap
  // around (2^61 x 8 is 0 in int64): check it whatever the limit.
  int64_t expected = 0;
  if (__builtin_mul_overflow(rows, cols, &expected)) {
    return absl::InvalidArgumentError(
        absl::StrCat("matrix of ", rows, " x ", cols, " is too large (", rows, " x ", cols,
                     " does not fit a 64-bit count)"));
  }
  if (values != expected) {
    return absl::InvalidArgumentError(absl::StrCat("matrix of ", rows, " x ", cols, " holds ",
                                                   values, " values; expected ", expected));
  }
  return absl::OkStatus();
}

int64_t SaturatingBytes(int64_t rows, int64_t width, int64_t bytes_per_value) {
  int64_t values = 0, bytes = 0;
  if (rows < 0 || width < 0 || bytes_per_value < 0 ||
      __builtin_mul_overflow(rows, width, &values) ||
      __builtin_mul_overflow(values, bytes_per_value, &bytes)) {
    return std::numeric_limits<int64_t>::max();
  }
  return bytes;
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return std::numeric_limits<int64_t>::max();
  return sum;
}

absl::StatusOr<RowsView> RowsFromRawBytes(const registry::ModelVersion& model, int64_t rows,
                                          int64_t cols, absl::string_view bytes,
                                          bool float64, std::vector<float>* converted,
                                          absl::string_view field) {
  const size_t width = float64 ? sizeof(double) : sizeof(float);
  if (field.empty()) field = float64 ? "raw_f64" : "raw_f32";
  if (bytes.size() % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, " holds ", bytes.size(),
                                                   " bytes, not a whole number of ", width,
                                                   "-byte values"));
  }
  const int64_t values = static_cast<int64_t>(bytes.size() / width);
  if (absl::Status s = CheckShape(model, rows, cols, values); !s.ok()) {
    // A bad shape (no rows, more than max_request_rows, the wrong feature count) is said as
    // CheckShape says it; only a byte count that does not fit a good shape is said in bytes.
    if (rows <= 0 || rows > model.config->max_request_rows ||
        cols != model.forest().num_features) {
      return s;
    }
    // The shape itself is fine: say it in bytes, the unit the sender wrote.
    return absl::InvalidArgumentError(absl::StrCat(
        field, " holds ", bytes.size(), " bytes; a matrix of ", rows, " x ", cols, " needs ",
        SaturatingBytes(rows, cols, static_cast<int64_t>(width)), " (", width,
        " bytes per value)"));
  }
  const bool aligned = reinterpret_cast<uintptr_t>(bytes.data()) % width == 0;
  if (!float64) {
    if (aligned) return MakeRowsView(reinterpret_cast<const float*>(bytes.data()), rows, cols);
    converted->resize(static_cast<size_t>(values));
    std::memcpy(converted->data(), bytes.data(), bytes.size());
    return MakeRowsView(converted->data(), rows, cols);
  }
  converted->resize(static_cast<size_t>(values));
  ConvertRawDoubles(model.forest(), bytes, rows, converted->data());
  return MakeRowsView(converted->data(), rows, cols);
}

void ConvertRawDoubles(const Forest& forest, absl::string_view bytes, int64_t rows, float* out) {
  const DoubleRowConverter converter(forest);
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(double) == 0) {
    converter.ConvertRows(reinterpret_cast<const double*>(bytes.data()), rows, out);
    return;
  }
  const int64_t cols = forest.num_features;
  std::vector<double> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(row.data(), bytes.data() + r * cols * sizeof(double), row.size() * sizeof(double));
    converter.ConvertRows(row.data(), 1, out + r * cols);
  }
}

absl::Status CheckExplainAvailable(const registry::ModelVersion& model) {
  absl::Status s = model.servable->Available(Operation::kExplain);
  if (s.ok()) return s;
  return absl::FailedPreconditionError(
      absl::StrCat("model '", model.name, "' cannot be explained: ", s.message()));
}

int64_t InteractionValuesPerRow(const Forest& forest) {
  const int64_t f1 = forest.num_features + 1;
  return forest.num_outputs * f1 * f1;
}

absl::Status CheckInteractionsAllowed(const registry::ModelVersion& model) {
  const int64_t per_row = InteractionValuesPerRow(model.forest());
  const int64_t limit = model.config->max_interaction_values_per_row;
  if (per_row <= limit) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "interaction values of model '", model.name, "' need ", per_row,
      " values per row (outputs x (features + 1)^2), above the limit of ", limit,
      " (max_interaction_values_per_row)"));
}

absl::Status CheckExplainChoice(const registry::ModelVersion& model, const ExplainChoice& choice,
                                bool interactions) {
  absl::StatusOr<Operation> op = ExplainOperationOf(choice.method, choice.attribution, interactions);
  if (!op.ok()) return op.status();
  if (*op == Operation::kSaabas) {
    if (choice.output_space != OutputSpace::kMargin) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output space ", OutputSpaceName(choice.output_space),
          " is not served: Saabas attributions explain the margin only"));
    }
    // Not Available(op): the Saabas engine is built on first use, by the engine's thread.
    return model.servable->Explainable();
  }
  if (choice.method == ExplainMethod::kPathDependent) {
    if (choice.output_space != OutputSpace::kMargin) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output space ", OutputSpaceName(choice.output_space),
          " needs the interventional method: path-dependent SHAP explains the margin"));
    }
    // Not Available(op): the Banzhaf engine is built on first use, by the engine's thread.
    return CheckExplainAvailable(model);
  }
  if (absl::Status s = model.servable->Available(ExplainOperation(choice, interactions)); !s.ok()) {
    return s;
  }
  return CheckOutputSpace(model.forest(), choice.output_space);
}

Operation ExplainOperation(const ExplainChoice& choice, bool interactions) {
  return ExplainOperationOf(choice.method, choice.attribution, interactions)
      .value_or(Operation::kExplain);
}

absl::StatusOr<FeatureGroupsPtr> RequestGroups(const registry::ModelVersion& model,
                                               const std::vector<GroupSpec>& declared) {
  if (declared.empty()) return model.groups;
  const Forest& f = model.forest();
  absl::StatusOr<FeatureGroupsPtr> groups =
      ResolveFeatureGroups(declared, f.num_features, f.feature_names);
  if (!groups.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("groups of model '", model.name, "': ", groups.status().message()));
  }
  return groups;
}

}  // namespace grove::server
