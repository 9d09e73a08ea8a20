// `grove` in embedded (local) mode: loads the model in-process and runs the engines
// (PredictEngine / ExplainEngine, so the GPU engines are used when built and a GPU is visible).
//
// Also exports the streaming loop and the model statistics so that the remote mode
// (client/cli_remote.cc) produces the same files the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "client/cli_args.h"
#include "core/common/rows.h"
#include "core/model/double_rows.h"
#include "core/model/forest.h"

namespace grove::cli {

// Runs predict / explain / inspect locally. Prints results to the output and a one-line error
// ("grove: error: X.csv:3: expected 8 fields, found 7") on stderr. Returns the process exit code:
// 0 success, 1 failure.
int RunLocal(const CliArgs& args);

// Rows per engine call for rows of `in_cols` values and results of `out_cols` values: about 8M
// values per buffer, between 1 and 262144 rows.
int64_t AutoChunkRows(int64_t in_cols, int64_t out_cols);

struct StreamOptions {
  std::string input;   // CSV path, "-" = standard input
  std::string output;  // CSV path, "-" = standard output
  int64_t in_cols = 0;   // values per input row (the model's features)
  int64_t out_cols = 0;  // values per result row
  int64_t chunk_rows = 0;  // 0 = AutoChunkRows
  int read_threads = 1;    // threads parsing the input (CsvReader::Open; <= 0: one per core)
  bool progress = true;    // progress bar on a terminal
  std::string label;       // progress bar label ("predict", "explain")
  // When set, fields are parsed as doubles and turned into float rows by the converter, so that a
  // LightGBM model routes them as LightGBM routes the doubles (core/model/double_rows.h); otherwise
  // they are cast to float (what XGBoost does).
  const DoubleRowConverter* converter = nullptr;
  // --header: the input's first line names its columns; they are matched to `feature_names` by
  // name (MatchCsvHeader, core/io/csv.h) and the columns named in `keep` are passed through, as
  // text, at the front of each output line.
  bool header = false;
  std::vector<std::string> feature_names;  // in_cols names (FeatureNamesOrDefault)
  std::vector<std::string> keep;
  // Non-empty: the output's first line, after the kept columns' names (ResultColumnNames).
  std::vector<std::string> output_header;
};

struct StreamStats {
  int64_t rows = 0;
  int64_t chunks = 0;
  double compute_seconds = 0;  // inside `compute`
  double total_seconds = 0;
};

// Reads `input` in chunks (the next chunk is parsed while the current one is computed), calls
// `compute(rows, out)` for each and writes `out` as CSV. Memory stays bounded by the chunk size
// whatever the input size. On error the partial output file is removed (standard output is not).
using ComputeFn = std::function<absl::Status(RowsView rows, MatrixView<float> out)>;
absl::Status StreamRows(const StreamOptions& options, const ComputeFn& compute, StreamStats* stats);
// The same loop with the fields kept as doubles (`converter` unused): remote mode sends them as they
// are and the server converts them for the model. `rows` is n x options.in_cols, row-major.
using DoubleComputeFn =
    std::function<absl::Status(const double* rows, int64_t n, MatrixView<float> out)>;
absl::Status StreamDoubleRows(const StreamOptions& options, const DoubleComputeFn& compute,
                              StreamStats* stats);

// The model's feature names, or XGBoost's defaults f0, f1, ... when the model stores none.
std::vector<std::string> FeatureNamesOrDefault(const std::vector<std::string>& names,
                                               int64_t num_features);

// What the columns of a result are (the output header of --header / --output-header).
struct ResultColumns {
  std::vector<std::string> feature_names;  // FeatureNamesOrDefault
  int num_outputs = 1;                     // margins per row (K)
  bool explain = false;                    // SHAP values; otherwise predictions
  bool interactions = false;               // explain: SHAP interaction values
  OutputKind kind = OutputKind::kPrediction;  // predict
  int64_t width = 0;                       // predict: values per row
};
// Names of a result's columns. Predict: `prediction` / `margin` for one column, `prediction_J` /
// `margin_J` for several, `leaf_J` for the J-th tree of the range. Explain: the feature names then
// `bias` (pred_contribs order); interactions `A*B` for each pair (pred_interactions order, `bias`
// last); with K > 1 outputs every name is prefixed `outK.`.
std::vector<std::string> ResultColumnNames(const ResultColumns& columns);

// Sets the header options of `stream` from --header, --keep and --output-header.
void ApplyColumnArgs(const CliArgs& args, const ResultColumns& columns, StreamOptions* stream);

// Model statistics for `grove inspect`: (key, value) pairs in display order. In JSON, numbers are
// JSON numbers, yes/no answers JSON booleans, everything else a string.
enum class StatKind { kText, kNumber, kBool, kList };
struct Stat {
  Stat(std::string k, std::string v, StatKind kd, std::vector<std::string> l = {})
      : key(std::move(k)), value(std::move(v)), kind(kd), list(std::move(l)) {}
  std::string key;    // snake_case, used as the JSON key
  std::string value;  // display text ("yes" / "no" for kBool; unused for kList)
  StatKind kind = StatKind::kText;
  std::vector<std::string> list;  // kList: a JSON array of strings, ", "-joined as text
};
// The feature_names and feature_types lists (empty lists when the model stores none).
void AppendFeatureStats(const std::vector<std::string>& names,
                        const std::vector<std::string>& types, std::vector<Stat>* stats);
std::vector<Stat> ForestStats(const Forest& forest);
// Renders stats as aligned "key  value" lines or as one JSON object.
std::string RenderStats(const std::vector<Stat>& stats, bool json);
// `s` as a JSON string literal, quotes included (quotes, backslashes and control bytes escaped).
std::string JsonString(const std::string& s);

}  // namespace grove::cli
