// Request validation and conversion between grove.v1's messages (proto/grove/v1/grove.proto) and
// the engines' dense matrices; what both protocols share is in server/convert.h. Pure functions of
// their arguments: no gRPC calls, no shared state, so that every rule (status code and message) is
// unit-tested without a server.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/common/rows.h"
#include "core/model/outputs.h"
#include "core/model/forest.h"
#include "core/registry/model_registry.h"
#include "core/serving/shared_memory.h"
#include "grove/v1/grove.pb.h"
#include "server/convert.h"

namespace grove::server {

// CheckShape of a native Matrix, and the rows as a view into it. A Matrix carries exactly one of
// values, values_f64, raw_f32, raw_f64, shared_memory_f32, shared_memory_f64 (INVALID_ARGUMENT
// naming them otherwise). float32 rows (values, or raw_f32 at a float-aligned address) are read in
// place: the view points into the message, which must outlive it; raw_f32 at an unaligned address
// is copied once into `*converted`. float64 rows (values_f64, raw_f64) are converted into
// `*converted` (DoubleRowConverter) and the view points there. Raw forms: RowsFromRawBytes. The
// shared memory forms are resolved in `shared_memory` (null: refused as INVALID_ARGUMENT) into
// `*span` (which keeps the region mapped: hold it as long as the view) and then read as the raw
// forms are, the view pointing into the region for aligned float32 rows; NOT_FOUND for a region
// that is not registered. `received_raw_rows` (non-empty): the Matrix's raw_f32 as the transport
// received it apart from the message (server/grpc/wire_rows.h), read in place of matrix.raw_f32().
// Matrix.category_columns (category names of categorical features, CategoryCodes of
// core/model/category_codes.h) replace their features' columns in a copy in `*converted`;
// INVALID_ARGUMENT naming the column for an unknown or repeated feature, a name count other than
// the rows, a feature without recorded categories, or an unknown category of an XGBoost model.
absl::StatusOr<RowsView> RowsFromMatrix(
    const registry::ModelVersion& model, const grove::v1::Matrix& matrix,
    std::vector<float>* converted,
    const serving::SharedMemoryAccess* shared_memory = nullptr,
    serving::SharedMemorySpan* span = nullptr, absl::string_view received_raw_rows = {});

// The bytes of a grove.v1 SharedMemoryRange (registry.Get, `what` naming the field in messages).
absl::StatusOr<serving::SharedMemorySpan> ResolveSharedMemory(
    const serving::SharedMemoryAccess& shared_memory, const grove::v1::SharedMemoryRange& range,
    absl::string_view what);

// Shape of one float32 result matrix.
struct ResultShape {
  int64_t rows = 0;
  int64_t cols = 0;
};

// Results of a grove.v1 request written into its output_shared_memory range instead of the
// response. Result i (in the order given) starts at the next multiple of kResultAlignment bytes
// of the range after result i-1. The engines write into the region directly when the range is
// float-aligned in memory; otherwise into a scratch buffer that Flush copies into the region.
// Holds the span (the region stays mapped while this lives). Not thread-safe; move-only.
class SharedMemoryResults {
 public:
  static constexpr uint64_t kResultAlignment = 64;

  // INVALID_ARGUMENT when the range cannot hold every result (naming the bytes needed and those of
  // the range) or when it shares bytes with `rows` (the request's rows, when they come from shared
  // memory: results would overwrite rows being read).
  static absl::StatusOr<SharedMemoryResults> Create(const grove::v1::SharedMemoryRange& range,
                                                    serving::SharedMemorySpan span,
                                                    const std::vector<ResultShape>& shapes,
                                                    const serving::SharedMemorySpan& rows);
  // Where result i is computed (stride == cols).
  MatrixView<float> View(size_t i);
  // Sets `matrix` to say where result i was written: rows, cols and shared_memory_f32 (region,
  // offset in the region, byte size); no values.
  void Describe(size_t i, grove::v1::Matrix* matrix) const;
  // Copies results computed into scratch into the region (nothing when they were written there).
  void Flush();
  // OK unless the range lost pages while results were written (SharedMemorySpan::CheckIntact).
  absl::Status CheckIntact() const { return span_.CheckIntact("output_shared_memory"); }
  // Bytes held in scratch (0 when the engines write the region directly).
  int64_t scratch_bytes() const { return static_cast<int64_t>(scratch_.size() * sizeof(float)); }

