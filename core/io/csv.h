// CSV rows in and out: the text format of `grove`, the test corpus and the benchmarks.
//
// Input format: one row per line, comma separated, no header. A field that is empty, or reads `nan`
// in any case (`NaN`, `-nan`), is a missing value (NaN); `True` / `False` (as pandas.to_csv writes
// booleans; also lower and upper case) are 1 / 0. A column may have a decoder
// (CsvReader::SetCellDecoders: category names), which then reads every cell of that column. Numbers are parsed as double with
// std::from_chars and then cast to float -- exactly what XGBoost does with the float64 arrays it is
// given -- so a value written with 9 significant digits round-trips bit for bit. (Short decimals
// take an exact fast path, core/io/decimal.h, that gives std::from_chars's bits.) Spaces and tabs
// around a field (but a decoder's: CsvCellDecoder), a leading '+', `inf`/`infinity`, CRLF line ends, a missing final newline and a
// UTF-8 byte order mark at the start of the input are tolerated. Blank lines (empty or only
// whitespace) are skipped before the first row and after the last; one between rows is an error
// naming it. A header line (grove --header) is read only when
// asked for (CsvReader::ReadHeader) and matched to the model's feature names by MatchCsvHeader:
// columns by name in any order, other columns dropped or kept as text. Every error is INVALID_ARGUMENT
// (or NOT_FOUND / PERMISSION_DENIED for a file that cannot be opened) with a message that names the
// file and the 1-based line: `X.csv:12: expected 8 fields, found 7`.
//
// Output format: `%.9g` for every value (float32 round-trips exactly), NaN written `nan`, `,`
// between values, `\n` after each row.
//
// Thread safety: a CsvReader / CsvWriter is used by one thread at a time; the free functions are
// thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/rows.h"

namespace grove {

class ThreadPool;

// A dense row-major matrix read from a CSV file.
template <typename T>
struct CsvMatrix {
  std::vector<T> values;  // rows * cols
  int64_t rows = 0;
  int64_t cols = 0;
};

// Where the fields of a line with a header go (MatchCsvHeader): field i becomes value target[i] of
// the row (-1: not a value, never parsed), and the fields in `keep` are passed through as text.
struct CsvLayout {
  std::vector<std::string> header;  // the header's names, in file order
  std::vector<int64_t> target;      // per field of a line
  std::vector<int64_t> keep;        // field indices kept as text, in the caller's order
  int64_t row_cols = 0;             // values per row
};

// Splits a header line into its names (spaces around each trimmed, CR dropped, bytes that are not
// UTF-8 escaped as in a model's feature names: core/common/utf8.h). INVALID_ARGUMENT
// naming `source` and `line` for an empty name, a quoted name (quoting is not supported) or a
// name given twice.
absl::StatusOr<std::vector<std::string>> ParseCsvHeader(std::string_view text,
                                                        std::string_view source, int64_t line);

// Matches `header` to `value_names` (e.g. a model's features): each value name must be in the
// header, in any order; `keep` names header columns passed through as text (a kept column may also
// be a value); every other column is dropped. INVALID_ARGUMENT naming `source`, the missing
// features (the first few) or the unknown kept column.
absl::StatusOr<CsvLayout> MatchCsvHeader(std::vector<std::string> header,
                                         const std::vector<std::string>& value_names,
                                         const std::vector<std::string>& keep,
                                         std::string_view source);

// The value of one cell of a column that has a decoder, from its text as written: an unquoted cell's
// bytes, blanks included (pandas.to_csv writes a name's leading and trailing spaces unquoted, and
// read_csv keeps them), or a quoted cell's text between its quotes (RFC 4180: blanks outside the
// quotes dropped, "" read as "); a cell that opens a quote it does not close on its field (a name
// holding ',', which the reader does not support) is INVALID_ARGUMENT. E.g. a category name to its
// code. An error is reported with the file, line and column prefixed.
// Called from the reader's parsing threads at once: it must be thread-safe.
using CsvCellDecoder = std::function<absl::StatusOr<double>(std::string_view cell)>;

// One field as a number by the input format's rules (empty / nan: NaN; True / False: 1 / 0); false
// when it is not a number.
bool ParseCsvNumber(std::string_view field, double* value);

// Reads a whole file. `expected_cols` > 0 makes every row check against it; otherwise the first row
// sets the column count. "-" reads standard input. `threads` as for CsvReader::Open.
absl::StatusOr<CsvMatrix<float>> ReadCsvFloats(const std::string& path, int64_t expected_cols = 0,
                                               int threads = 1);
absl::StatusOr<CsvMatrix<double>> ReadCsvDoubles(const std::string& path,
                                                 int64_t expected_cols = 0, int threads = 1);

// Parses CSV text held in memory; `source` names it in errors. Appends to `values`; `cols` is in-out
// (<= 0: set from the first row).
absl::Status ParseCsvFloats(std::string_view text, std::string_view source, int64_t* cols,
                            std::vector<float>* values);
absl::Status ParseCsvDoubles(std::string_view text, std::string_view source, int64_t* cols,
                             std::vector<double>* values);

// Streaming reader for inputs that do not fit in memory: reads the file in blocks and hands out
// rows in chunks of the caller's size.
//
// Once the column count is known (expected_cols, a layout, or the first row), each block of rows
// is parsed by `threads` threads, the caller's and threads - 1 of the reader's own, each taking
// runs of whole lines; the rows, their order and every error (the one of the first bad line, as
// one thread would report it) are the same for any thread count.
class CsvReader {
 public:
  // `path` "-" is standard input. `expected_cols` > 0 fixes the column count. `threads` >= 1
  // parse (<= 0: one per hardware thread).
  static absl::StatusOr<std::unique_ptr<CsvReader>> Open(const std::string& path,
                                                         int64_t expected_cols = 0,
                                                         int threads = 1);
  ~CsvReader();
  CsvReader(const CsvReader&) = delete;
  CsvReader& operator=(const CsvReader&) = delete;

