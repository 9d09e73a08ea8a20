#include "server/convert.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/base/config.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/model/double_rows.h"
#include "nlohmann/json.hpp"

// Raw tensors (grove.v1 raw_f32 / raw_f64, KServe raw contents) are little-endian on the wire and
// read or written here by pointing at the bytes: a big-endian host would need a byte swap.
#ifndef ABSL_IS_LITTLE_ENDIAN
#error "raw tensors are little-endian on the wire: a big-endian host needs byte swaps here"
#endif

namespace grove::server {
namespace {

grove::v1::ModelState StateToProto(registry::VersionState state) {
  switch (state) {
    case registry::VersionState::kLoading: return grove::v1::MODEL_STATE_LOADING;
    case registry::VersionState::kReady: return grove::v1::MODEL_STATE_READY;
    case registry::VersionState::kFailed: return grove::v1::MODEL_STATE_FAILED;
    case registry::VersionState::kUnloaded: return grove::v1::MODEL_STATE_UNLOADED;
  }
  return grove::v1::MODEL_STATE_UNSPECIFIED;
}

grove::v1::Output OutputToProto(OutputKind kind) {
  switch (kind) {
    case OutputKind::kMargin: return grove::v1::OUTPUT_MARGIN;
    case OutputKind::kPrediction: return grove::v1::OUTPUT_PREDICTION;
    case OutputKind::kLeaf: return grove::v1::OUTPUT_LEAF;
  }
  return grove::v1::OUTPUT_UNSPECIFIED;
}

bool BinaryProbabilities(const Forest& forest) {
  return forest.num_outputs == 1 && forest.objective.link == Link::kSigmoid;
}

// The request parameter `name` parsed by `parse` into `*out`; absent: `*out` unchanged.
// INVALID_ARGUMENT naming the parameter when it is not a string or does not parse.
template <typename T>
absl::Status StringParameter(const inference::ModelInferRequest& request, const char* name,
                             absl::StatusOr<T> (*parse)(absl::string_view), T* out) {
  auto it = request.parameters().find(name);
  if (it == request.parameters().end()) return absl::OkStatus();
  if (it->second.parameter_choice_case() != inference::InferParameter::kStringParam) {
    return absl::InvalidArgumentError(
        absl::StrCat("request parameter '", name, "' must be a string"));
  }
  absl::StatusOr<T> parsed = parse(it->second.string_param());
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request parameter '", name, "': ", parsed.status().message()));
  }
  *out = *parsed;
  return absl::OkStatus();
}

}  // namespace

const char* FormatLabel(ModelFormat format) {
  switch (format) {
    case ModelFormat::kXgboostJson: return "xgboost_json";
    case ModelFormat::kXgboostUbjson: return "xgboost_ubjson";
    case ModelFormat::kLightgbmText: return "lightgbm_text";
    case ModelFormat::kCatboostJson: return "catboost_json";
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

bool IsRawMatrix(const grove::v1::Matrix& matrix, absl::string_view received_raw_rows) {
  return !received_raw_rows.empty() || !matrix.raw_f32().empty() || !matrix.raw_f64().empty() ||
         matrix.has_shared_memory_f32() || matrix.has_shared_memory_f64();
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
  const double* doubles = reinterpret_cast<const double*>(bytes.data());
  std::vector<double> copy;
  if (!aligned) {
    copy.resize(static_cast<size_t>(values));
    std::memcpy(copy.data(), bytes.data(), bytes.size());
    doubles = copy.data();
  }
  converted->resize(static_cast<size_t>(values));
  DoubleRowConverter(model.forest()).ConvertRows(doubles, rows, converted->data());
  return MakeRowsView(converted->data(), rows, cols);
}

absl::StatusOr<RowsView> RowsFromMatrix(const registry::ModelVersion& model,
                                        const grove::v1::Matrix& matrix,
                                        std::vector<float>* converted,
                                        const serving::SharedMemoryAccess* shared_memory,
                                        serving::SharedMemorySpan* span,
                                        absl::string_view received_raw_rows) {
  const absl::string_view raw_f32 =
      received_raw_rows.empty() ? absl::string_view(matrix.raw_f32()) : received_raw_rows;
  const int forms = (matrix.values_size() > 0) + (matrix.values_f64_size() > 0) +
                    !raw_f32.empty() + !matrix.raw_f64().empty() +
                    matrix.has_shared_memory_f32() + matrix.has_shared_memory_f64();
  if (forms > 1) {
    return absl::InvalidArgumentError(
        "rows carry more than one of values, values_f64, raw_f32, raw_f64, shared_memory_f32, "
        "shared_memory_f64; send one");
  }
  if (matrix.has_shared_memory_f32() || matrix.has_shared_memory_f64()) {
    const bool float64 = matrix.has_shared_memory_f64();
    const char* field = float64 ? "rows.shared_memory_f64" : "rows.shared_memory_f32";
    if (shared_memory == nullptr || span == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": this call does not read rows from shared memory"));
    }
    absl::StatusOr<serving::SharedMemorySpan> got = ResolveSharedMemory(
        *shared_memory, float64 ? matrix.shared_memory_f64() : matrix.shared_memory_f32(), field);
    if (!got.ok()) return got.status();
    *span = *std::move(got);
    return RowsFromRawBytes(model, matrix.rows(), matrix.cols(),
                            absl::string_view(span->data, static_cast<size_t>(span->byte_size)),
                            float64, converted, field);
  }
  if (!raw_f32.empty()) {
    return RowsFromRawBytes(model, matrix.rows(), matrix.cols(), raw_f32, false, converted);
  }
  if (!matrix.raw_f64().empty()) {
    return RowsFromRawBytes(model, matrix.rows(), matrix.cols(), matrix.raw_f64(), true,
                            converted);
  }
  if (matrix.values_f64_size() > 0) {
    if (absl::Status s = CheckShape(model, matrix.rows(), matrix.cols(), matrix.values_f64_size());
        !s.ok()) {
      return s;
    }
    converted->resize(static_cast<size_t>(matrix.values_f64_size()));
    DoubleRowConverter(model.forest())
        .ConvertRows(matrix.values_f64().data(), matrix.rows(), converted->data());
    return MakeRowsView(converted->data(), matrix.rows(), matrix.cols());
  }
  if (absl::Status s = CheckShape(model, matrix.rows(), matrix.cols(), matrix.values_size());
      !s.ok()) {
    return s;
  }
  return MakeRowsView(matrix.values().data(), matrix.rows(), matrix.cols());
}

