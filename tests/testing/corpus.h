// The library reference corpus for tests: /work/shared/testdata (and its real/* cases) plus the
// in-repo golden corpus tests/golden/*. Every case directory holds a model file (model.json and
// model.ubj for XGBoost, model.txt for LightGBM, catboost.json for CatBoost), X.csv, reference outputs computed by the library
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
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/model/forest.h"

namespace grove {
class Forest;
}  // namespace grove

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
  std::string library;  // "xgboost", "lightgbm", "catboost" or "treelite"
  // The library that trained the model ("trained_by" in meta.json for a Treelite checkpoint).
  std::string trained_by;
  // XGBoost computed the SHAP references in float32 (CompareExplanations' float32_reference).
  bool float32_reference = false;
  // model.json (XGBoost), model.txt (LightGBM), catboost.json, checkpoint.tl (Treelite)
  std::string model_path;
  std::vector<std::string> model_paths;  // every model file of the case (json + ubj for XGBoost)
  int num_features = 0;
  int num_outputs = 1;
  int n_interaction_rows = 0;  // interactions.csv covers the first n rows of X
  std::shared_ptr<const nlohmann::json> meta;  // include <nlohmann/json.hpp> to read it

  std::vector<float> X;  // rows x num_features, NaN = missing (each value cast to float)
  std::vector<double> X64;  // the same values as the library saw them (float64)
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
// The golden cases whose directory name starts with `prefix` ("cb_": CatBoost, "tl_": Treelite).
std::vector<std::string> GoldenCaseDirs(std::string_view prefix);
std::vector<std::string> SharedCaseDirs();

// Reads meta.json, X.csv and every reference CSV present, checking their shapes against meta.json.
absl::StatusOr<CorpusCase> LoadCorpusCase(const std::string& dir);

// A case and its model: LoadCorpusCase, then its model_path loaded (LoadModelFile).
struct CorpusModel {
  CorpusCase c;
  ForestPtr forest;
};
absl::StatusOr<CorpusModel> LoadCorpusModel(const std::string& dir);

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

// Grove's float rows for `c` and the model `forest`: X.csv's doubles through DoubleRowConverter
// (core/model/double_rows.h), as `grove` reads CSV, so that LightGBM models route every value as
// LightGBM routed the double (plain casts for XGBoost, which casts to float itself).
std::vector<float> GroveRows(const CorpusCase& c, const Forest& forest);

// SHAP values / interaction values against a library reference.
// The spec: |got - ref| <= tolerance * max(1, |margin|), margin of the entry's output.
// XGBoost computes SHAP in float32, so its entries of ~100 next to a margin of ~0.1 carry float32
// rounding of a few 1e-5 that no exact engine reproduces (an independent double-precision TreeSHAP
// misses xgb_dart row 172 by 1.3e-5, and the references' own sums miss their margins by up to
// 7.5e-5 * max(1, |margin|): meta.json checks of xgb_reg_med). With `float32_reference`, an entry
// beyond the spec still passes when within kFloat32ReferenceUlps float32 ulps of the reference
// value itself (|got - ref| <= 32 * 2^-24 * |ref|, 1.9e-6 relative); such entries are counted and
// `ok` bounds their number, so a systematic error cannot hide behind the allowance.
inline constexpr double kFloat32ReferenceUlps = 32;
struct ExplainComparison {
  ErrorReport spec;   // the spec measure, over every entry
  int64_t entries = 0;
  int64_t float32_noise_entries = 0;  // beyond the spec, within float32 rounding of the reference
  int64_t failures = 0;               // beyond both
  ErrorReport worst_failure;
  // No failures, and at most 0.5% of the entries (at least 2) accepted as float32 noise.
  bool ok() const;
  std::string ToString() const;
};
ExplainComparison CompareExplanations(absl::Span<const float> got, const RefMatrix& ref,
                                      const RefMatrix& margin, int num_outputs, double tolerance,
                                      bool float32_reference);
ExplainComparison CompareExplanations(absl::Span<const double> got, const RefMatrix& ref,
                                      const RefMatrix& margin, int num_outputs, double tolerance,
                                      bool float32_reference);

// Number of entries that differ at all (NaN == NaN), for exact outputs such as leaf indices.
int64_t CountMismatches(absl::Span<const float> got, const RefMatrix& ref);
int64_t CountMismatches(absl::Span<const double> got, const RefMatrix& ref);

}  // namespace grove::testing
