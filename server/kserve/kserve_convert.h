// Request validation and conversion between KServe v2's messages (the Open Inference Protocol,
// proto/inference/grpc_service.proto, as Triton's FIL backend names its tensors) and the engines'
// dense matrices; what both protocols share is in server/convert.h. Pure functions of their
// arguments: no gRPC calls, no shared state, so that every rule (status code and message) is
// unit-tested without a server.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/common/rows.h"
#include "core/model/forest.h"
#include "core/registry/model_registry.h"
#include "core/serving/shared_memory.h"
#include "inference/grpc_service.pb.h"
#include "server/convert.h"

namespace grove::server {

// FIL backend tensor names.
inline constexpr const char* kInputTensor = "input__0";
inline constexpr const char* kOutputTensor = "output__0";
inline constexpr const char* kShapTensor = "treeshap_output";
// With the request parameter `residuals` (bool true, next to treeshap_output): [rows, K] FP32, per
// row and output the sum of treeshap_output's values and bias minus the model's output
// (core/servable/residuals.h), after the asked outputs; the response parameter
// `residual_arithmetic` (string) says how they were computed.
inline constexpr const char* kResidualsTensor = "treeshap_residuals";
inline constexpr const char* kResidualArithmeticParameter = "residual_arithmetic";

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
// The rows of a request: either one tensor per feature named by the model's feature names (a
// columnar request, where categorical features may carry category names as BYTES:
// kserve_columns.h; converted into `owned`), or the input__0 tensor: shape [rows, F], raw (raw_input_contents), typed contents or a shared
// memory range (its parameters; resolved in `shared_memory`, null: refused as INVALID_ARGUMENT;
// shared_memory_byte_size must be exactly the tensor's bytes and the request must carry no contents
// for it); FP32 (Triton FIL), or FP64 converted like Matrix.values_f64. Other datatypes are
// INVALID_ARGUMENT; NOT_FOUND for a region that is not registered. `received_raw` (non-empty): the
// request's one raw_input_contents entry as the transport received it apart from the message
// (server/grpc/wire_rows.h).
absl::StatusOr<KserveInput> ParseKserveInput(
    const registry::ModelVersion& model, const inference::ModelInferRequest& request,
    const serving::SharedMemoryAccess* shared_memory = nullptr,
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
  bool residuals = false;  // request parameter `residuals`: kResidualsTensor
  int64_t class_count = 0;  // > 0: output__0 as the top classes, "value:index" strings (BYTES)
  // Outputs to write into shared memory (their shared_memory_* parameters) instead of
  // raw_output_contents.
  std::optional<SharedMemoryRef> prediction_shared_memory;
  std::optional<SharedMemoryRef> shap_shared_memory;
};
// INVALID_ARGUMENT naming the output or parameter for a duplicate or unknown output, a parameter
// of the wrong type, a class_count below 1 or on treeshap_output, shared memory parameters that
// KserveSharedMemoryRef refuses, shared memory with classification or REST's binary_data, or
// `residuals` without treeshap_output.
absl::StatusOr<KserveOutputs> ParseKserveOutputs(const inference::ModelInferRequest& request);

// treeshap_output's method and space: request parameters "method" ("path_dependent",
// "interventional") and "output_space" ("margin", "probability", "probability_linearized"),
// strings; absent ones keep the defaults. INVALID_ARGUMENT naming the parameter otherwise.
absl::StatusOr<ExplainChoice> ExplainChoiceFromKserve(const inference::ModelInferRequest& request);

// treeshap_output's players: request parameter "groups", a string holding the JSON object of
// groups (ParseFeatureGroupsJson: {"address": ["street", "zip"], "color": [3, 4]}), resolved
// against the model; absent, the model's groups.json (RequestGroups; null: its features).
// INVALID_ARGUMENT naming the parameter otherwise.
absl::StatusOr<FeatureGroupsPtr> GroupsFromKserve(const registry::ModelVersion& model,
                                                  const inference::ModelInferRequest& request);
// treeshap_output's parameter "groups" for grouped values: a JSON array, one {"name": ...,
// "features": [indices]} per column, in column order.
std::string KserveGroupsParameter(const FeatureGroups& groups);

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
// treeshap_output: [rows, F+1] (K = 1) or [rows, K, F+1]; with `groups` their number for F.
std::vector<int64_t> KserveShapShape(const Forest& forest, int64_t rows,
                                     const FeatureGroups* groups = nullptr);
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