absl::StatusOr<serving::SharedMemorySpan> ResolveSharedMemory(
    const serving::SharedMemoryAccess& shared_memory, const grove::v1::SharedMemoryRange& range,
    absl::string_view what) {
  return shared_memory.Get(range.region(), range.offset(), range.byte_size(), what);
}

absl::StatusOr<SharedMemoryResults> SharedMemoryResults::Create(
    const grove::v1::SharedMemoryRange& range, serving::SharedMemorySpan span,
    const std::vector<ResultShape>& shapes, const serving::SharedMemorySpan& rows) {
  SharedMemoryResults out;
  uint64_t end = 0;
  bool overflow = false;
  for (const ResultShape& shape : shapes) {
    const int64_t bytes = SaturatingBytes(shape.rows, shape.cols, sizeof(float));
    const uint64_t start = (end + kResultAlignment - 1) / kResultAlignment * kResultAlignment;
    overflow |= bytes == std::numeric_limits<int64_t>::max() || start < end ||
                __builtin_add_overflow(start, static_cast<uint64_t>(bytes), &end);
    out.offsets_.push_back(start);
  }
  if (overflow || end > span.byte_size) {
    std::string sizes;
    for (size_t i = 0; i < shapes.size(); ++i) {
      absl::StrAppend(&sizes, i ? ", " : "", shapes[i].rows, " x ", shapes[i].cols);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "output_shared_memory holds ", span.byte_size, " bytes; the results (float32 ", sizes,
        ", each at a multiple of ", kResultAlignment, " bytes) need ",
        overflow ? std::string("more than 2^64") : absl::StrCat(end)));
  }
  if (rows && span.Overlaps(rows)) {
    return absl::InvalidArgumentError(
        "output_shared_memory shares bytes with the rows' shared memory range: the results would "
        "overwrite rows while they are read; use separate ranges");
  }
  out.region_ = range.region();
  out.range_offset_ = range.offset();
  out.shapes_ = shapes;
  if (reinterpret_cast<uintptr_t>(span.data) % alignof(float) != 0) {
    out.scratch_.resize(static_cast<size_t>(end / sizeof(float)) + 1);
  }
  out.span_ = std::move(span);
  return out;
}

MatrixView<float> SharedMemoryResults::View(size_t i) {
  float* data = scratch_.empty()
                    ? reinterpret_cast<float*>(span_.data + offsets_[i])
                    : scratch_.data() + offsets_[i] / sizeof(float);
  return MakeMatrixView(data, shapes_[i].rows, shapes_[i].cols);
}

void SharedMemoryResults::Describe(size_t i, grove::v1::Matrix* matrix) const {
  matrix->Clear();
  matrix->set_rows(shapes_[i].rows);
  matrix->set_cols(shapes_[i].cols);
  grove::v1::SharedMemoryRange* where = matrix->mutable_shared_memory_f32();
  where->set_region(region_);
  where->set_offset(range_offset_ + offsets_[i]);
  where->set_byte_size(static_cast<uint64_t>(shapes_[i].rows * shapes_[i].cols) * sizeof(float));
}