  // Appends up to `max_rows` rows to `out` (cleared first) and returns how many; 0 means the end of
  // the input. After an error the reader is unusable.
  absl::StatusOr<int64_t> ReadRows(int64_t max_rows, std::vector<float>* out);
  absl::StatusOr<int64_t> ReadRows(int64_t max_rows, std::vector<double>* out);
  // The same with a layout that keeps columns: `kept` (cleared first) receives one string per row,
  // the kept fields as written (trimmed) joined by ','.
  absl::StatusOr<int64_t> ReadRows(int64_t max_rows, std::vector<float>* out,
                                   std::vector<std::string>* kept);
  absl::StatusOr<int64_t> ReadRows(int64_t max_rows, std::vector<double>* out,
                                   std::vector<std::string>* kept);

  // Reads the first non-blank line as a header (ParseCsvHeader), before any row. Its line counts in
  // later error messages.
  absl::StatusOr<std::vector<std::string>> ReadHeader();
  // From now on each line has layout.header.size() fields and a row layout.row_cols values.
  void SetLayout(CsvLayout layout);
  // Decoders by row column (the model's feature index; an empty function or a column past the
  // end: numbers), used for every row read from now on.
  void SetCellDecoders(std::vector<CsvCellDecoder> decoders) { decoders_ = std::move(decoders); }

  // Columns per row: expected_cols, or learned from the first row (0 before it is read).
  int64_t cols() const { return cols_; }
  // Rows returned so far.
  int64_t rows_read() const { return rows_read_; }
  // Bytes of the input consumed so far, and its total size (-1 when unknown, e.g. a pipe).
  int64_t bytes_consumed() const { return consumed_; }
  int64_t total_bytes() const { return total_bytes_; }
  const std::string& path() const { return path_; }

