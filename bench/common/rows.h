// Benchmark rows from a CSV file (bench programs only).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model/forest.h"

namespace grove::bench {

// The CSV's rows as row-major num_features floats each: a file with exactly num_features columns
// is taken as is, one with num_features + 1 loses its trailing (label) column; any other width is
// INVALID_ARGUMENT, naming both counts.
absl::StatusOr<std::vector<float>> ReadFeatureRows(const std::string& path, int num_features);

struct ModelAndRows {
  ForestPtr forest;
  std::vector<float> rows;  // ReadFeatureRows of the model's features
};
// The model file (LoadModelFile) and the CSV's rows for it; the loader's or the reader's error.
absl::StatusOr<ModelAndRows> LoadModelAndRows(const std::string& model_path,
                                              const std::string& rows_path);

}  // namespace grove::bench