void SharedMemoryResults::Flush() {
  if (scratch_.empty()) return;
  for (size_t i = 0; i < shapes_.size(); ++i) {
    const size_t bytes = static_cast<size_t>(shapes_[i].rows * shapes_[i].cols) * sizeof(float);
    if (bytes > 0) {
      std::memcpy(span_.data + offsets_[i], scratch_.data() + offsets_[i] / sizeof(float), bytes);
    }
  }
}

absl::Status CheckIterationRange(const Forest& forest, int begin, int end) {
  if (begin < 0 || end < 0) {
    return absl::InvalidArgumentError("iteration_begin and iteration_end must not be negative");
  }
  if (begin >= forest.num_iterations) {
    return absl::InvalidArgumentError(absl::StrCat("iteration_begin ", begin,
                                                   " is beyond the model's ",
                                                   forest.num_iterations, " boosting rounds"));
  }
  if (end > 0 && end <= begin) {
    return absl::InvalidArgumentError(absl::StrCat("iteration_end ", end,
                                                   " must be 0 (to the last round) or above "
                                                   "iteration_begin ",
                                                   begin));
  }
  return absl::OkStatus();
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

absl::StatusOr<ExplainChoice> ExplainChoiceFromRequest(const grove::v1::ExplainRequest& request) {
  ExplainChoice c;
  switch (request.method()) {
    case grove::v1::EXPLAIN_METHOD_PATH_DEPENDENT: break;
    case grove::v1::EXPLAIN_METHOD_INTERVENTIONAL:
      c.method = ExplainMethod::kInterventional;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unknown ExplainRequest.method ", request.method(),
                       ": EXPLAIN_METHOD_PATH_DEPENDENT or EXPLAIN_METHOD_INTERVENTIONAL"));
  }
  switch (request.output_space()) {
    case grove::v1::OUTPUT_SPACE_MARGIN: break;
    case grove::v1::OUTPUT_SPACE_PROBABILITY:
      c.output_space = OutputSpace::kProbability;
      break;
    case grove::v1::OUTPUT_SPACE_PROBABILITY_LINEARIZED:
      c.output_space = OutputSpace::kProbabilityLinearized;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown ExplainRequest.output_space ", request.output_space(),
          ": OUTPUT_SPACE_MARGIN, OUTPUT_SPACE_PROBABILITY or OUTPUT_SPACE_PROBABILITY_LINEARIZED"));
  }
  return c;
}

absl::Status CheckExplainChoice(const registry::ModelVersion& model, const ExplainChoice& choice,
                                bool interactions) {
  if (choice.method == ExplainMethod::kPathDependent) {
    if (choice.output_space != OutputSpace::kMargin) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output space ", OutputSpaceName(choice.output_space),
          " needs the interventional method: path-dependent SHAP explains the margin"));
    }
    return CheckExplainAvailable(model);
  }
  if (absl::Status s = model.servable->Available(ExplainOperation(choice, interactions)); !s.ok()) {
    return s;
  }
  return CheckOutputSpace(model.forest(), choice.output_space);
}

Operation ExplainOperation(const ExplainChoice& choice, bool interactions) {
  if (choice.method == ExplainMethod::kInterventional) {
    return interactions ? Operation::kInterventionalInteractions : Operation::kInterventional;
  }
  return interactions ? Operation::kInteractions : Operation::kExplain;
}

absl::StatusOr<std::vector<OutputKind>> ResolveOutputs(const registry::ModelVersion& model,
                                                       const grove::v1::PredictRequest& request) {
  std::vector<OutputKind> out;
  auto add = [&](OutputKind k) {
    if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  };
  if (request.outputs_size() == 0) {
    for (OutputKind k : model.config->default_outputs) add(k);
    return out;
  }
  for (int o : request.outputs()) {
    switch (o) {
      case grove::v1::OUTPUT_MARGIN: add(OutputKind::kMargin); break;
      case grove::v1::OUTPUT_PREDICTION: add(OutputKind::kPrediction); break;
      case grove::v1::OUTPUT_LEAF: add(OutputKind::kLeaf); break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("unknown output ", o, " (use OUTPUT_MARGIN, OUTPUT_PREDICTION, OUTPUT_LEAF)"));
    }
  }
  return out;
}

absl::Status CheckExplainRows(const registry::ModelVersion& model,
                              const grove::v1::PredictRequest& request, int64_t rows) {
  const int64_t max_rows = model.config->max_request_rows;
  if (request.explain_rows_size() > max_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "explain_rows asks for ", request.explain_rows_size(), " explained rows, above the limit of ",
        max_rows, " rows per request (max_request_rows)"));
  }
  for (int64_t r : request.explain_rows()) {
    if (r < 0 || r >= rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("explain_rows holds ", r, "; rows are 0..", rows - 1));
    }
  }
  return absl::OkStatus();
}

