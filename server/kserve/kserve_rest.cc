#include "server/kserve/kserve_rest.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "simdjson.h"

namespace grove::server {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

absl::Status Invalid(absl::string_view what) { return absl::InvalidArgumentError(what); }

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Every key of `o` once, and only keys in `allowed`.
absl::Status CheckKeys(object o, std::initializer_list<absl::string_view> allowed,
                       absl::string_view where) {
  absl::flat_hash_set<absl::string_view> seen;
  for (auto field : o) {
    const absl::string_view key = Sv(field.key);
    if (!seen.insert(key).second) {
      return Invalid(absl::StrCat(where, " has the key '", key, "' twice"));
    }
    bool known = false;
    for (absl::string_view a : allowed) known |= a == key;
    if (!known) return Invalid(absl::StrCat(where, " has an unknown field '", key, "'"));
  }
  return absl::OkStatus();
}

absl::Status ParseParameters(element e, absl::string_view where,
                             google::protobuf::Map<std::string, inference::InferParameter>* out) {
  object o;
  if (e.get_object().get(o) != simdjson::SUCCESS) {
    return Invalid(absl::StrCat(where, ".parameters is not an object"));
  }
  absl::flat_hash_set<absl::string_view> seen;
  for (auto field : o) {
    const std::string key(field.key);
    if (!seen.insert(Sv(field.key)).second) {
      return Invalid(absl::StrCat(where, ".parameters has the key '", key, "' twice"));
    }
    inference::InferParameter& p = (*out)[key];
    switch (field.value.type()) {
      case element_type::BOOL: p.set_bool_param(bool(field.value)); break;
      case element_type::INT64: p.set_int64_param(int64_t(field.value)); break;
      case element_type::UINT64: p.set_uint64_param(uint64_t(field.value)); break;
      case element_type::DOUBLE: p.set_double_param(double(field.value)); break;
      case element_type::STRING: p.set_string_param(std::string(std::string_view(field.value)));
        break;
      case element_type::OBJECT:
        // Feature groups may be given as the JSON object itself: kept as its text, as the
        // gRPC protocol carries it in a string.
        if (key == "groups") {
          p.set_string_param(simdjson::minify(field.value));
          break;
        }
        [[fallthrough]];
      default:
        return Invalid(absl::StrCat(where, ".parameters.", key,
                                    " is not a bool, number or string"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> NonNegativeInt(element e, absl::string_view where) {
  if (e.type() == element_type::INT64 && int64_t(e) >= 0) return int64_t(e);
  if (e.type() == element_type::UINT64 &&
      uint64_t(e) <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(uint64_t(e));
  }
  return Invalid(absl::StrCat(where, " is not a non-negative integer"));
}

// Calls `add` on each value of `e` (a value, or arrays of them nested to any depth the parser
// allows) in row-major order, counting them in *count; INVALID_ARGUMENT (`too_many`) instead of a
// value past the `limit`-th.
template <typename Add>
absl::Status ForEachValue(element e, int64_t limit, const std::string& too_many, int64_t* count,
                          const Add& add) {
  if (e.type() == element_type::ARRAY) {
    for (element x : e.get_array()) {
      if (absl::Status s = ForEachValue(x, limit, too_many, count, add); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (*count >= limit) return Invalid(too_many);
  ++*count;
  return add(e);
}

// Appends the numbers of `e` (a number, null = missing, or arrays of them) in row-major order;
// INVALID_ARGUMENT (`too_many`) before `out` would hold more than `limit` numbers.
template <typename T>
absl::Status AppendData(element e, absl::string_view where, int64_t limit,
                        const std::string& too_many, google::protobuf::RepeatedField<T>* out) {
  int64_t count = out->size();
  return ForEachValue(e, limit, too_many, &count, [&](element v) -> absl::Status {
    switch (v.type()) {
      case element_type::DOUBLE: out->Add(static_cast<T>(double(v))); return absl::OkStatus();
      case element_type::INT64: out->Add(static_cast<T>(int64_t(v))); return absl::OkStatus();
      case element_type::UINT64: out->Add(static_cast<T>(uint64_t(v))); return absl::OkStatus();
      case element_type::NULL_VALUE:
        out->Add(std::numeric_limits<T>::quiet_NaN());
        return absl::OkStatus();
      default:
        return Invalid(absl::StrCat(where, ".data holds a value that is not a number or null"));
    }
  });
}

// One value of AppendOtherData.
absl::Status AppendOtherValue(element e, absl::string_view datatype, absl::string_view where,
                              inference::InferTensorContents* out) {
  if (datatype == "BYTES") {
    if (e.type() == element_type::NULL_VALUE) {
      out->add_bytes_contents();
      return absl::OkStatus();
    }
    std::string_view text;
    if (e.get(text) != simdjson::SUCCESS) {
      return Invalid(absl::StrCat(where, ".data holds a value that is not a string (BYTES)"));
    }
    out->add_bytes_contents(std::string(text));
    return absl::OkStatus();
  }
  if (datatype == "BOOL") {
    bool b;
    if (e.get(b) != simdjson::SUCCESS) {
      return Invalid(absl::StrCat(where, ".data holds a value that is not true or false (BOOL)"));
    }
    out->add_bool_contents(b);
    return absl::OkStatus();
  }
  const bool is_unsigned = datatype[0] == 'U';
  const bool wide = absl::EndsWith(datatype, "64");
  int64_t i = 0;
  uint64_t u = 0;
  bool fits = false;
  if (e.type() == element_type::INT64) {
    i = int64_t(e);
    u = static_cast<uint64_t>(i);
    fits = is_unsigned ? i >= 0 && (wide || u <= std::numeric_limits<uint32_t>::max())
                       : wide || (i >= std::numeric_limits<int32_t>::min() &&
                                  i <= std::numeric_limits<int32_t>::max());
  } else if (e.type() == element_type::UINT64) {
    u = uint64_t(e);
    fits = is_unsigned && wide;
  }
  if (!fits) {
    return Invalid(absl::StrCat(where, ".data holds a value that is not an integer of ", datatype,
                                "'s range"));
  }
  if (datatype == "INT64") {
    out->add_int64_contents(i);
  } else if (datatype == "UINT64") {
    out->add_uint64_contents(u);
  } else if (is_unsigned) {
    out->add_uint_contents(static_cast<uint32_t>(u));
  } else {
    out->add_int_contents(static_cast<int32_t>(i));
  }
  return absl::OkStatus();
}

// AppendData for the datatypes whose JSON values are not numbers-or-null: BYTES (strings; null is
// the empty string, a missing value), BOOL (true / false), the integer types (integers within the
// contents field's range; null is refused: integers have no missing value).
absl::Status AppendOtherData(element e, absl::string_view datatype, absl::string_view where,
                             int64_t limit, const std::string& too_many,
                             inference::InferTensorContents* out, int64_t* count) {
  return ForEachValue(e, limit, too_many, count,
                      [&](element v) { return AppendOtherValue(v, datatype, where, out); });
}

// One input tensor; its binary size (-1: its data is in the JSON) in *binary_size. Its JSON data
// may hold at most `*values_left` numbers (and no more than its shape declares); what it holds is
// taken off.
absl::Status ParseInput(element e, int index,
                        inference::ModelInferRequest::InferInputTensor* in,
                        int64_t* binary_size, int64_t* values_left) {
  const std::string where = absl::StrCat("inputs[", index, "]");
  object o;
  if (e.get_object().get(o) != simdjson::SUCCESS) return Invalid(where + " is not an object");
  if (absl::Status s = CheckKeys(o, {"name", "shape", "datatype", "parameters", "data"}, where);
      !s.ok()) {
    return s;
  }
  std::string_view name, datatype;
  if (o["name"].get(name) != simdjson::SUCCESS) return Invalid(where + ".name: a string is needed");
  if (o["datatype"].get(datatype) != simdjson::SUCCESS) {
    return Invalid(where + ".datatype: a string is needed");
  }
  in->set_name(std::string(name));
  in->set_datatype(std::string(datatype));
  simdjson::dom::array shape;
  if (o["shape"].get(shape) != simdjson::SUCCESS) {
    return Invalid(where + ".shape: an array of integers is needed");
  }
  for (element d : shape) {
    absl::StatusOr<int64_t> v = NonNegativeInt(d, where + ".shape[]");
    if (!v.ok()) return v.status();
    in->add_shape(*v);
  }
  element params;
  if (o["parameters"].get(params) == simdjson::SUCCESS) {
    if (absl::Status s = ParseParameters(params, where, in->mutable_parameters()); !s.ok()) return s;
  }
  *binary_size = -1;
  if (auto it = in->parameters().find("binary_data_size"); it != in->parameters().end()) {
    const inference::InferParameter& p = it->second;
    if (p.parameter_choice_case() == inference::InferParameter::kInt64Param &&
        p.int64_param() >= 0) {
      *binary_size = p.int64_param();
    } else if (p.parameter_choice_case() == inference::InferParameter::kUint64Param &&
               p.uint64_param() <= uint64_t{1} << 62) {
      *binary_size = static_cast<int64_t>(p.uint64_param());
    } else {
      return Invalid(where + ".parameters.binary_data_size is not a non-negative integer");
    }
    in->mutable_parameters()->erase("binary_data_size");
  }
  element data;
  const bool has_data = o["data"].get(data) == simdjson::SUCCESS;
  const bool shared = in->parameters().contains("shared_memory_region");
  if (has_data + (*binary_size >= 0) + shared != 1) {
    return Invalid(absl::StrCat(
        where, " has ", has_data + (*binary_size >= 0) + shared == 0 ? "none" : "more than one",
        " of data, binary_data_size and shared_memory_region; it needs exactly one"));
  }
  if (!has_data) return absl::OkStatus();
  // The datatypes groved reads (input__0: FP32, FP64; a feature's column also BYTES, BOOL and the
  // integers); another type is refused by the input check with the datatype in its message.
  int64_t declared = 1;  // the shape's product, saturated at the bound
  for (int64_t d : in->shape()) {
    declared = d != 0 && declared > *values_left / d ? *values_left + 1 : declared * d;
  }
  const int64_t limit = std::min(declared, *values_left);
  const std::string too_many =
      declared <= *values_left
          ? absl::StrCat(where, ".data holds more than the ", declared,
                         " values its shape declares")
          : absl::StrCat(where, ".data: the request holds more than the ", *values_left,
                         " more values this model takes in a request (max_request_rows x "
                         "features)");
  auto append = [&](auto* out) -> absl::Status {
    if (absl::Status s = AppendData(data, where, limit, too_many, out); !s.ok()) return s;
    *values_left -= out->size();
    return absl::OkStatus();
  };
  if (datatype == "FP32") return append(in->mutable_contents()->mutable_fp32_contents());
  if (datatype == "FP64") return append(in->mutable_contents()->mutable_fp64_contents());
  static constexpr absl::string_view kOther[] = {"BYTES", "BOOL", "INT8", "INT16", "INT32",
                                                 "INT64", "UINT8", "UINT16", "UINT32", "UINT64"};
  if (std::find(std::begin(kOther), std::end(kOther), Sv(datatype)) == std::end(kOther)) {
    return absl::OkStatus();
  }
  int64_t count = 0;
  if (absl::Status s = AppendOtherData(data, Sv(datatype), where, limit, too_many,
                                       in->mutable_contents(), &count);
      !s.ok()) {
    return s;
  }
  *values_left -= count;
  return absl::OkStatus();
}

absl::Status ParseOutput(element e, int index,
                         inference::ModelInferRequest::InferRequestedOutputTensor* out) {
  const std::string where = absl::StrCat("outputs[", index, "]");
  object o;
  if (e.get_object().get(o) != simdjson::SUCCESS) return Invalid(where + " is not an object");
  if (absl::Status s = CheckKeys(o, {"name", "parameters"}, where); !s.ok()) return s;
  std::string_view name;
  if (o["name"].get(name) != simdjson::SUCCESS) return Invalid(where + ".name: a string is needed");
  out->set_name(std::string(name));
  element params;
  if (o["parameters"].get(params) == simdjson::SUCCESS) {
    return ParseParameters(params, where, out->mutable_parameters());
  }
  return absl::OkStatus();
}

bool BoolParam(const google::protobuf::Map<std::string, inference::InferParameter>& params,
               const std::string& key, bool fallback) {
  auto it = params.find(key);
  if (it == params.end() ||
      it->second.parameter_choice_case() != inference::InferParameter::kBoolParam) {
    return fallback;
  }
  return it->second.bool_param();
}

void AppendNumber(float v, std::string* out) {
  if (!std::isfinite(v)) {
    out->append("null");
    return;
  }
  char buf[32];
  char* end = std::to_chars(buf, buf + sizeof(buf), static_cast<double>(v),
                            std::chars_format::general, 9).ptr;
  out->append(buf, static_cast<size_t>(end - buf));
}

nlohmann::json TensorMetadataJson(
    const inference::ModelMetadataResponse::TensorMetadata& t) {
  nlohmann::json j = {{"name", t.name()}, {"datatype", t.datatype()},
                      {"shape", std::vector<int64_t>(t.shape().begin(), t.shape().end())}};
  if (!t.parameters().empty()) {
    nlohmann::json p = nlohmann::json::object();
    for (const auto& [k, v] : t.parameters()) p[k] = v.string_param();
    j["parameters"] = p;
  }
  return j;
}

}  // namespace

absl::StatusOr<RestRoute> ParseRestRoute(absl::string_view method, absl::string_view path) {
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  RestRoute r;
  auto want = [&](absl::string_view m, RestOp op, const char* name) -> absl::StatusOr<RestRoute> {
    if (method != m) {
      return absl::InvalidArgumentError(absl::StrCat(path, " takes ", m, ", not ", method));
    }
    r.op = op;
    r.method = name;
    return r;
  };
  if (!parts.empty() && parts[0] == "v2") {
    if (parts.size() == 1) return want("GET", RestOp::kServerMetadata, "ServerMetadata");
    if (parts.size() == 3 && parts[1] == "models" && parts[2] == "stats") {
      return want("GET", RestOp::kModelStatistics, "ModelStatistics");  // every model
    }
    if (parts.size() == 3 && parts[1] == "health" && parts[2] == "live") {
      return want("GET", RestOp::kServerLive, "ServerLive");
    }
    if (parts.size() == 3 && parts[1] == "health" && parts[2] == "ready") {
      return want("GET", RestOp::kServerReady, "ServerReady");
    }
    if (parts.size() >= 3 && parts[1] == "models") {
      r.model = std::string(parts[2]);
      size_t next = 3;
      if (parts.size() >= 5 && parts[3] == "versions") {
        r.version = std::string(parts[4]);
        next = 5;
      }
      if (parts.size() == next) return want("GET", RestOp::kModelMetadata, "ModelMetadata");
      if (parts.size() == next + 1 && parts[next] == "ready") {
        return want("GET", RestOp::kModelReady, "ModelReady");
      }
      if (parts.size() == next + 1 && parts[next] == "infer") {
        return want("POST", RestOp::kModelInfer, "ModelInfer");
      }
      if (parts.size() == next + 1 && parts[next] == "config") {
        return want("GET", RestOp::kModelConfig, "ModelConfig");
      }
      if (parts.size() == next + 1 && parts[next] == "stats") {
        return want("GET", RestOp::kModelStatistics, "ModelStatistics");
      }
    }
    if (parts.size() == 3 && parts[1] == "repository" && parts[2] == "index") {
      return want("POST", RestOp::kRepositoryIndex, "RepositoryIndex");
    }
    if (parts.size() == 5 && parts[1] == "repository" && parts[2] == "models" &&
        (parts[4] == "load" || parts[4] == "unload")) {
      r.model = std::string(parts[3]);
      return parts[4] == "load" ? want("POST", RestOp::kRepositoryModelLoad, "RepositoryModelLoad")
                                : want("POST", RestOp::kRepositoryModelUnload,
                                       "RepositoryModelUnload");
    }
    // Shared memory: /v2/{system,cuda}sharedmemory[/region/NAME]/ACTION.
    if ((parts.size() == 3 || (parts.size() == 5 && parts[2] == "region")) &&
        (parts[1] == "systemsharedmemory" || parts[1] == "cudasharedmemory")) {
      const absl::string_view action = parts.back();
      if (parts.size() == 5) r.region = std::string(parts[3]);
      const bool system = parts[1] == "systemsharedmemory";
      if (action == "status") {
        return system ? want("GET", RestOp::kSystemSharedMemoryStatus, "SystemSharedMemoryStatus")
                      : want("GET", RestOp::kCudaSharedMemory, "CudaSharedMemoryStatus");
      }
      if (action == "register" && parts.size() == 5) {
        return system ? want("POST", RestOp::kSystemSharedMemoryRegister,
                             "SystemSharedMemoryRegister")
                      : want("POST", RestOp::kCudaSharedMemory, "CudaSharedMemoryRegister");
      }
      if (action == "unregister") {
        return system ? want("POST", RestOp::kSystemSharedMemoryUnregister,
                             "SystemSharedMemoryUnregister")
                      : want("POST", RestOp::kCudaSharedMemory, "CudaSharedMemoryUnregister");
      }
    }
  }
  return absl::NotFoundError(absl::StrCat(
      method, " ", path, " is not a route groved serves; it serves KServe v2 REST: GET /v2, "
      "/v2/health/live, /v2/health/ready, /v2/models/NAME[/versions/V][/ready|/config|/stats], "
      "/v2/models/stats, /v2/systemsharedmemory[/region/NAME]/status; POST "
      "/v2/models/NAME[/versions/V]/infer, /v2/repository/index, "
      "/v2/repository/models/NAME/load|unload, /v2/systemsharedmemory/region/NAME/register, "
      "/v2/systemsharedmemory[/region/NAME]/unregister"));
}

namespace {

absl::Status ParseInferBody(absl::string_view body, int64_t header_length, int64_t max_values,
                            inference::ModelInferRequest* request) {
  if (header_length > static_cast<int64_t>(body.size())) {
    return Invalid(absl::StrCat(kInferHeaderLength, " is ", header_length, " but the body has ",
                                body.size(), " bytes"));
  }
  const absl::string_view json = header_length >= 0 ? body.substr(0, header_length) : body;
  absl::string_view binary = header_length >= 0 ? body.substr(header_length) : absl::string_view();
  simdjson::dom::parser parser;
  element root;
  if (auto error = parser.parse(json.data(), json.size()).get(root); error) {
    return Invalid(absl::StrCat("the body is not valid JSON (", simdjson::error_message(error),
                                ")"));
  }
  object o;
  if (root.get_object().get(o) != simdjson::SUCCESS) return Invalid("the body is not an object");
  if (absl::Status s = CheckKeys(o, {"id", "parameters", "inputs", "outputs"}, "the request");
      !s.ok()) {
    return s;
  }
  element e;
  if (o["id"].get(e) == simdjson::SUCCESS) {
    std::string_view id;
    if (e.get(id) != simdjson::SUCCESS) return Invalid("id is not a string");
    request->set_id(std::string(id));
  }
  if (o["parameters"].get(e) == simdjson::SUCCESS) {
    if (absl::Status s = ParseParameters(e, "the request", request->mutable_parameters()); !s.ok()) {
      return s;
    }
  }
  simdjson::dom::array inputs;
  if (o["inputs"].get(inputs) != simdjson::SUCCESS) return Invalid("inputs: an array is needed");
  int i = 0;
  bool any_binary = false, any_json = false;
  int64_t values_left = std::clamp<int64_t>(max_values, 0, int64_t{1} << 62);
  for (element in : inputs) {
    int64_t size = -1;
    if (absl::Status s = ParseInput(in, i, request->add_inputs(), &size, &values_left); !s.ok()) {
      return s;
    }
    if (size >= 0) {
      if (static_cast<int64_t>(binary.size()) < size) {
        return Invalid(absl::StrCat("inputs[", i, "] has binary_data_size ", size, " but ",
                                    binary.size(), " bytes of binary data are left"));
      }
      request->add_raw_input_contents(std::string(binary.substr(0, size)));
      binary.remove_prefix(size);
    }
    (size >= 0 ? any_binary : any_json) = true;
    ++i;
  }
  if (any_binary && any_json) {
    return Invalid("some inputs are binary and some JSON; groved reads all of one form");
  }
  if (!binary.empty()) {
    return Invalid(absl::StrCat(binary.size(), " bytes after the JSON part belong to no input ("
                                "the inputs' binary_data_size do not add up to the body)"));
  }
  simdjson::dom::array outputs;
  if (o["outputs"].get(e) == simdjson::SUCCESS) {
    if (e.get(outputs) != simdjson::SUCCESS) return Invalid("outputs is not an array");
    i = 0;
    for (element out : outputs) {
      if (absl::Status s = ParseOutput(out, i++, request->add_outputs()); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseRestInferRequest(absl::string_view body, int64_t header_length,
                                   int64_t max_values, inference::ModelInferRequest* request) {
  absl::Status s = ParseInferBody(body, header_length, max_values, request);
  if (s.ok()) return s;
  return absl::InvalidArgumentError(absl::StrCat("infer request: ", s.message()));
}

std::string RestInferResponse(const inference::ModelInferRequest& request,
                              const inference::ModelInferResponse& response,
                              int64_t* header_length) {
  const bool binary_default = BoolParam(request.parameters(), "binary_data_output", false);
  std::string json = "{\"model_name\":";
  json += nlohmann::json(response.model_name()).dump();
  json += ",\"model_version\":" + nlohmann::json(response.model_version()).dump();
  if (!response.id().empty()) json += ",\"id\":" + nlohmann::json(response.id()).dump();
  json += ",\"outputs\":[";
  std::string binary;
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& out = response.outputs(i);
    bool as_binary = binary_default;
    for (const auto& asked : request.outputs()) {
      if (asked.name() == out.name()) as_binary = BoolParam(asked.parameters(), "binary_data", as_binary);
    }
    bool shared = false;  // in shared memory: no data here
    for (const auto& asked : request.outputs()) {
      if (asked.name() == out.name()) shared = asked.parameters().contains("shared_memory_region");
    }
    const std::string& raw = response.raw_output_contents(i);
    json += i ? ",{" : "{";
    json += "\"name\":" + nlohmann::json(out.name()).dump();
    json += ",\"datatype\":" + nlohmann::json(out.datatype()).dump();
    json += ",\"shape\":" + nlohmann::json(std::vector<int64_t>(out.shape().begin(),
                                                                  out.shape().end())).dump();
    if (shared) {
      json += "}";
      continue;
    }
    // The output's string parameters (treeshap_output's groups), with binary_data_size.
    std::string parameters;
    for (const auto& [key, value] : out.parameters()) {
      if (value.parameter_choice_case() != inference::InferParameter::kStringParam) continue;
      absl::StrAppend(&parameters, parameters.empty() ? "" : ",", nlohmann::json(key).dump(), ":",
                      nlohmann::json(value.string_param()).dump());
    }
    if (as_binary) {
      absl::StrAppend(&json, ",\"parameters\":{", parameters, parameters.empty() ? "" : ",",
                      "\"binary_data_size\":", raw.size(), "}}");
      binary += raw;
      continue;
    }
    if (!parameters.empty()) absl::StrAppend(&json, ",\"parameters\":{", parameters, "}");
    json += ",\"data\":[";
    if (out.datatype() == "BYTES") {  // 4-byte little-endian lengths, each followed by its bytes
      for (size_t at = 0; at + sizeof(uint32_t) <= raw.size();) {
        uint32_t length;
        std::memcpy(&length, raw.data() + at, sizeof(length));
        at += sizeof(length);
        if (json.back() != '[') json.push_back(',');
        json += nlohmann::json(raw.substr(at, length))
                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        at += length;
      }
      json += "]}";
      continue;
    }
    const size_t n = raw.size() / sizeof(float);
    for (size_t k = 0; k < n; ++k) {
      float v;
      std::memcpy(&v, raw.data() + k * sizeof(float), sizeof(float));
      if (k) json.push_back(',');
      AppendNumber(v, &json);
    }
    json += "]}";
  }
  json += "]";
  // Response parameters (residual_arithmetic): string values, keys in order.
  if (!response.parameters().empty()) {
    std::map<std::string, std::string> params;
    for (const auto& [k, v] : response.parameters()) params[k] = v.string_param();
    json += ",\"parameters\":" + nlohmann::json(params).dump();
  }
  json += "}";
  *header_length = binary.empty() ? -1 : static_cast<int64_t>(json.size());
  return json + binary;
}

absl::Status ParseRestRepositoryRequest(absl::string_view body, RestOp op,
                                        inference::RepositoryIndexRequest* index,
                                        inference::RepositoryModelLoadRequest* control) {
  if (body.find_first_not_of(" \t\r\n") == absl::string_view::npos) return absl::OkStatus();
  simdjson::dom::parser parser;
  element root;
  if (auto error = parser.parse(body.data(), body.size()).get(root); error) {
    return absl::InvalidArgumentError(absl::StrCat(
        "repository request: the body is not valid JSON (", simdjson::error_message(error), ")"));
  }
  object o;
  if (root.get_object().get(o) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("repository request: the body is not an object");
  }
  const bool is_index = op == RestOp::kRepositoryIndex;
  absl::Status keys = is_index ? CheckKeys(o, {"ready"}, "the repository index request")
                               : CheckKeys(o, {"parameters"}, "the load/unload request");
  if (!keys.ok()) return keys;
  element e;
  if (is_index && o["ready"].get(e) == simdjson::SUCCESS) {
    bool ready;
    if (e.get(ready) != simdjson::SUCCESS) {
      return absl::InvalidArgumentError("repository request: ready is not a bool");
    }
    index->set_ready(ready);
  }
  if (!is_index && o["parameters"].get(e) == simdjson::SUCCESS) {
    google::protobuf::Map<std::string, inference::InferParameter> params;
    if (absl::Status s = ParseParameters(e, "the load/unload request", &params); !s.ok()) return s;
    for (const auto& [key, p] : params) {
      inference::ModelRepositoryParameter& q = (*control->mutable_parameters())[key];
      switch (p.parameter_choice_case()) {
        case inference::InferParameter::kBoolParam: q.set_bool_param(p.bool_param()); break;
        case inference::InferParameter::kInt64Param: q.set_int64_param(p.int64_param()); break;
        default: q.set_string_param(p.string_param()); break;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ParseRestSharedMemoryRegister(absl::string_view body,
                                           inference::SystemSharedMemoryRegisterRequest* request) {
  auto invalid = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("shared memory register request: ", what));
  };
  simdjson::dom::parser parser;
  element root;
  if (auto error = parser.parse(body.data(), body.size()).get(root); error) {
    return invalid(absl::StrCat("the body is not valid JSON (", simdjson::error_message(error), ")"));
  }
  object o;
  if (root.get_object().get(o) != simdjson::SUCCESS) return invalid("the body is not an object");
  if (absl::Status s = CheckKeys(o, {"key", "offset", "byte_size"}, "the request"); !s.ok()) {
    return invalid(s.message());
  }
  std::string_view key;
  if (o["key"].get(key) != simdjson::SUCCESS) return invalid("key: a string is needed");
  request->set_key(std::string(key));
  element e;
  for (const char* field : {"offset", "byte_size"}) {
    if (o[field].get(e) != simdjson::SUCCESS) {
      if (std::string_view(field) == "offset") continue;  // optional, 0
      return invalid("byte_size: a non-negative integer is needed");
    }
    uint64_t v = 0;
    if (e.type() == element_type::INT64 && int64_t(e) >= 0) {
      v = static_cast<uint64_t>(int64_t(e));
    } else if (e.type() == element_type::UINT64) {
      v = uint64_t(e);
    } else {
      return invalid(absl::StrCat(field, " is not a non-negative integer"));
    }
    if (std::string_view(field) == "offset") {
      request->set_offset(v);
    } else {
      request->set_byte_size(v);
    }
  }
  return absl::OkStatus();
}

std::string RestSystemSharedMemoryStatus(
    const inference::SystemSharedMemoryStatusResponse& response) {
  std::vector<const inference::SystemSharedMemoryStatusResponse::RegionStatus*> regions;
  for (const auto& [name, r] : response.regions()) regions.push_back(&r);
  std::sort(regions.begin(), regions.end(),
            [](const auto* a, const auto* b) { return a->name() < b->name(); });
  nlohmann::json out = nlohmann::json::array();
  for (const auto* r : regions) {
    out.push_back({{"name", r->name()},
                   {"key", r->key()},
                   {"offset", r->offset()},
                   {"byte_size", r->byte_size()}});
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string RestModelConfig(const inference::ModelConfig& config) {
  auto tensors = [](const auto& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : list) {
      out.push_back({{"name", t.name()},
                     {"data_type", inference::DataType_Name(t.data_type())},
                     {"dims", std::vector<int64_t>(t.dims().begin(), t.dims().end())}});
    }
    return out;
  };
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [k, v] : config.parameters()) params[k] = {{"string_value", v.string_value()}};
  return nlohmann::json({{"name", config.name()},
                         {"platform", config.platform()},
                         {"backend", config.backend()},
                         {"max_batch_size", config.max_batch_size()},
                         {"input", tensors(config.input())},
                         {"output", tensors(config.output())},
                         {"parameters", params}})
      .dump();
}

std::string RestModelStatistics(const inference::ModelStatisticsResponse& response) {
  auto duration = [](const inference::StatisticDuration& d) {
    return nlohmann::json({{"count", d.count()}, {"ns", d.ns()}});
  };
  nlohmann::json stats = nlohmann::json::array();
  for (const inference::ModelStatistics& m : response.model_stats()) {
    const inference::InferStatistics& s = m.inference_stats();
    stats.push_back({{"name", m.name()},
                     {"version", m.version()},
                     {"last_inference", m.last_inference()},
                     {"inference_count", m.inference_count()},
                     {"execution_count", m.execution_count()},
                     {"inference_stats", {{"success", duration(s.success())},
                                          {"fail", duration(s.fail())},
                                          {"queue", duration(s.queue())},
                                          {"compute_infer", duration(s.compute_infer())}}}});
  }
  return nlohmann::json({{"model_stats", stats}}).dump();
}

std::string RestRepositoryIndex(const inference::RepositoryIndexResponse& response) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : response.models()) {
    nlohmann::json j = {{"name", m.name()}, {"version", m.version()}, {"state", m.state()}};
    if (!m.reason().empty()) j["reason"] = m.reason();
    out.push_back(j);
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string RestServerMetadata(const inference::ServerMetadataResponse& response) {
  return nlohmann::json({{"name", response.name()},
                         {"version", response.version()},
                         {"extensions", std::vector<std::string>(response.extensions().begin(),
                                                                 response.extensions().end())}})
      .dump();
}

std::string RestModelMetadata(const inference::ModelMetadataResponse& response) {
  nlohmann::json inputs = nlohmann::json::array(), outputs = nlohmann::json::array();
  for (const auto& t : response.inputs()) inputs.push_back(TensorMetadataJson(t));
  for (const auto& t : response.outputs()) outputs.push_back(TensorMetadataJson(t));
  return nlohmann::json({{"name", response.name()},
                         {"versions", std::vector<std::string>(response.versions().begin(),
                                                               response.versions().end())},
                         {"platform", response.platform()},
                         {"inputs", inputs},
                         {"outputs", outputs}})
      .dump();
}

std::string RestError(absl::string_view message) {
  return nlohmann::json({{"error", std::string(message)}})
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int HttpStatus(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted: return 409;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kCancelled: return 499;
    case absl::StatusCode::kUnimplemented: return 501;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

absl::StatusCode CodeOfHttpStatus(int status) {
  switch (status) {
    case 200: return absl::StatusCode::kOk;
    case 400:
    case 411:
    case 413:
    case 414:
    case 415:
    case 431: return absl::StatusCode::kInvalidArgument;
    case 401: return absl::StatusCode::kUnauthenticated;
    case 403: return absl::StatusCode::kPermissionDenied;
    case 404: return absl::StatusCode::kNotFound;
    case 408:
    case 504: return absl::StatusCode::kDeadlineExceeded;
    case 409: return absl::StatusCode::kAborted;
    case 429: return absl::StatusCode::kResourceExhausted;
    case 499: return absl::StatusCode::kCancelled;
    case 501: return absl::StatusCode::kUnimplemented;
    case 503: return absl::StatusCode::kUnavailable;
    case 500: return absl::StatusCode::kInternal;
    default: return absl::StatusCode::kUnknown;
  }
}

}  // namespace grove::server
