// `grove` in embedded (local) mode: loads the model in-process and runs the engines
// (PredictEngine / ExplainEngine, so the GPU engines are used when built and a GPU is visible).
//
// Also exports the streaming loop and the model statistics so that the remote mode
// (client/cli_remote.cc) produces the same files the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "client/cli_args.h"
#include "core/common/rows.h"
#include "core/io/csv.h"
#include "core/model/category_codes.h"
#include "core/model/double_rows.h"
#include "core/model/forest.h"
#include "core/model/forest_stats.h"
#include "core/servable/result_columns.h"

namespace grove::cli {

// Runs predict / explain / inspect locally. Prints results to the output and a one-line error
// ("grove: error: X.csv:3: expected 8 fields, found 7") on stderr. Returns the process exit code:
// 0 success, 1 failure.
int RunLocal(const CliArgs& args);

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
  // --top-k: > 0 (capped at the features), `compute` fills SHAP values [rows, top_k_outputs,
  // top_k_features + 1] and each row is written as its k (feature index, value) pairs per output
  // (TopKFeatures, core/servable/top_k.h): out_cols is top_k_outputs x 2k.
  int top_k = 0;
  int top_k_outputs = 1;
  int top_k_features = 0;
  // Per feature (empty: all numbers): how a cell of a categorical feature whose categories the
  // model records is read (CategoryCellDecoders).
  std::vector<CsvCellDecoder> decoders;
};

// The CSV decoders of the categorical features whose categories are recorded (`categories`, per
// feature; empty when none are): a cell is the category as pandas.to_csv writes it, its name as
// written, blanks included, or quoted (core/io/csv.h; for number categories, its value: "10" or
// "10.0", blanks around it ignored), mapped to its code by CategoryCodes
// (core/model/category_codes.h); a number that names no category of a feature with string
// categories is taken as the code itself (CSV files of codes keep working); empty or `nan` is
// missing; any other unknown category follows `unknown` (the model's library: missing, or an error
// naming the file, line and column). Local mode passes the forest's categories, remote mode those
// the server's metadata lists.
std::vector<CsvCellDecoder> CategoryCellDecoders(
    std::shared_ptr<const std::vector<FeatureCategories>> categories, UnknownCategory unknown,
    const std::vector<std::string>& feature_names);

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

// The stream of `args` (--input, --output, --chunk-rows, --threads, --progress) for rows of
// `in_cols` values and results of `out_cols`, its progress bar labelled `label`.
StreamOptions StreamOptionsOf(const CliArgs& args, int64_t in_cols, int64_t out_cols,
                              std::string label);
// Sets the header options of `stream` from --header, --keep and --output-header, and --top-k's
// (which sets out_cols: call it after setting out_cols to the full SHAP width).
void ApplyColumnArgs(const CliArgs& args, ResultColumns columns, StreamOptions* stream);

// Renders stats as aligned "key  value" lines or as one JSON object.
std::string RenderStats(const std::vector<Stat>& stats, bool json);

}  // namespace grove::cli