MatrixView<float> ResizeMatrix(grove::v1::Matrix* matrix, int64_t rows, int64_t cols, bool raw) {
  matrix->set_rows(rows);
  matrix->set_cols(cols);
  if (!raw) {
    matrix->mutable_values()->Resize(static_cast<int>(rows * cols), 0.0f);
    return MakeMatrixView(matrix->mutable_values()->mutable_data(), rows, cols);
  }
  std::string* bytes = matrix->mutable_raw_f32();
  bytes->resize(static_cast<size_t>(rows * cols) * sizeof(float));
  assert(reinterpret_cast<uintptr_t>(bytes->data()) % alignof(float) == 0);
  return MakeMatrixView(reinterpret_cast<float*>(bytes->data()), rows, cols);
}

const float* MatrixData(const grove::v1::Matrix& matrix) {
  if (!matrix.raw_f32().empty()) return reinterpret_cast<const float*>(matrix.raw_f32().data());
  return matrix.values().data();
}

void InteractionRowSums(const float* interactions, int64_t rows, int num_outputs, int num_features,
                        float* values) {
  const int64_t f1 = num_features + 1;
  for (int64_t r = 0; r < rows; ++r) {
    for (int k = 0; k < num_outputs; ++k) {
      const float* m = interactions + (r * num_outputs + k) * f1 * f1;
      float* v = values + (r * num_outputs + k) * f1;
      for (int64_t i = 0; i < f1; ++i) {
        double sum = 0;
        for (int64_t j = 0; j < f1; ++j) sum += m[i * f1 + j];
        v[i] = static_cast<float>(sum);
      }
    }
  }
}

void TopK(const float* values, int64_t rows, int num_outputs, int num_features, int k,
          grove::v1::TopFeatures* out) {
  k = std::max(0, std::min(k, num_features));
  out->set_k(k);
  out->clear_features();
  out->clear_values();
  out->mutable_features()->Reserve(static_cast<int>(rows * num_outputs * k));
  out->mutable_values()->Reserve(static_cast<int>(rows * num_outputs * k));
  const int64_t f1 = num_features + 1;
  std::vector<int> order(num_features);
  for (int64_t r = 0; r < rows; ++r) {
    for (int o = 0; o < num_outputs; ++o) {
      const float* v = values + (r * num_outputs + o) * f1;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
        const float x = std::fabs(v[a]), y = std::fabs(v[b]);
        return x != y ? x > y : a < b;
      });
      for (int i = 0; i < k; ++i) {
        out->add_features(order[i]);
        out->add_values(v[order[i]]);
      }
    }
  }
}

void FillModelStatus(const registry::ModelStatus& status, grove::v1::ModelStatus* out) {
  out->set_name(status.name);
  out->set_ready(status.ready);
  for (const registry::VersionStatus& v : status.versions) {
    grove::v1::VersionStatus* p = out->add_versions();
    p->set_version(v.version);
    p->set_state(StateToProto(v.state));
    std::string error = v.error;
    if (error.empty() && !status.error.empty() && !v.serving) error = status.error;
    p->set_error(error);
    p->set_load_seconds(v.load_seconds);
    p->set_path(v.path);
    if (v.loaded_at != absl::InfinitePast()) p->set_loaded_unix_micros(absl::ToUnixMicros(v.loaded_at));
  }
}

void FillModelMetadata(const registry::ModelVersion& model, const registry::ModelStatus& status,
                       grove::v1::ModelMetadata* out) {
  const Forest& f = model.forest();
  out->set_name(model.name);
  out->set_version(model.version);
  grove::v1::ModelStatus tmp;
  FillModelStatus(status, &tmp);
  *out->mutable_versions() = tmp.versions();
  out->set_format(FormatLabel(f.format));
  out->set_library_version(f.library_version);
  out->set_objective(f.objective.name);
  out->set_link(LinkName(f.objective.link));
  out->set_num_features(f.num_features);
  for (const std::string& n : f.feature_names) out->add_feature_names(n);
  for (const std::string& t : f.feature_types) out->add_feature_types(t);
  out->set_num_outputs(f.num_outputs);
  out->set_prediction_width(f.PredictionWidth());
  out->set_num_trees(static_cast<int32_t>(f.trees.size()));
  out->set_num_iterations(f.num_iterations);
  out->set_max_depth(f.max_depth);
  out->set_has_categorical(f.has_categorical);
  out->set_has_linear_leaves(f.has_linear_leaves);
  const Servable& servable = *model.servable;
  const absl::Status explainable = servable.Available(Operation::kExplain);
  out->set_explainable(explainable.ok());
  if (!explainable.ok()) out->set_explain_error(std::string(explainable.message()));
  out->set_predict_engine(servable.Describe(Operation::kPredict));
  out->set_explain_engine(explainable.ok() ? servable.Describe(Operation::kExplain) : "");
  out->set_max_request_rows(model.config->max_request_rows);
  out->set_max_interaction_values_per_row(model.config->max_interaction_values_per_row);
  out->set_interactions_allowed(explainable.ok() && CheckInteractionsAllowed(model).ok());
  out->set_raw_tensors(true);
  out->set_background_rows(servable.background_rows());
  for (OutputKind k : model.config->default_outputs) out->add_default_outputs(OutputToProto(k));
}

