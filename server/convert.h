// Request validation and conversion between the wire messages (grove.v1, KServe v2) and the
// engines' dense matrices. Pure functions of their arguments: no gRPC calls, no shared state, so that
// every rule (status code and message) is unit-tested without a server.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/common/rows.h"
#include "core/model/outputs.h"
#include "core/model/forest.h"
#include "core/registry/model_registry.h"
#include "core/serving/shared_memory.h"
#include "grove/v1/grove.pb.h"
#include "inference/grpc_service.pb.h"

namespace grove::server {

// FIL backend tensor names.
inline constexpr const char* kInputTensor = "input__0";
inline constexpr const char* kOutputTensor = "output__0";
inline constexpr const char* kShapTensor = "treeshap_output";

// "xgboost_json", "xgboost_ubjson", "lightgbm_text".
const char* FormatLabel(ModelFormat format);

// A call's deadline as absl::Time; InfiniteFuture when the call has none (gRPC reports "none" as a
// time centuries ahead).
absl::Time DeadlineFromChrono(std::chrono::system_clock::time_point deadline);

// Row-count and shape checks shared by every API: at least one row, at most the model's
// max_request_rows, exactly num_features columns, `values` == rows x cols (a product that does not
// fit int64 is refused, never wrapped). INVALID_ARGUMENT naming the expected value or limit.
absl::Status CheckShape(const registry::ModelVersion& model, int64_t rows, int64_t cols,
                        int64_t values);
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
// received it apart from the message (server/wire_rows.h), read in place of matrix.raw_f32().
absl::StatusOr<RowsView> RowsFromMatrix(
    const registry::ModelVersion& model, const grove::v1::Matrix& matrix,
    std::vector<float>* converted,
    const serving::SharedMemoryRegistry* shared_memory = nullptr,
    serving::SharedMemorySpan* span = nullptr, absl::string_view received_raw_rows = {});

// Raw rows of `rows` x `cols` little-endian float32 (float64 when `float64`) values in `bytes`:
// the size checked (INVALID_ARGUMENT naming `field` in bytes when the shape is right but the size
// is not, the CheckShape message otherwise); float32 at a float-aligned address is a view of
// `bytes` (which must outlive it), otherwise one memcpy into `*converted`; float64 is converted
// into `*converted` (DoubleRowConverter).
absl::StatusOr<RowsView> RowsFromRawBytes(const registry::ModelVersion& model, int64_t rows,
                                          int64_t cols, absl::string_view bytes, bool float64,
                                          std::vector<float>* converted,
                                          absl::string_view field = "");

// The bytes of a grove.v1 SharedMemoryRange (registry.Get, `what` naming the field in messages).
absl::StatusOr<serving::SharedMemorySpan> ResolveSharedMemory(
    const serving::SharedMemoryRegistry& shared_memory, const grove::v1::SharedMemoryRange& range,
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
// INVALID_ARGUMENT for enum values this server does not know.
absl::StatusOr<ExplainChoice> ExplainChoiceFromRequest(const grove::v1::ExplainRequest& request);
// The model can give it: path-dependent SHAP (CheckExplainAvailable) explains the margin;
// interventional SHAP needs the model's background engine (else its interventional_status,
// FAILED_PRECONDITION naming the file to add), an output space the link supports
// (CheckOutputSpace) and no interactions. INVALID_ARGUMENT naming the field otherwise.
absl::Status CheckExplainChoice(const registry::ModelVersion& model, const ExplainChoice& choice,
                                bool interactions);
// The queue that computes it.
Operation ExplainOperation(const ExplainChoice& choice, bool interactions);

// Native Predict outputs: the request's (deduplicated, in request order) or the model's defaults.
absl::StatusOr<std::vector<OutputKind>> ResolveOutputs(const registry::ModelVersion& model,
                                                       const grove::v1::PredictRequest& request);
// explain_rows: at most the model's max_request_rows entries, each index in [0, rows).
absl::Status CheckExplainRows(const registry::ModelVersion& model,
                              const grove::v1::PredictRequest& request, int64_t rows);

// rows x width x bytes_per_value, and a + b, saturating at INT64_MAX (so that a response-size check
// refuses what would overflow instead of accepting a wrapped-around size).
int64_t SaturatingBytes(int64_t rows, int64_t width, int64_t bytes_per_value);
int64_t SaturatingAdd(int64_t a, int64_t b);

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

// ---- KServe v2 / Triton FIL -------------------------------------------------------------------

// Parses a KServe model_version ("" = 0 = highest ready): a canonical decimal, without blanks, sign
// or leading zeros; anything else is INVALID_ARGUMENT.
absl::StatusOr<int64_t> ParseKserveVersion(absl::string_view version);

// A range of a shared memory region as a request names it, before it is resolved in the registry.
struct SharedMemoryRef {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};
// The shared memory parameters of a KServe tensor (Triton's system shared memory extension):
// nullopt when it has none. `shared_memory_region` (string) names the region,
// `shared_memory_byte_size` (integer >= 0) is required with it and `shared_memory_offset`
// (integer >= 0) is optional (default 0); INVALID_ARGUMENT naming `tensor` and the parameter for a
// wrong type, a negative value, or an offset or byte size without a region.
absl::StatusOr<std::optional<SharedMemoryRef>> KserveSharedMemoryRef(
    const google::protobuf::Map<std::string, inference::InferParameter>& parameters,
    absl::string_view tensor);

struct KserveInput {
  RowsView rows;
  std::vector<float> owned;  // when the contents had to be copied (typed or unaligned raw)
  serving::SharedMemorySpan span;  // when the rows come from shared memory (keeps it mapped)
};
// The input__0 tensor: shape [rows, F], raw (raw_input_contents), typed contents or a shared
// memory range (its parameters; resolved in `shared_memory`, null: refused as INVALID_ARGUMENT;
// shared_memory_byte_size must be exactly the tensor's bytes and the request must carry no contents
// for it); FP32 (Triton FIL), or FP64 converted like Matrix.values_f64. Other datatypes are
// INVALID_ARGUMENT; NOT_FOUND for a region that is not registered. `received_raw` (non-empty): the
// request's one raw_input_contents entry as the transport received it apart from the message
// (server/wire_rows.h).
absl::StatusOr<KserveInput> ParseKserveInput(
    const registry::ModelVersion& model, const inference::ModelInferRequest& request,
    const serving::SharedMemoryRegistry* shared_memory = nullptr,
    absl::string_view received_raw = {});

// What a ModelInfer asks of its outputs. FIL's output options are request parameters (bool
// `predict_proba`, bool `output_class`, number `threshold`, also as a string since
// tritonclient.grpc sends no doubles; absent: groved's default layout), and
// Triton's classification extension is the output parameter `classification` (tritonclient's
// class_count) on output__0.
struct KserveOutputs {
  std::vector<std::string> names;  // in request order; output__0 when none asked
  bool prediction = false;
  bool shap = false;
  std::optional<bool> predict_proba;
  std::optional<bool> output_class;
  std::optional<double> threshold;
  int64_t class_count = 0;  // > 0: output__0 as the top classes, "value:index" strings (BYTES)
  // Outputs to write into shared memory (their shared_memory_* parameters) instead of
  // raw_output_contents.
  std::optional<SharedMemoryRef> prediction_shared_memory;
  std::optional<SharedMemoryRef> shap_shared_memory;
};
// INVALID_ARGUMENT naming the output or parameter for a duplicate or unknown output, a parameter
// of the wrong type, a class_count below 1 or on treeshap_output, shared memory parameters that
// KserveSharedMemoryRef refuses, or shared memory with classification or REST's binary_data.
absl::StatusOr<KserveOutputs> ParseKserveOutputs(const inference::ModelInferRequest& request);

// treeshap_output's method and space: request parameters "method" ("path_dependent",
// "interventional") and "output_space" ("margin", "probability", "probability_linearized"),
// strings; absent ones keep the defaults. INVALID_ARGUMENT naming the parameter otherwise.
absl::StatusOr<ExplainChoice> ExplainChoiceFromKserve(const inference::ModelInferRequest& request);

// output__0's layout for one model and request.
struct PredictionLayout {
  enum class Form {
    kProbabilities,  // [1-p, p] for binary classifiers, class probabilities for softmax
    kClass,          // the class index, [rows, 1] (binary: p > threshold)
    kPrediction,     // the transformed prediction, [rows, prediction_width]
  };
  Form form = Form::kPrediction;
  float threshold = 0.5f;
  int64_t width = 1;  // values per row
};
// Default (no FIL option): probabilities for single-output sigmoid models (FIL predict_proba),
// the transformed prediction otherwise. predict_proba needs a binary (sigmoid) or softmax model,
// output_class a classifier (also multi:softmax's class index), threshold a binary class output:
// INVALID_ARGUMENT naming the option and the model's link otherwise.
absl::StatusOr<PredictionLayout> ResolvePredictionLayout(const Forest& forest,
                                                         const KserveOutputs& outputs);

// output__0 in the default layout: [rows, 2] = [1-p, p] for single-output sigmoid models (FIL
// predict_proba), otherwise [rows, prediction_width].
std::vector<int64_t> KservePredictionShape(const Forest& forest, int64_t rows);
// treeshap_output: [rows, F+1] (K = 1) or [rows, K, F+1].
std::vector<int64_t> KserveShapShape(const Forest& forest, int64_t rows);
// Writes output__0's little-endian float32 bytes, [rows, layout.width], from transformed
// predictions [rows, prediction_width].
void EncodeKservePrediction(const Forest& forest, const PredictionLayout& layout,
                            const float* prediction, int64_t rows, std::string* raw);
// The same bytes written at `out` (rows x layout.width x 4 bytes; any alignment).
void WriteKservePrediction(const Forest& forest, const PredictionLayout& layout,
                           const float* prediction, int64_t rows, char* out);
// output__0's values are the transformed predictions themselves (same width, no conversion), so
// that an engine may compute them straight into their destination.
bool KservePredictionIsEngineOutput(const Forest& forest, const PredictionLayout& layout);
// The default layout's bytes.
void EncodeKservePrediction(const Forest& forest, const float* prediction, int64_t rows,
                            std::string* raw);
// Triton's classification extension: the `k` largest of each row of `values` [rows, width] (k
// capped at width; ties: lower index first) as BYTES elements "value:index" (value as "%f"), each
// a 4-byte little-endian length then the characters, [rows, min(k, width)].
void EncodeKserveClasses(const float* values, int64_t rows, int64_t width, int64_t k,
                         std::string* raw);
void EncodeFloats(const float* values, int64_t count, std::string* raw);

// input__0 carries the parameters feature_names / feature_types (JSON arrays) when the model
// stores them.
void FillKserveModelMetadata(const registry::ModelVersion& model,
                             const registry::ModelStatus& status,
                             inference::ModelMetadataResponse* out);

}  // namespace grove::server
