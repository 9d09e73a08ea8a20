#include "bench/common/rows.h"

#include <cstdio>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/io/csv.h"
#include "core/model/loader.h"

namespace grove::bench {

absl::StatusOr<std::vector<float>> ReadFeatureRows(const std::string& path, int num_features) {
  absl::StatusOr<CsvMatrix<float>> csv = ReadCsvFloats(path);
  if (!csv.ok()) return csv.status();
  if (csv->cols != num_features && csv->cols != num_features + 1) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": rows have ", csv->cols,
                                                   " columns; the model has ", num_features,
                                                   " features (a trailing label may add one)"));
  }
  std::vector<float> rows;
  rows.reserve(csv->rows * num_features);
  for (int64_t r = 0; r < csv->rows; ++r) {
    const float* begin = csv->values.data() + r * csv->cols;
    rows.insert(rows.end(), begin, begin + num_features);
  }
  return rows;
}

absl::StatusOr<ModelAndRows> LoadModelAndRows(const std::string& model_path,
                                              const std::string& rows_path) {
  absl::StatusOr<ForestPtr> forest = LoadModelFile(model_path);
  if (!forest.ok()) return forest.status();
  absl::StatusOr<std::vector<float>> rows = ReadFeatureRows(rows_path, (*forest)->num_features);
  if (!rows.ok()) return rows.status();
  return ModelAndRows{*std::move(forest), *std::move(rows)};
}

int StartModelRows(const std::string& model_path, const std::string& rows_path,
                   std::string* name, const char* usage, ModelAndRows* out) {
  if (model_path.empty() || rows_path.empty()) {
    std::fprintf(stderr, "%s\n", usage);
    return 2;
  }
  if (name->empty()) *name = model_path;
  absl::StatusOr<ModelAndRows> input = LoadModelAndRows(model_path, rows_path);
  if (!input.ok()) {
    std::fprintf(stderr, "%s\n", std::string(input.status().message()).c_str());
    return 1;
  }
  *out = *std::move(input);
  return 0;
}

}  // namespace grove::bench
