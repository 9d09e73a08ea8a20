#include "core/servable/background.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/io/csv.h"
#include "core/io/file.h"
#include "core/io/npy.h"
#include "core/model/double_rows.h"

namespace grove {
namespace {

absl::Status Bad(absl::string_view source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

// CSV rows are the lines holding anything but blanks (csv.h skips the others); counted before
// parsing so that an oversize file is refused without holding its values.
int64_t CountCsvRows(absl::string_view text) {
  int64_t rows = 0;
  bool blank = true;
  for (char c : text) {
    if (c == '\n') {
      rows += blank ? 0 : 1;
      blank = true;
    } else if (c != ' ' && c != '\t' && c != '\r') {
      blank = false;
    }
  }
  return rows + (blank ? 0 : 1);
}

absl::Status CheckRowCount(absl::string_view source, int64_t rows) {
  if (rows >= 1 && rows <= kMaxBackgroundRows) return absl::OkStatus();
  return Bad(source, absl::StrCat("holds ", rows, " rows; a background holds 1 to ",
                                  kMaxBackgroundRows, " rows"));
}

absl::StatusOr<BackgroundValues> ParseCsv(absl::string_view text, absl::string_view source,
                                          int64_t num_features) {
  if (absl::Status s = CheckRowCount(source, CountCsvRows(text)); !s.ok()) return s;
  BackgroundValues out;
  out.cols = num_features;
  if (absl::Status s = ParseCsvDoubles(std::string_view(text.data(), text.size()),
                                       std::string_view(source.data(), source.size()), &out.cols,
                                       &out.values);
      !s.ok()) {
    return s;
  }
  out.rows = static_cast<int64_t>(out.values.size()) / num_features;
  return out;
}

absl::StatusOr<BackgroundValues> ParseNpyFile(absl::string_view bytes, absl::string_view source,
                                              int64_t num_features) {
  absl::StatusOr<NpyArray> a = ParseNpy(bytes, source, kMaxBackgroundRows * num_features);
  if (!a.ok()) return a.status();
  if (a->shape.size() != 2 || a->shape[1] != num_features) {
    std::string shape;
    for (int64_t d : a->shape) absl::StrAppend(&shape, shape.empty() ? "" : ", ", d);
    return Bad(source, absl::StrCat("shape (", shape, a->shape.size() == 1 ? ",)" : ")",
                                    "; a background is 2-D: (rows, ", num_features, ")"));
  }
  BackgroundValues out;
  out.values = std::move(a->values);
  out.rows = a->shape[0];
  out.cols = num_features;
  return out;
}

}  // namespace

absl::StatusOr<BackgroundValues> ParseBackgroundValues(absl::string_view bytes,
                                                       absl::string_view source,
                                                       int64_t num_features) {
  // Forest::num_features is an int: the bound keeps rows x features far from overflow.
  if (num_features < 1 || num_features > std::numeric_limits<int32_t>::max()) {
    return Bad(source, absl::StrCat("a model of ", num_features, " features has no background"));
  }
  absl::StatusOr<BackgroundValues> out = absl::EndsWith(source, ".npy")
                                             ? ParseNpyFile(bytes, source, num_features)
                                             : ParseCsv(bytes, source, num_features);
  if (!out.ok()) return out.status();
  if (absl::Status s = CheckRowCount(source, out->rows); !s.ok()) return s;
  for (size_t i = 0; i < out->values.size(); ++i) {
    if (std::isinf(out->values[i])) {
      return Bad(source, absl::StrCat("row ", i / num_features + 1, ", column ",
                                      i % num_features + 1, " is ", out->values[i],
                                      "; background values are finite or NaN (missing)"));
    }
  }
  return out;
}

absl::StatusOr<Background> LoadBackgroundFile(const Forest& forest, const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadRegularFile(path, kMaxBackgroundFileBytes);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<BackgroundValues> parsed =
      ParseBackgroundValues(*bytes, path, forest.num_features);
  if (!parsed.ok()) return parsed.status();
  Background out;
  out.path = path;
  out.rows = parsed->rows;
  out.cols = parsed->cols;
  out.values.resize(parsed->values.size());
  DoubleRowConverter(forest).ConvertRows(parsed->values.data(), out.rows, out.values.data());
  return out;
}

}  // namespace grove
