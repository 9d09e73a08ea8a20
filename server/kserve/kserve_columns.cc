#include "server/kserve/kserve_columns.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/model/category_codes.h"
#include "core/model/double_rows.h"
#include "core/servable/result_columns.h"
#include "server/convert.h"

namespace grove::server {
namespace {

using Tensor = inference::ModelInferRequest::InferInputTensor;

absl::Status Invalid(absl::string_view what) { return absl::InvalidArgumentError(what); }

// A numeric datatype: its raw element size and how one raw element reads as a double.
struct NumericType {
  const char* name;
  size_t size;
  double (*read)(const char* p);
};

template <typename T>
double ReadRaw(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return static_cast<double>(v);
}
double ReadBool(const char* p) { return *p != 0 ? 1.0 : 0.0; }

constexpr NumericType kNumericTypes[] = {
    {"BOOL", 1, &ReadBool},
    {"INT8", 1, &ReadRaw<int8_t>},       {"INT16", 2, &ReadRaw<int16_t>},
    {"INT32", 4, &ReadRaw<int32_t>},     {"INT64", 8, &ReadRaw<int64_t>},
    {"UINT8", 1, &ReadRaw<uint8_t>},     {"UINT16", 2, &ReadRaw<uint16_t>},
    {"UINT32", 4, &ReadRaw<uint32_t>},   {"UINT64", 8, &ReadRaw<uint64_t>},
    {"FP32", 4, &ReadRaw<float>},        {"FP64", 8, &ReadRaw<double>},
};

const NumericType* FindNumeric(absl::string_view datatype) {
  for (const NumericType& t : kNumericTypes) {
    if (datatype == t.name) return &t;
  }
  return nullptr;
}

// The typed contents of `in` for its numeric datatype: how many values, and the i-th as a double.
struct TypedColumn {
  int64_t size = 0;
  std::function<double(int64_t)> at;
};
TypedColumn Typed(const NumericType& type, const inference::InferTensorContents& c) {
  const absl::string_view n = type.name;
  auto column = [](const auto& field) {
    return TypedColumn{field.size(),
                       [&field](int64_t i) { return static_cast<double>(field.Get(static_cast<int>(i))); }};
  };
  if (n == "BOOL") return column(c.bool_contents());
  if (n == "INT64") return column(c.int64_contents());
  if (n == "UINT64") return column(c.uint64_contents());
  if (n == "FP32") return column(c.fp32_contents());
  if (n == "FP64") return column(c.fp64_contents());
  if (n[0] == 'U') return column(c.uint_contents());
  return column(c.int_contents());
}

// Whether `c` holds values in any field other than the one of `datatype` (a client that filled the
// wrong field would otherwise be read as sending none).
bool HasOtherContents(const inference::InferTensorContents& c, absl::string_view field) {
  const std::pair<absl::string_view, int> sizes[] = {
      {"bool", c.bool_contents_size()},   {"int", c.int_contents_size()},
      {"int64", c.int64_contents_size()}, {"uint", c.uint_contents_size()},
      {"uint64", c.uint64_contents_size()}, {"fp32", c.fp32_contents_size()},
      {"fp64", c.fp64_contents_size()},   {"bytes", c.bytes_contents_size()}};
  for (const auto& [name, size] : sizes) {
    if (name != field && size > 0) return true;
  }
  return false;
}

absl::string_view ContentsField(absl::string_view datatype) {
  if (datatype == "BOOL") return "bool";
  if (datatype == "INT64") return "int64";
  if (datatype == "UINT64") return "uint64";
  if (datatype == "FP32") return "fp32";
  if (datatype == "FP64") return "fp64";
  if (datatype == "BYTES") return "bytes";
  return datatype[0] == 'U' ? "uint" : "int";
}

}  // namespace

absl::StatusOr<std::vector<absl::string_view>> SplitKserveBytes(absl::string_view raw,
                                                                int64_t count,
                                                                absl::string_view what) {
  std::vector<absl::string_view> out;
  // Every element takes at least its 4-byte length: a count the bytes cannot hold is refused
  // before anything is reserved.
  if (count < 0 || static_cast<uint64_t>(count) > raw.size() / sizeof(uint32_t)) {
    return Invalid(absl::StrCat(what, ": ", raw.size(), " raw bytes cannot hold ", count,
                                " BYTES elements (each is a 4-byte length and its bytes)"));
  }
  out.reserve(static_cast<size_t>(count));
  size_t at = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (raw.size() - at < sizeof(uint32_t)) {
      return Invalid(absl::StrCat(what, ": the raw bytes end inside the length of element ", i,
                                  " of ", count));
    }
    uint32_t length;
    std::memcpy(&length, raw.data() + at, sizeof(length));  // little-endian hosts only (x86, Arm)
    at += sizeof(length);
    if (length > raw.size() - at) {
      return Invalid(absl::StrCat(what, ": element ", i, " has length ", length, " but only ",
                                  raw.size() - at, " bytes are left"));
    }
    out.push_back(raw.substr(at, length));
    at += length;
  }
  if (at != raw.size()) {
    return Invalid(absl::StrCat(what, ": ", raw.size() - at, " raw bytes after the ", count,
                                " elements its shape declares"));
  }
  return out;
}