absl::StatusOr<int64_t> ParseKserveVersion(absl::string_view version) {
  if (version.empty()) return 0;
  // Only the canonical decimal, as version directories are named: SimpleAtoi alone also takes
  // blanks around the number, a sign and leading zeros, other spellings of one version.
  const bool canonical =
      std::all_of(version.begin(), version.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
      (version.size() == 1 || version[0] != '0');
  int64_t v = 0;
  if (!canonical || !absl::SimpleAtoi(version, &v) || v < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model_version '", version, "' is not a version number"));
  }
  return v;
}

absl::StatusOr<std::optional<SharedMemoryRef>> KserveSharedMemoryRef(
    const google::protobuf::Map<std::string, inference::InferParameter>& parameters,
    absl::string_view tensor) {
  using P = inference::InferParameter;
  // A non-negative integer parameter (int64, or uint64 as REST's large numbers parse).
  auto integer = [&](const char* key, uint64_t* out) -> absl::Status {
    const P& p = parameters.at(key);
    if (p.parameter_choice_case() == P::kInt64Param && p.int64_param() >= 0) {
      *out = static_cast<uint64_t>(p.int64_param());
    } else if (p.parameter_choice_case() == P::kUint64Param) {
      *out = p.uint64_param();
    } else {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", tensor, "': parameter '", key,
                                                     "' must be an integer >= 0"));
    }
    return absl::OkStatus();
  };
  const bool region = parameters.contains("shared_memory_region");
  const bool offset = parameters.contains("shared_memory_offset");
  const bool size = parameters.contains("shared_memory_byte_size");
  if (!region) {
    if (offset || size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", tensor, "': parameter '",
          offset ? "shared_memory_offset" : "shared_memory_byte_size",
          "' needs 'shared_memory_region' (the shared memory region it is a range of)"));
    }
    return std::nullopt;
  }
  const P& name = parameters.at("shared_memory_region");
  if (name.parameter_choice_case() != P::kStringParam) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", tensor, "': parameter 'shared_memory_region' must be a string"));
  }
  if (!size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", tensor, "': parameter 'shared_memory_byte_size' is required with "
        "'shared_memory_region'"));
  }
  SharedMemoryRef ref;
  ref.region = name.string_param();
  if (absl::Status s = integer("shared_memory_byte_size", &ref.byte_size); !s.ok()) return s;
  if (offset) {
    if (absl::Status s = integer("shared_memory_offset", &ref.offset); !s.ok()) return s;
  }
  return ref;
}

