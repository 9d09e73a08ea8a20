#include "server/kserve/kserve_convert.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/model/double_rows.h"
#include "core/servable/result_columns.h"
#include "server/kserve/kserve_columns.h"
#include "nlohmann/json.hpp"

namespace grove::server {
namespace {

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
  if (request.inputs_size() != 1 || request.inputs(0).name() != kInputTensor) {
    // One tensor per feature (kserve_columns.h).
    KserveInput out;
    int64_t rows = 0;
    if (absl::Status s = ParseKserveColumns(model, request, received_raw, &rows, &out.owned);
        !s.ok()) {
      return s;
    }
    out.rows = MakeRowsView(out.owned.data(), rows, model.forest().num_features);
    return out;
  }
  const auto& in = request.inputs(0);
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
    // The doubles are read where they lie (a misaligned raw buffer a row at a time) and
    // converted once into the float rows, the only copy made before memory is reserved.
    if (raw && raw_bytes.size() % sizeof(double) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("raw input of ", raw_bytes.size(),
                                                     " bytes is not a whole number of FP64"));
    }
    const int64_t count = raw ? static_cast<int64_t>(raw_bytes.size() / sizeof(double))
                              : in.contents().fp64_contents_size();
    if (absl::Status s = CheckShape(model, rows, cols, count); !s.ok()) return s;
    out.owned.resize(static_cast<size_t>(count));
    if (raw) {
      ConvertRawDoubles(model.forest(), raw_bytes, rows, out.owned.data());
    } else {
      DoubleRowConverter(model.forest())
          .ConvertRows(in.contents().fp64_contents().data(), rows, out.owned.data());
    }
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
    if (key == "predict_proba" || key == "output_class" || key == "residuals") {
      if (p.parameter_choice_case() != P::kBoolParam) {
        return absl::InvalidArgumentError(absl::StrCat("request parameter '", key,
                                                       "' must be a bool"));
      }
      if (key == "residuals") {
        out.residuals = p.bool_param();
      } else {
        (key == "predict_proba" ? out.predict_proba : out.output_class) = p.bool_param();
      }
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
  if (out.residuals && !out.shap) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request parameter 'residuals' says how far the explanation is from additivity; ask for "
        "the output '", kShapTensor, "' with it"));
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
  if (absl::Status s =
          StringParameter(request, "attribution", &ParseAttribution, &c.attribution);
      !s.ok()) {
    return s;
  }
  return c;
}

absl::StatusOr<FeatureGroupsPtr> GroupsFromKserve(const registry::ModelVersion& model,
                                                  const inference::ModelInferRequest& request) {
  auto it = request.parameters().find("groups");
  if (it == request.parameters().end()) return RequestGroups(model, {});
  if (it->second.parameter_choice_case() != inference::InferParameter::kStringParam) {
    return absl::InvalidArgumentError(
        "request parameter 'groups' must be a string holding a JSON object of groups");
  }
  absl::StatusOr<std::vector<GroupSpec>> declared =
      ParseFeatureGroupsJson(it->second.string_param(), "request parameter 'groups'");
  if (!declared.ok()) return declared.status();
  if (declared->empty()) {
    return absl::InvalidArgumentError("request parameter 'groups' declares no group");
  }
  return RequestGroups(model, *declared);
}

std::string KserveGroupsParameter(const FeatureGroups& groups) {
  nlohmann::json columns = nlohmann::json::array();
  for (int g = 0; g < groups.num_groups(); ++g) {
    columns.push_back({{"name", groups.names[g]}, {"features", groups.members[g]}});
  }
  return columns.dump();
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

std::vector<int64_t> KserveShapShape(const Forest& forest, int64_t rows,
                                     const FeatureGroups* groups) {
  const int64_t columns = NumPlayers(forest.num_features, groups) + 1;
  if (forest.num_outputs == 1) return {rows, columns};
  return {rows, forest.num_outputs, columns};
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
  // {"feature name": [categories in code order]} for the features whose categories the model
  // file records as names or numbers, and {"feature name": [hashes in code order]} for those it
  // records as hashes of their names (CatBoost: grove.v1 FeatureCategories.hashes says how a name
  // is hashed); none: no parameter.
  nlohmann::json categories = nlohmann::json::object();
  nlohmann::json hashes = nlohmann::json::object();
  for (const NamedCategories& c : RecordedCategories(f)) {
    if (c.categories->hashed()) {
      hashes[c.name] = c.categories->hashes;
    } else {
      categories[c.name] = c.categories->strings.empty() ? nlohmann::json(c.categories->numbers)
                                                         : nlohmann::json(c.categories->strings);
    }
  }
  for (auto& [key, value] : {std::pair{"categories", &categories},
                             std::pair{"category_hashes", &hashes}}) {
    if (value->empty()) continue;
    (*in->mutable_parameters())[key].set_string_param(
        value->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  auto* o0 = out->add_outputs();
  o0->set_name(kOutputTensor);
  o0->set_datatype("FP32");
  for (int64_t d : KservePredictionShape(f, -1)) o0->add_shape(d);
  if (model.servable->Available(Operation::kExplain).ok()) {
    auto* shap = out->add_outputs();
    shap->set_name(kShapTensor);
    shap->set_datatype("FP32");
    for (int64_t d : KserveShapShape(f, -1, model.groups.get())) shap->add_shape(d);
    // The model's groups.json: the players of its values unless a request declares its own.
    if (model.groups != nullptr) {
      (*shap->mutable_parameters())["groups"].set_string_param(
          KserveGroupsParameter(*model.groups));
    }
  }
}

}  // namespace grove::server