 private:
  SharedMemoryResults() = default;
  std::string region_;
  uint64_t range_offset_ = 0;
  serving::SharedMemorySpan span_;
  std::vector<ResultShape> shapes_;
  std::vector<uint64_t> offsets_;  // from the range's start
  std::vector<float> scratch_;     // all results, at offsets_ / 4, when the range is unaligned
};

// The rows came as raw bytes (raw_f32 or raw_f64, or in shared memory): the results go back raw
// (see grove.proto). `received_raw_rows` as for RowsFromMatrix.
bool IsRawMatrix(const grove::v1::Matrix& matrix, absl::string_view received_raw_rows = {});

// Boosting-round range [begin, end) (end 0: to the last round).
absl::Status CheckIterationRange(const Forest& forest, int begin, int end);

// The attribution of ExplainRequest.attribution: ATTRIBUTION_<NAME> is the core's attribution
// <name> (kAttributions), so a new attribution needs only its proto value; INVALID_ARGUMENT
// naming the accepted values otherwise.
absl::StatusOr<Attribution> AttributionFromProto(grove::v1::Attribution value);
// The ExplainChoice of an ExplainRequest (method, output_space, attribution); INVALID_ARGUMENT
// for enum values this server does not know.
absl::StatusOr<ExplainChoice> ExplainChoiceFromRequest(const grove::v1::ExplainRequest& request);

// The players of an ExplainRequest: its groups (names, members by name and by index) resolved
// against the model, or the model's own (RequestGroups).
absl::StatusOr<FeatureGroupsPtr> GroupsFromRequest(const registry::ModelVersion& model,
                                                   const grove::v1::ExplainRequest& request);
// ExplainResponse.groups of `groups`: each group's name and member indices, in column order.
void DescribeGroups(const FeatureGroups& groups,
                    google::protobuf::RepeatedPtrField<grove::v1::FeatureGroup>* out);

// Native Predict outputs: the request's (deduplicated, in request order) or the model's defaults.
absl::StatusOr<std::vector<OutputKind>> ResolveOutputs(const registry::ModelVersion& model,
                                                       const grove::v1::PredictRequest& request);
// explain_rows: at most the model's max_request_rows entries, each index in [0, rows).
absl::Status CheckExplainRows(const registry::ModelVersion& model,
                              const grove::v1::PredictRequest& request, int64_t rows);

// Sizes a Matrix to rows x cols (zero-filled) and returns a view of its storage, into which the
// engines write the results directly: `values` when !raw, the little-endian bytes of raw_f32 when
// raw (the string's buffer is float-aligned: heap memory, or the small-string buffer inside the
// 8-aligned string object; checked).
MatrixView<float> ResizeMatrix(grove::v1::Matrix* matrix, int64_t rows, int64_t cols,
                               bool raw = false);
// The float32 results of a Matrix, raw_f32 or values (whichever ResizeMatrix filled).
const float* MatrixData(const grove::v1::Matrix& matrix);

// Row sums of interaction matrices: `interactions` is [rows, K*(F+1)*(F+1)], `values` receives
// [rows, K*(F+1)].
void InteractionRowSums(const float* interactions, int64_t rows, int num_outputs, int num_features,
                        float* values);
// Top-k features by |value| per (row, output) of SHAP values [rows, K*(F+1)] (bias excluded),
// ordered by |value| descending, ties to the lower feature. k is capped at F.
void TopK(const float* values, int64_t rows, int num_outputs, int num_features, int k,
          grove::v1::TopFeatures* out);

// Native metadata of a serving version, plus the versions' states.
void FillModelMetadata(const registry::ModelVersion& model, const registry::ModelStatus& status,
                       grove::v1::ModelMetadata* out);
void FillModelStatus(const registry::ModelStatus& status, grove::v1::ModelStatus* out);

}  // namespace grove::server
