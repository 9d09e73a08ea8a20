// The library reference corpus for tests: /work/shared/testdata (and its real/* cases) plus the
// in-repo golden corpus tests/golden/*. Every case directory holds a model file (model.json and
// model.ubj for XGBoost, model.txt for LightGBM), X.csv, reference outputs computed by the library
// (margin.csv, pred.csv, contribs.csv, interactions.csv, leaf.csv -- each optional) and meta.json.
// See /work/shared/testdata/README.md for the layout.
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace grove::testing {

// A reference output: rows x cols, row-major, in double.
struct RefMatrix {
  std::vector<double> values;
  int64_t rows = 0;
  int64_t cols = 0;
  double At(int64_t r, int64_t c) const { return values[static_cast<size_t>(r * cols + c)]; }
};

struct CorpusCase {
  std::string dir;      // absolute or as found
  std::string name;     // meta.json "case" (the directory name when absent)
  std::string library;  // "xgboost" or "lightgbm"
  std::string model_path;                // model.json (XGBoost) or model.txt (LightGBM)
  std::vector<std::string> model_paths;  // every model file of the case (json + ubj for XGBoost)
  int num_features = 0;
  int num_outputs = 1;
  int n_interaction_rows = 0;  // interactions.csv covers the first n rows of X
  std::shared_ptr<const nlohmann::json> meta;  // include <nlohmann/json.hpp> to read it

  std::vector<float> X;  // rows x num_features, NaN = missing
  int64_t rows = 0;

  std::optional<RefMatrix> margin, pred, contribs, interactions, leaf;
  // Outputs the library refused (meta.json "unsupported"): output name -> the library's message.
  std::map<std::string, std::string> unsupported;
};

// Every case directory: $GROVE_TESTDATA (when set) or GROVE_SOURCE_DIR/../shared/testdata, their
// real/* sub-cases, then GROVE_SOURCE_DIR/tests/golden/*. A directory counts when it holds meta.json.
// Sorted within each root; missing roots are skipped.
std::vector<std::string> CorpusCaseDirs();
// Only the in-repo golden cases / only the shared testdata cases.
std::vector<std::string> GoldenCaseDirs();
std::vector<std::string> SharedCaseDirs();

// Reads meta.json, X.csv and every reference CSV present, checking their shapes against meta.json.
absl::StatusOr<CorpusCase> LoadCorpusCase(const std::string& dir);

// Largest error between `got` and a reference, and where it is.
struct ErrorReport {
  double max_error = 0;  // 0 when both are empty
  int64_t row = -1;
  int64_t col = -1;
  double got = 0;
  double want = 0;
  std::string ToString() const;  // "max err 1.2e-7 at row 3 col 5 (got 0.5, want 0.50000006)"
};

// max |got - ref| / max(1, |ref|) over all entries. `got` is ref.rows x ref.cols, row-major.
// A NaN on one side only (or a size mismatch) is an infinite error; NaN on both is 0.
ErrorReport MaxRelError(absl::Span<const float> got, const RefMatrix& ref);
ErrorReport MaxRelError(absl::Span<const double> got, const RefMatrix& ref);

// max |got - ref| / max(1, |margin[row][k]|) where k is the output block of the column: the ref has
// num_outputs blocks of ref.cols / num_outputs columns per row (contribs: F+1, interactions:
// (F+1)^2). Rows of `ref` are the first ref.rows rows of `margin`.
ErrorReport MaxMarginRelError(absl::Span<const float> got, const RefMatrix& ref,
                              const RefMatrix& margin, int num_outputs);
ErrorReport MaxMarginRelError(absl::Span<const double> got, const RefMatrix& ref,
                              const RefMatrix& margin, int num_outputs);

// Number of entries that differ at all (NaN == NaN), for exact outputs such as leaf indices.
int64_t CountMismatches(absl::Span<const float> got, const RefMatrix& ref);
int64_t CountMismatches(absl::Span<const double> got, const RefMatrix& ref);

}  // namespace grove::testing
