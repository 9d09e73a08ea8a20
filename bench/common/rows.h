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

// A model-and-rows program's start, after its flags are parsed: the --model and --rows values,
// and its --name (set to the model path when empty). Answers the program's exit status when it
// cannot go on: 2 after printing `usage` when --model or --rows is missing, 1 after printing the
// error when LoadModelAndRows fails; 0 with `*out` loaded otherwise.
int StartModelRows(const std::string& model_path, const std::string& rows_path,
                   std::string* name, const char* usage, ModelAndRows* out);

}  // namespace grove::bench