absl::StatusOr<KserveInput> ParseKserveInput(const registry::ModelVersion& model,
                                             const inference::ModelInferRequest& request,
                                             const serving::SharedMemoryAccess* shared_memory,
                                             absl::string_view received_raw) {
  // Raw contents received apart from the message count as its one raw_input_contents entry.
  const int raw_entries = request.raw_input_contents_size() + (received_raw.empty() ? 0 : 1);
  absl::string_view raw_bytes = received_raw;
  if (raw_bytes.empty() && raw_entries > 0) raw_bytes = request.raw_input_contents(0);
  if (request.inputs_size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("expected exactly one input tensor '",
                                                   kInputTensor, "', got ",
                                                   request.inputs_size()));
  }
  const auto& in = request.inputs(0);
  if (in.name() != kInputTensor) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown input tensor '", in.name(), "'; expected '", kInputTensor, "'"));
  }
  const bool fp64 = in.datatype() == "FP64";
  if (in.datatype() != "FP32" && !fp64) {
    return absl::InvalidArgumentError(absl::StrCat("input '", kInputTensor, "' has datatype ",
                                                   in.datatype(), "; expected FP32 (or FP64)"));
  }
  if (in.shape_size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", kInputTensor, "' has ", in.shape_size(), " dimensions; expected [rows, ",
        model.forest().num_features, "]"));
  }
  const int64_t rows = in.shape(0);
  const int64_t cols = in.shape(1);
  absl::StatusOr<std::optional<SharedMemoryRef>> shm = KserveSharedMemoryRef(in.parameters(),
                                                                              kInputTensor);
  if (!shm.ok()) return shm.status();
  if (shm->has_value()) {
    if (in.has_contents() || raw_entries > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", kInputTensor, "' is in shared memory and also carries ",
          in.has_contents() ? "contents" : "raw_input_contents", "; send one form"));
    }
    const std::string what = absl::StrCat("input '", kInputTensor, "'");
    if (shared_memory == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": this call does not read tensors from shared memory"));
    }
    const SharedMemoryRef& ref = **shm;
    KserveInput out;
    absl::StatusOr<serving::SharedMemorySpan> span =
        shared_memory->Get(ref.region, ref.offset, ref.byte_size, what);
    if (!span.ok()) return span.status();
    out.span = *std::move(span);
    absl::StatusOr<RowsView> view = RowsFromRawBytes(
        model, rows, cols,
        absl::string_view(out.span.data, static_cast<size_t>(out.span.byte_size)), fp64,
        &out.owned, absl::StrCat(what, " shared_memory_byte_size"));
    if (!view.ok()) return view.status();
    out.rows = *view;
    return out;
  }
  const bool raw = raw_entries > 0;
  if (raw && in.has_contents()) {
    return absl::InvalidArgumentError(
        "input contents given both as raw_input_contents and as typed contents");
  }
  if (raw && raw_entries != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("raw_input_contents has ", raw_entries, " entries; expected 1"));
  }
  KserveInput out;
  if (fp64) {
    std::vector<double> doubles;
    if (raw) {
      const absl::string_view bytes = raw_bytes;
      if (bytes.size() % sizeof(double) != 0) {
        return absl::InvalidArgumentError(absl::StrCat("raw input of ", bytes.size(),
                                                       " bytes is not a whole number of FP64"));
      }
      doubles.resize(bytes.size() / sizeof(double));
      if (!bytes.empty()) std::memcpy(doubles.data(), bytes.data(), bytes.size());
    } else {
      doubles.assign(in.contents().fp64_contents().begin(), in.contents().fp64_contents().end());
    }
    if (absl::Status s = CheckShape(model, rows, cols, static_cast<int64_t>(doubles.size()));
        !s.ok()) {
      return s;
    }
    out.owned.resize(doubles.size());
    DoubleRowConverter(model.forest()).ConvertRows(doubles.data(), rows, out.owned.data());
    out.rows = MakeRowsView(out.owned.data(), rows, cols);
    return out;
  }
  if (raw) {
    const absl::string_view bytes = raw_bytes;
    if (bytes.size() % sizeof(float) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("raw input of ", bytes.size(),
                                                     " bytes is not a whole number of FP32"));
    }
    const int64_t values = static_cast<int64_t>(bytes.size() / sizeof(float));
    if (absl::Status s = CheckShape(model, rows, cols, values); !s.ok()) return s;
    if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0) {
      out.rows = MakeRowsView(reinterpret_cast<const float*>(bytes.data()), rows, cols);
    } else {
      out.owned.resize(static_cast<size_t>(values));
      std::memcpy(out.owned.data(), bytes.data(), bytes.size());
      out.rows = MakeRowsView(out.owned.data(), rows, cols);
    }
    return out;
  }
  const auto& c = in.contents();
  if (absl::Status s = CheckShape(model, rows, cols, c.fp32_contents_size()); !s.ok()) return s;
  out.rows = MakeRowsView(c.fp32_contents().data(), rows, cols);
  return out;
}