 private:
  CsvReader(std::string path, int fd, bool owns_fd, int64_t expected_cols, int64_t total_bytes,
            int threads);
  template <typename T>
  absl::StatusOr<int64_t> ReadRowsImpl(int64_t max_rows, std::vector<T>* out,
                                       std::vector<std::string>* kept);
  // Parses the run of rows at the start of the buffer (at most `max_rows`, up to the first blank
  // line or incomplete line) on the reader's threads and appends them; returns how many (0: the
  // next line needs ReadRowsImpl's line-by-line path).
  template <typename T>
  absl::StatusOr<int64_t> ReadBlock(int64_t max_rows, std::vector<T>* out,
                                    std::vector<std::string>* kept);
  // The next line [*b, *e) ('\n' excluded) and its length with the '\n'; false at the end.
  absl::StatusOr<bool> NextLine(const char** b, const char** e, size_t* used);
  // Reads more input into buf_ (growing it when a line fills it); false at the end of the input.
  absl::StatusOr<bool> Fill();
  // Reads into the rest of buf_: until it is full for a regular file, once for a pipe (which could
  // block for input that no caller asked for yet).
  absl::Status Refill();
  // Steps over a UTF-8 byte order mark at the start of the input (once, before the first line).
  absl::Status SkipByteOrderMark();
  // Moves the unparsed data to the front of buf_.
  void Compact();
  // One read() into buf_ after end_; false at the end of the input.
  absl::StatusOr<bool> ReadSome();

  std::string path_;
  int fd_;
  bool owns_fd_;
  int64_t cols_;
  int64_t total_bytes_;
  int64_t consumed_ = 0;
  int64_t rows_read_ = 0;
  int64_t line_ = 0;  // lines consumed (1-based number of the last line parsed)
  int64_t blank_line_ = 0;  // the first blank line after the last row (0: none since)
  bool has_layout_ = false;
  CsvLayout layout_;
  bool eof_ = false;
  bool failed_ = false;
  bool bom_checked_ = false;
  std::vector<char> buf_;
  size_t begin_ = 0;  // unparsed data is buf_[begin_, end_)
  size_t end_ = 0;
  const std::vector<CsvCellDecoder>* decoders() const {
    return decoders_.empty() ? nullptr : &decoders_;
  }
  std::vector<CsvCellDecoder> decoders_;
  std::unique_ptr<ThreadPool> pool_;    // threads - 1 workers; null for one thread
  std::vector<const char*> line_ends_;  // ReadBlock's lines
};

// Writes `%.9g` of `value` (NaN as "nan") at `out` and returns the end; `out` needs 32 bytes.
char* FormatCsvNumber(double value, char* out);

// Buffered CSV writer. "-" writes standard output.
class CsvWriter {
 public:
  static absl::StatusOr<std::unique_ptr<CsvWriter>> Open(const std::string& path);
  ~CsvWriter();  // flushes and closes, ignoring errors: call Close() to see them
  CsvWriter(const CsvWriter&) = delete;
  CsvWriter& operator=(const CsvWriter&) = delete;

  absl::Status WriteRows(MatrixView<const float> rows);
  absl::Status WriteRows(MatrixView<const double> rows);
  // Rows preceded by text fields: lead[r] (already ',' joined) then ',' then row r's values.
  absl::Status WriteRows(MatrixView<const float> rows, const std::vector<std::string>& lead);
  // One line of names, each quoted as RFC 4180 says when it holds ',', '"' or a line break.
  absl::Status WriteHeader(const std::vector<std::string>& names);
  // Flushes and closes (standard output is flushed, not closed).
  absl::Status Close();

 private:
  CsvWriter(std::string path, int fd, bool owns_fd);
  template <typename T>
  absl::Status WriteRowsImpl(MatrixView<const T> rows, const std::vector<std::string>* lead);
  absl::Status Flush();

  std::string path_;
  int fd_;
  bool owns_fd_;
  bool closed_ = false;
  std::string buf_;
};

// Writes a whole matrix to `path`.
absl::Status WriteCsv(const std::string& path, MatrixView<const float> rows);
absl::Status WriteCsv(const std::string& path, MatrixView<const double> rows);

}  // namespace grove
