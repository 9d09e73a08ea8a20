#include "server/grove_v1/grove_convert.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/model/category_codes.h"
#include "core/model/double_rows.h"
#include "core/servable/result_columns.h"
#include "core/servable/top_k.h"

namespace grove::server {
namespace {

// The grove.v1 name of an attribution: ATTRIBUTION_ and its name in capitals.
std::string AttributionProtoName(Attribution attribution) {
  return absl::AsciiStrToUpper(absl::StrCat("ATTRIBUTION_", AttributionName(attribution)));
}

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

}  // namespace

bool IsRawMatrix(const grove::v1::Matrix& matrix, absl::string_view received_raw_rows) {
  return !received_raw_rows.empty() || !matrix.raw_f32().empty() || !matrix.raw_f64().empty() ||
         matrix.has_shared_memory_f32() || matrix.has_shared_memory_f64();
}

namespace {

// RowsFromMatrix without Matrix.category_columns.
absl::StatusOr<RowsView> NumericRows(const registry::ModelVersion& model,
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

// Matrix.category_columns' codes written into `rows` (matrix.rows() x matrix.cols(), dense).
absl::Status ApplyCategoryColumns(const registry::ModelVersion& model,
                                  const grove::v1::Matrix& matrix, float* rows) {
  const Forest& forest = model.forest();
  if (matrix.category_columns_size() > forest.num_features) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rows.category_columns has ", matrix.category_columns_size(), " entries; the model has ",
        forest.num_features, " features"));
  }
  const InputSchema& schema = model.servable->input_schema();
  std::vector<bool> seen(static_cast<size_t>(forest.num_features), false);
  for (const grove::v1::CategoryColumn& column : matrix.category_columns()) {
    const std::string what = absl::StrCat("rows.category_columns '", column.feature(), "'");
    const int64_t index = schema.FeatureIndex(column.feature());
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is not a feature of model '",
                                                     model.name, "'"));
    }
    const size_t f = static_cast<size_t>(index);
    if (seen[f]) return absl::InvalidArgumentError(absl::StrCat(what, " is given twice"));
    seen[f] = true;
    if (column.names_size() != matrix.rows()) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has ", column.names_size(),
                                                     " names for ", matrix.rows(), " rows"));
    }
    absl::StatusOr<const CategoryCodes*> coder = schema.Coder(static_cast<int64_t>(f));
    if (!coder.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", coder.status().message()));
    }
    std::vector<absl::string_view> values(column.names().begin(), column.names().end());
    if (absl::Status s = (*coder)->CodeColumn(values, rows + f, matrix.cols()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RowsView> RowsFromMatrix(const registry::ModelVersion& model,
                                        const grove::v1::Matrix& matrix,
                                        std::vector<float>* converted,
                                        const serving::SharedMemoryAccess* shared_memory,
                                        serving::SharedMemorySpan* span,
                                        absl::string_view received_raw_rows) {
  absl::StatusOr<RowsView> rows =
      NumericRows(model, matrix, converted, shared_memory, span, received_raw_rows);
  if (!rows.ok() || matrix.category_columns_size() == 0) return rows;
  // The codes are written into rows of our own: the view may point into the message or into
  // shared memory, which are the client's.
  if (rows->data != converted->data()) {
    converted->assign(rows->data, rows->data + rows->rows * rows->cols);
  }
  if (absl::Status s = ApplyCategoryColumns(model, matrix, converted->data()); !s.ok()) return s;
  return MakeRowsView(converted->data(), rows->rows, rows->cols);
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

absl::StatusOr<FeatureGroupsPtr> GroupsFromRequest(const registry::ModelVersion& model,
                                                   const grove::v1::ExplainRequest& request) {
  std::vector<GroupSpec> declared;
  declared.reserve(request.groups_size());
  for (const grove::v1::FeatureGroup& g : request.groups()) {
    GroupSpec spec;
    spec.name = g.name();
    for (const std::string& name : g.features()) spec.members.push_back(FeatureRef{-1, name});
    for (int32_t index : g.feature_indices()) {
      // A negative index names no feature: kept out of range, not taken as a name.
      spec.members.push_back(FeatureRef{index < 0 ? int64_t{INT32_MAX} : index, ""});
    }
    declared.push_back(std::move(spec));
  }
  return RequestGroups(model, declared);
}

void DescribeGroups(const FeatureGroups& groups,
                    google::protobuf::RepeatedPtrField<grove::v1::FeatureGroup>* out) {
  for (int g = 0; g < groups.num_groups(); ++g) {
    grove::v1::FeatureGroup* group = out->Add();
    group->set_name(groups.names[g]);
    for (int32_t f : groups.members[g]) group->add_feature_indices(f);
  }
}

absl::StatusOr<Attribution> AttributionFromProto(grove::v1::Attribution value) {
  // ATTRIBUTION_<NAME> is the core's attribution <name> (AttributionProtoName).
  for (Attribution a : kAttributions) {
    if (grove::v1::Attribution_Name(value) == AttributionProtoName(a)) return a;
  }
  std::string names;
  for (Attribution a : kAttributions) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", AttributionProtoName(a));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown ExplainRequest.attribution ",
                                                 static_cast<int>(value), ": one of ", names));
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
  if (absl::StatusOr<Attribution> a = AttributionFromProto(request.attribution()); a.ok()) {
    c.attribution = *a;
  } else {
    return a.status();
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
  const int size = static_cast<int>(rows * num_outputs * k);
  out->mutable_features()->Resize(size, 0);
  out->mutable_values()->Resize(size, 0.0f);
  TopKFeatures(values, rows, num_outputs, num_features, k, out->mutable_features()->mutable_data(),
               out->mutable_values()->mutable_data());
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
  for (const NamedCategories& c : RecordedCategories(f)) {
    grove::v1::FeatureCategories* fc = out->add_categories();
    fc->set_feature(c.feature);
    fc->set_name(c.name);
    for (const std::string& s : c.categories->strings) fc->add_strings(s);
    for (double v : c.categories->numbers) fc->add_numbers(v);
    for (uint32_t h : c.categories->hashes) fc->add_hashes(h);
  }
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
  if (model.groups != nullptr) DescribeGroups(*model.groups, out->mutable_groups());
}

}  // namespace grove::server