absl::StatusOr<KserveOutputs> ParseKserveOutputs(const inference::ModelInferRequest& request) {
  KserveOutputs out;
  for (const auto& o : request.outputs()) {
    if (std::find(out.names.begin(), out.names.end(), o.name()) != out.names.end()) {
      return absl::InvalidArgumentError(absl::StrCat("output '", o.name(), "' requested twice"));
    }
    if (auto it = o.parameters().find("classification"); it != o.parameters().end()) {
      const inference::InferParameter& p = it->second;
      if (o.name() != kOutputTensor) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Triton's classification extension (class_count) applies to '", kOutputTensor,
            "', not to '", o.name(), "'"));
      }
      if (p.parameter_choice_case() != inference::InferParameter::kInt64Param ||
          p.int64_param() < 1) {
        return absl::InvalidArgumentError(
            "output parameter 'classification' (class_count) must be an integer >= 1");
      }
      out.class_count = p.int64_param();
    }
    absl::StatusOr<std::optional<SharedMemoryRef>> shm =
        KserveSharedMemoryRef(o.parameters(), o.name());
    if (!shm.ok()) return shm.status();
    if (shm->has_value()) {
      if (o.parameters().contains("classification")) {
        return absl::InvalidArgumentError(absl::StrCat(
            "output '", o.name(), "' sets both 'shared_memory_region' and 'classification'"));
      }
      if (auto b = o.parameters().find("binary_data");
          b != o.parameters().end() &&
          b->second.parameter_choice_case() == inference::InferParameter::kBoolParam &&
          b->second.bool_param()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "output '", o.name(), "' sets both 'shared_memory_region' and 'binary_data'"));
      }
    }
    if (o.name() == kOutputTensor) {
      out.prediction = true;
      out.prediction_shared_memory = *std::move(shm);
    } else if (o.name() == kShapTensor) {
      out.shap = true;
      out.shap_shared_memory = *std::move(shm);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown output tensor '", o.name(),
                                                     "'; outputs are '", kOutputTensor, "', '",
                                                     kShapTensor, "'"));
    }
    out.names.push_back(o.name());
  }
  if (out.names.empty()) {
    out.names.push_back(kOutputTensor);
    out.prediction = true;
  }
  for (const auto& [key, p] : request.parameters()) {
    using P = inference::InferParameter;
    if (key == "predict_proba" || key == "output_class") {
      if (p.parameter_choice_case() != P::kBoolParam) {
        return absl::InvalidArgumentError(absl::StrCat("request parameter '", key,
                                                       "' must be a bool"));
      }
      (key == "predict_proba" ? out.predict_proba : out.output_class) = p.bool_param();
    } else if (key == "threshold") {
      if (p.parameter_choice_case() == P::kDoubleParam) {
        out.threshold = p.double_param();
      } else if (p.parameter_choice_case() == P::kInt64Param) {
        out.threshold = static_cast<double>(p.int64_param());
      } else if (double v; p.parameter_choice_case() == P::kStringParam &&
                           absl::SimpleAtod(p.string_param(), &v)) {
        out.threshold = v;  // tritonclient.grpc sends no double parameters: "0.3" is accepted
      } else {
        return absl::InvalidArgumentError(
            "request parameter 'threshold' must be a number (or a string holding one)");
      }
      if (!(*out.threshold >= 0 && *out.threshold <= 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("request parameter 'threshold' ", *out.threshold, " is outside [0, 1]"));
      }
    }
  }
  return out;
}

absl::StatusOr<ExplainChoice> ExplainChoiceFromKserve(const inference::ModelInferRequest& request) {
  ExplainChoice c;
  if (absl::Status s = StringParameter(request, "method", &ParseExplainMethod, &c.method);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          StringParameter(request, "output_space", &ParseOutputSpace, &c.output_space);
      !s.ok()) {
    return s;
  }
  return c;
}

absl::StatusOr<PredictionLayout> ResolvePredictionLayout(const Forest& forest,
                                                         const KserveOutputs& outputs) {
  using Form = PredictionLayout::Form;
  const bool binary = BinaryProbabilities(forest);
  const bool softmax = forest.objective.link == Link::kSoftmax;
  const bool argmax = forest.objective.link == Link::kArgmax;
  PredictionLayout layout;
  layout.width = forest.PredictionWidth();
  layout.form = binary ? Form::kProbabilities : Form::kPrediction;
  auto refuse = [&](absl::string_view option, absl::string_view needs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request parameter ", option, " needs ", needs, "; this model's link is ",
        LinkName(forest.objective.link), " with ", forest.num_outputs, " output(s)"));
  };
  if (outputs.predict_proba.value_or(false)) {
    if (!binary && !softmax) return refuse("predict_proba", "a binary logistic or softmax model");
    layout.form = Form::kProbabilities;
  } else if (outputs.predict_proba.has_value() || outputs.output_class.has_value()) {
    // FIL: without predict_proba, output_class (default true) gives the class, false the value.
    if (outputs.output_class.value_or(true)) {
      if (!binary && !softmax && !argmax) {
        return refuse("output_class", "a classifier (binary logistic, softmax or multi:softmax)");
      }
      layout.form = Form::kClass;
    } else {
      layout.form = Form::kPrediction;
    }
  }
  if (outputs.threshold.has_value()) {
    if (layout.form != Form::kClass || !binary) {
      return refuse("threshold", "the class output (output_class, predict_proba false) of a "
                                 "binary classifier");
    }
    layout.threshold = static_cast<float>(*outputs.threshold);
  }
  if (layout.form == Form::kClass) layout.width = 1;
  if (layout.form == Form::kProbabilities) layout.width = binary ? 2 : forest.num_outputs;
  return layout;
}

std::vector<int64_t> KservePredictionShape(const Forest& forest, int64_t rows) {
  return {rows, ResolvePredictionLayout(forest, KserveOutputs())->width};
}

