// Background data sets of interventional SHAP (interventional.h), read from a file: a model's
// background in the repository (<repository>/<model>/background.csv or background.npy, see
// core/registry/model_registry.h) and `grove explain --background FILE`. One reader for both, so
// that a served background and a local one give the same rows bit for bit.
//
// Formats: a name ending in ".npy" is a NumPy array (core/io/npy.h) of shape (rows, features);
// anything else is CSV as `grove` reads it (core/io/csv.h: no header, empty or nan = missing).
// Checks: 1 to kMaxBackgroundRows rows of exactly the model's feature count, every value finite or
// NaN (missing); the file at most kMaxBackgroundFileBytes. Values are read as doubles and converted
// to the float rows the engines take with DoubleRowConverter, as request rows given as doubles.
// Errors are INVALID_ARGUMENT "<file>: <what>" naming the bound (NOT_FOUND / PERMISSION_DENIED
// when the file cannot be opened).
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/common/rows.h"
#include "core/model/forest.h"

namespace grove {

// Bounds: the cost of interventional SHAP grows with the background's rows (and its preprocessing
// with rows x path elements), and the file is read whole at model load.
inline constexpr int64_t kMaxBackgroundRows = 10'000;
inline constexpr int64_t kMaxBackgroundFileBytes = int64_t{256} << 20;

// A background's values before conversion: rows x cols doubles, row-major.
struct BackgroundValues {
  std::vector<double> values;
  int64_t rows = 0;
  int64_t cols = 0;
};

// Parses and checks the bytes of a background file named `source` (its extension picks the
// format) for a model of `num_features` features. Never allocates more than the bounds allow.
absl::StatusOr<BackgroundValues> ParseBackgroundValues(absl::string_view bytes,
                                                       absl::string_view source,
                                                       int64_t num_features);

// A background ready for an InterventionalEngine.
struct Background {
  std::string path;
  std::vector<float> values;  // rows x cols, converted for the forest
  int64_t rows = 0;
  int64_t cols = 0;

  RowsView view() const { return MakeRowsView(values.data(), rows, cols); }
};

// Reads `path` (a regular file, at most kMaxBackgroundFileBytes) and parses it for `forest`.
absl::StatusOr<Background> LoadBackgroundFile(const Forest& forest, const std::string& path);

}  // namespace grove
