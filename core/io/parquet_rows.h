// The rows of a Parquet file (core/io/parquet.h) as the CSV reader (core/io/csv.h) gives the
// rows of the same table written with a header: the file's columns are matched to the caller's
// value names (a model's features) by name, in any order (MatchCsvHeader: other columns are
// dropped, `keep` columns passed through as text), and each cell becomes what its CSV text would:
//  * a number, integer or boolean (1 / 0) column: its value; a null (or NaN): missing (NaN);
//  * a string column: its text read as a CSV cell is (ParseCsvNumber: numbers, `nan`, True /
//    False), an error naming the row and column otherwise;
//  * a column with a cell decoder (a categorical feature's category names, SetCellDecoders): the
//    decoder of its text: a string as stored (not trimmed: Parquet stores the name exactly), a
//    number as the shortest text that reads back as its value (a FLOAT column's as a float32,
//    as pandas writes it), a boolean as True / False; a null (or a NaN) as the empty cell.
// Values are doubles (an int64 rounded to nearest, a FLOAT widened exactly, as numpy widens a
// float32 array); float rows are those doubles cast to float, as CSV fields are.
//
// The file is held in memory and decoded one row group at a time (every used column of it), so a
// row group's rows x values is bounded (kMaxParquetRowGroupCells).
//
// Thread safety: a reader is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/io/csv.h"
#include "core/io/parquet.h"

namespace grove {

// At most this many values of one row group are decoded at once (2 GiB of doubles).
inline constexpr int64_t kMaxParquetRowGroupCells = int64_t{1} << 28;

class ParquetRowReader {
 public:
  // Reads the regular file `path` whole (NOT_FOUND / PERMISSION_DENIED as ReadRegularFile says).
  static absl::StatusOr<std::unique_ptr<ParquetRowReader>> Open(
      const std::string& path, const std::vector<std::string>& value_names,
      const std::vector<std::string>& keep, ParquetLimits limits = {});
  // The same over bytes in memory; `source` names them in errors.
  static absl::StatusOr<std::unique_ptr<ParquetRowReader>> FromBytes(
      std::string bytes, std::string source, const std::vector<std::string>& value_names,
      const std::vector<std::string>& keep, ParquetLimits limits = {});

  // Decoders by value column (empty or past the end: numbers), used for every row read from now
  // on; called from this reader's thread.
  void SetCellDecoders(std::vector<CsvCellDecoder> decoders) { decoders_ = std::move(decoders); }

  // Appends up to `max_rows` rows (value_names.size() values each) to `out` (cleared first) and
  // returns how many; 0 at the end. `kept` (optional, cleared first) receives one string per row,
  // the kept columns' texts joined by ',' (quoted as RFC 4180 says when a text holds ',', '"' or
  // a line break). After an error the reader is unusable.
  absl::StatusOr<int64_t> ReadRows(int64_t max_rows, std::vector<float>* out,
                                   std::vector<std::string>* kept);
  absl::StatusOr<int64_t> ReadRows(int64_t max_rows, std::vector<double>* out,
                                   std::vector<std::string>* kept);

  int64_t rows_read() const { return rows_read_; }
  int64_t num_rows() const { return file_.num_rows(); }
  int64_t total_bytes() const { return static_cast<int64_t>(bytes_.size()); }
  // The share of the file's bytes that the rows read so far stand for.
  int64_t bytes_consumed() const;

 private:
  ParquetRowReader() = default;
  absl::Status Init(std::string source, const std::vector<std::string>& value_names,
                    const std::vector<std::string>& keep, ParquetLimits limits);
  // Decodes the used columns of row group `group_` into values_ and kept_.
  absl::Status LoadGroup();
  template <typename T>
  absl::StatusOr<int64_t> ReadRowsImpl(int64_t max_rows, std::vector<T>* out,
                                       std::vector<std::string>* kept);

  std::string bytes_;  // the file; file_ views it
  std::string source_;
  ParquetFile file_;
  CsvLayout layout_;
  std::vector<CsvCellDecoder> decoders_;
  int group_ = -1;
  int64_t group_rows_ = 0, next_ = 0;  // rows of the loaded group, the next one to hand out
  std::vector<double> values_;         // group_rows_ x layout_.row_cols
  std::vector<std::string> kept_;      // per row of the group (when keep is not empty)
  int64_t rows_read_ = 0;
  bool failed_ = false;
};

// The text a Parquet value stands for in a CSV cell (ParquetRowReader's rules) of a column of
// `kind` and ParquetType `physical`.
std::string ParquetCellText(ParquetValueKind kind, int32_t physical, double value);

}  // namespace grove