std::vector<int64_t> KserveShapShape(const Forest& forest, int64_t rows) {
  if (forest.num_outputs == 1) return {rows, forest.num_features + 1};
  return {rows, forest.num_outputs, forest.num_features + 1};
}

void EncodeFloats(const float* values, int64_t count, std::string* raw) {
  raw->resize(static_cast<size_t>(count) * sizeof(float));
  if (count > 0) std::memcpy(raw->data(), values, raw->size());
}

bool KservePredictionIsEngineOutput(const Forest& forest, const PredictionLayout& layout) {
  return layout.form == PredictionLayout::Form::kPrediction ||
         (layout.form == PredictionLayout::Form::kProbabilities && !BinaryProbabilities(forest)) ||
         forest.objective.link == Link::kArgmax;  // already the values, or the class index
}

void WriteKservePrediction(const Forest& forest, const PredictionLayout& layout,
                           const float* prediction, int64_t rows, char* out) {
  const int64_t width = forest.PredictionWidth();
  if (KservePredictionIsEngineOutput(forest, layout)) {
    if (rows * width > 0) {
      std::memcpy(out, prediction, static_cast<size_t>(rows * width) * sizeof(float));
    }
    return;
  }
  const bool binary = BinaryProbabilities(forest);
  auto put = [out](int64_t i, float v) { std::memcpy(out + i * sizeof(float), &v, sizeof(v)); };
  for (int64_t r = 0; r < rows; ++r) {
    const float* p = prediction + r * width;
    if (layout.form == PredictionLayout::Form::kProbabilities) {  // binary: [1-p, p]
      put(2 * r, 1.0f - p[0]);
      put(2 * r + 1, p[0]);
    } else if (binary) {
      put(r, p[0] > layout.threshold ? 1.0f : 0.0f);
    } else {
      put(r, static_cast<float>(std::max_element(p, p + width) - p));  // first of equal maxima
    }
  }
}

void EncodeKservePrediction(const Forest& forest, const PredictionLayout& layout,
                            const float* prediction, int64_t rows, std::string* raw) {
  raw->resize(static_cast<size_t>(rows * layout.width) * sizeof(float));
  if (!raw->empty()) WriteKservePrediction(forest, layout, prediction, rows, raw->data());
}

void EncodeKservePrediction(const Forest& forest, const float* prediction, int64_t rows,
                            std::string* raw) {
  EncodeKservePrediction(forest, *ResolvePredictionLayout(forest, KserveOutputs()), prediction,
                         rows, raw);
}

void EncodeKserveClasses(const float* values, int64_t rows, int64_t width, int64_t k,
                         std::string* raw) {
  k = std::min(k, width);
  raw->clear();
  std::vector<int64_t> order(static_cast<size_t>(width));
  for (int64_t r = 0; r < rows; ++r) {
    const float* v = values + r * width;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [v](int64_t a, int64_t b) {
      return v[a] != v[b] ? v[a] > v[b] : a < b;
    });
    for (int64_t i = 0; i < k; ++i) {
      const std::string element = absl::StrFormat("%f:%d", v[order[i]], order[i]);
      const uint32_t length = static_cast<uint32_t>(element.size());
      raw->append(reinterpret_cast<const char*>(&length), sizeof(length));
      raw->append(element);
    }
  }
}

void FillKserveModelMetadata(const registry::ModelVersion& model,
                             const registry::ModelStatus& status,
                             inference::ModelMetadataResponse* out) {
  const Forest& f = model.forest();
  out->set_name(model.name);
  for (const registry::VersionStatus& v : status.versions) {
    if (v.serving) out->add_versions(std::to_string(v.version));
  }
  out->set_platform("grove");
  auto* in = out->add_inputs();
  in->set_name(kInputTensor);
  in->set_datatype("FP32");
  in->add_shape(-1);
  in->add_shape(f.num_features);
  // JSON arrays in string parameters: KServe parameters are scalars, and names may hold commas.
  if (!f.feature_names.empty()) {
    (*in->mutable_parameters())["feature_names"].set_string_param(
        nlohmann::json(f.feature_names).dump());
  }
  if (!f.feature_types.empty()) {
    (*in->mutable_parameters())["feature_types"].set_string_param(
        nlohmann::json(f.feature_types).dump());
  }
  auto* o0 = out->add_outputs();
  o0->set_name(kOutputTensor);
  o0->set_datatype("FP32");
  for (int64_t d : KservePredictionShape(f, -1)) o0->add_shape(d);
  if (model.servable->Available(Operation::kExplain).ok()) {
    auto* shap = out->add_outputs();
    shap->set_name(kShapTensor);
    shap->set_datatype("FP32");
    for (int64_t d : KserveShapShape(f, -1)) shap->add_shape(d);
  }
}

}  // namespace grove::server
