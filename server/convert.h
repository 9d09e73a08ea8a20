// What the request conversions of both protocols share (grove.v1: server/grove_v1/grove_convert.h;
// KServe v2: server/kserve/kserve_convert.h): the row-count and shape checks, raw rows, the
// explanation a request asks for and whether the model can give it, response sizes. Pure functions
// of their arguments: no gRPC calls, no shared state, so that every rule (status code and message)
// is unit-tested without a server.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/common/rows.h"
#include "core/model/feature_groups.h"
#include "core/model/outputs.h"
#include "core/model/forest.h"
#include "core/registry/model_registry.h"

namespace grove::server {

// The format's label in metrics and model metadata: "xgboost_json", "xgboost_ubjson",
// "lightgbm_text", "catboost_json", "treelite_checkpoint".
const char* FormatLabel(ModelFormat format);

// A call's deadline as absl::Time; InfiniteFuture when the call has none (gRPC reports "none" as a
// time centuries ahead).
absl::Time DeadlineFromChrono(std::chrono::system_clock::time_point deadline);

// Row-count and shape checks shared by every API: at least one row, at most the model's
// max_request_rows, exactly num_features columns, `values` == rows x cols (a product that does not
// fit int64 is refused, never wrapped). INVALID_ARGUMENT naming the expected value or limit.
absl::Status CheckShape(const registry::ModelVersion& model, int64_t rows, int64_t cols,
                        int64_t values);

// Raw rows of `rows` x `cols` little-endian float32 (float64 when `float64`) values in `bytes`:
// the size checked (INVALID_ARGUMENT naming `field` in bytes when the shape is right but the size
// is not, the CheckShape message otherwise); float32 at a float-aligned address is a view of
// `bytes` (which must outlive it), otherwise one memcpy into `*converted`; float64 is converted
// into `*converted` (DoubleRowConverter).
absl::StatusOr<RowsView> RowsFromRawBytes(const registry::ModelVersion& model, int64_t rows,
                                          int64_t cols, absl::string_view bytes, bool float64,
                                          std::vector<float>* converted,
                                          absl::string_view field = "");

// `rows` rows of the model's features as little-endian float64 in `bytes` (exactly rows x
// num_features values, at any address) converted into `out` (DoubleRowConverter). A misaligned
// buffer is read a row at a time through one row of scratch: no copy of the doubles is made
// before the request's memory is reserved (only the float rows it counts).
void ConvertRawDoubles(const Forest& forest, absl::string_view bytes, int64_t rows, float* out);

// The model can explain (FAILED_PRECONDITION with the reason otherwise).
absl::Status CheckExplainAvailable(const registry::ModelVersion& model);
// Interaction values fit the model's max_interaction_values_per_row (INVALID_ARGUMENT naming the
// limit otherwise).
absl::Status CheckInteractionsAllowed(const registry::ModelVersion& model);
// num_outputs * (F + 1)^2.
int64_t InteractionValuesPerRow(const Forest& forest);

// The explanation a request asks for (grove.v1 ExplainRequest.method / output_space /
// attribution, KServe request parameters "method" / "output_space" / "attribution").
struct ExplainChoice {
  ExplainMethod method = ExplainMethod::kPathDependent;
  OutputSpace output_space = OutputSpace::kMargin;
  Attribution attribution = Attribution::kShapley;
};
// The model can give it: path-dependent SHAP (CheckExplainAvailable) explains the margin;
// interventional SHAP needs the model's background engine (else its interventional_status,
// FAILED_PRECONDITION naming the file to add), an output space the link supports
// (CheckOutputSpace) and no interactions; and an operation computes the combination
// (ExplainOperationOf). INVALID_ARGUMENT naming the field otherwise.
absl::Status CheckExplainChoice(const registry::ModelVersion& model, const ExplainChoice& choice,
                                bool interactions);
// The queue that computes it (kExplain for a choice CheckExplainChoice refuses).
Operation ExplainOperation(const ExplainChoice& choice, bool interactions);

// The players of an explanation request (core/model/feature_groups.h): the request's `declared`
// groups resolved against the model (INVALID_ARGUMENT naming what is wrong); when it declares
// none, the model's groups.json (null: the model's features). Every group's member is a feature
// of the model, so a request's groups are bounded by its features.
absl::StatusOr<FeatureGroupsPtr> RequestGroups(const registry::ModelVersion& model,
                                               const std::vector<GroupSpec>& declared);

// rows x width x bytes_per_value, and a + b, saturating at INT64_MAX (so that a response-size check
// refuses what would overflow instead of accepting a wrapped-around size).
int64_t SaturatingBytes(int64_t rows, int64_t width, int64_t bytes_per_value);
int64_t SaturatingAdd(int64_t a, int64_t b);

}  // namespace grove::server