absl::Status ParseKserveColumns(const registry::ModelVersion& model,
                                const inference::ModelInferRequest& request,
                                absl::string_view received_raw, int64_t* rows_out,
                                std::vector<float>* out) {
  const Forest& forest = model.forest();
  const int64_t features = forest.num_features;
  const InputSchema& schema = model.servable->input_schema();
  const std::vector<std::string>& names = schema.names();
  const int raw_entries = request.raw_input_contents_size() + (received_raw.empty() ? 0 : 1);
  const bool raw = raw_entries > 0;
  if (raw && raw_entries != request.inputs_size()) {
    return Invalid(absl::StrCat("raw_input_contents has ", raw_entries, " entries for ",
                                request.inputs_size(), " inputs; it needs one per input"));
  }
  auto raw_of = [&](int i) -> absl::string_view {
    if (!received_raw.empty()) return received_raw;  // then the request's only entry
    return request.raw_input_contents(i);
  };
  std::vector<int> input_of(static_cast<size_t>(features), -1);
  int64_t rows = -1;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const Tensor& in = request.inputs(i);
    const int64_t feature = schema.FeatureIndex(in.name());
    if (feature < 0) {
      return Invalid(absl::StrCat(
          "unknown input tensor '", in.name(), "': inputs are one tensor 'input__0' [rows, ",
          features, "] or one tensor per feature named by the model's feature names (",
          absl::StrJoin(names.begin(), names.begin() + std::min<int64_t>(features, 8), ", "),
          features > 8 ? ", ..." : "", ")"));
    }
    if (input_of[static_cast<size_t>(feature)] >= 0) {
      return Invalid(absl::StrCat("input '", in.name(), "' is given twice"));
    }
    input_of[static_cast<size_t>(feature)] = i;
    if (in.shape_size() < 1 || in.shape_size() > 2 || (in.shape_size() == 2 && in.shape(1) != 1)) {
      return Invalid(absl::StrCat("input '", in.name(), "' has shape [",
                                  absl::StrJoin(in.shape(), ", "),
                                  "]; a feature's column is [rows] or [rows, 1]"));
    }
    if (rows >= 0 && in.shape(0) != rows) {
      return Invalid(absl::StrCat("input '", in.name(), "' has ", in.shape(0),
                                  " rows; the inputs before it have ", rows));
    }
    rows = in.shape(0);
    if (in.parameters().contains("shared_memory_region")) {
      return Invalid(absl::StrCat("input '", in.name(), "': a feature's column is read from "
                                  "contents or raw_input_contents, not from shared memory (send "
                                  "'input__0' [rows, F] in shared memory instead)"));
    }
    if (raw && in.has_contents()) {
      return Invalid(absl::StrCat("input '", in.name(), "' has typed contents in a request with "
                                  "raw_input_contents; send all inputs in one form"));
    }
  }
  std::vector<std::string> missing;
  for (int64_t f = 0; f < features; ++f) {
    if (input_of[static_cast<size_t>(f)] < 0) missing.push_back(names[static_cast<size_t>(f)]);
  }
  if (!missing.empty()) {
    const size_t shown = std::min<size_t>(missing.size(), 8);
    return Invalid(absl::StrCat(
        "the request has no input for ", missing.size(), " of the model's ", features,
        " features (", absl::StrJoin(missing.begin(), missing.begin() + shown, ", "),
        missing.size() > shown ? ", ..." : "", "); a columnar request gives every feature"));
  }
  if (absl::Status s = CheckShape(model, rows, features, SaturatingBytes(rows, features, 1));
      !s.ok()) {
    return s;
  }

  // Converted column by column straight into the float rows: no wider copy of the matrix exists
  // before the request's memory is reserved.
  const DoubleRowConverter converter(forest);
  out->assign(static_cast<size_t>(rows * features), 0.0f);
  for (int64_t f = 0; f < features; ++f) {
    const int i = input_of[static_cast<size_t>(f)];
    const Tensor& in = request.inputs(i);
    const std::string what = absl::StrCat("input '", in.name(), "'");
    float* column = out->data() + f;
    const NumericType* type = FindNumeric(in.datatype());
    if (type == nullptr && in.datatype() != "BYTES") {
      return Invalid(absl::StrCat(what, " has datatype ", in.datatype(), "; a feature's column "
                                  "is BYTES (category names), BOOL, INT8-64, UINT8-64, FP32 or "
                                  "FP64"));
    }
    if (in.has_contents() && HasOtherContents(in.contents(), ContentsField(in.datatype()))) {
      return Invalid(absl::StrCat(what, " (", in.datatype(), ") has contents in a field other "
                                  "than ", ContentsField(in.datatype()), "_contents"));
    }
    if (in.datatype() == "BYTES") {
      absl::StatusOr<const CategoryCodes*> coder = schema.Coder(f);
      if (!coder.ok()) {
        return Invalid(absl::StrCat(what, " is BYTES (category names), but ",
                                    coder.status().message()));
      }
      std::vector<absl::string_view> strings;
      if (raw) {
        absl::StatusOr<std::vector<absl::string_view>> split =
            SplitKserveBytes(raw_of(i), rows, absl::StrCat(what, " raw_input_contents"));
        if (!split.ok()) return split.status();
        strings = *std::move(split);
      } else {
        if (in.contents().bytes_contents_size() != rows) {
          return Invalid(absl::StrCat(what, " has ", in.contents().bytes_contents_size(),
                                      " bytes_contents; its shape declares ", rows));
        }
        for (const std::string& s : in.contents().bytes_contents()) strings.push_back(s);
      }
      if (absl::Status s = (*coder)->CodeColumn(strings, column, features); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
      }
      continue;
    }
    if (raw) {
      const absl::string_view bytes = raw_of(i);
      if (bytes.size() / type->size != static_cast<size_t>(rows) ||
          bytes.size() % type->size != 0) {
        return Invalid(absl::StrCat(what, " raw_input_contents holds ", bytes.size(),
                                    " bytes; ", rows, " rows of ", type->name, " need ",
                                    rows * static_cast<int64_t>(type->size)));
      }
      for (int64_t r = 0; r < rows; ++r) {
        column[r * features] = converter.Convert(
            static_cast<int>(f), type->read(bytes.data() + r * static_cast<int64_t>(type->size)));
      }
      continue;
    }
    const TypedColumn typed = Typed(*type, in.contents());
    if (typed.size != rows) {
      return Invalid(absl::StrCat(what, " has ", typed.size, " ", ContentsField(in.datatype()),
                                  "_contents; its shape declares ", rows));
    }
    for (int64_t r = 0; r < rows; ++r) {
      column[r * features] = converter.Convert(static_cast<int>(f), typed.at(r));
    }
  }
  *rows_out = rows;
  return absl::OkStatus();
}

}  // namespace grove::server
