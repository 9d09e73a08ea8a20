// Apache Parquet tables read from bytes the caller holds and does not trust: the input format of
// `grove predict|explain --input X.parquet` beside CSV (core/io/csv.h) and .npy (core/io/npy.h).
//
// Read: flat schemas (each top-level field a column); physical types BOOLEAN (1 / 0), INT32,
// INT64, FLOAT, DOUBLE (as doubles: int64 rounded to nearest, as the CSV path rounds the digits)
// and BYTE_ARRAY (text: category names, or numbers as a CSV cell is read); logical types INTEGER
// (8 to 64 bits, signed or unsigned), STRING, ENUM and NULL (legacy converted types UTF8, ENUM,
// INT_* and UINT_* alike); REQUIRED and OPTIONAL columns (a null is a missing value); data pages
// v1 and v2 and dictionary pages; encodings PLAIN, PLAIN_DICTIONARY / RLE_DICTIONARY and RLE
// (booleans, levels); compression UNCOMPRESSED, SNAPPY, GZIP and ZSTD; any number of row groups.
//
// Refused, when a column is read (a file may hold columns nobody reads): nested or repeated
// columns, DECIMAL, DATE, TIME, TIMESTAMP, INTERVAL, INT96, FIXED_LEN_BYTE_ARRAY, JSON, BSON, UUID,
// FLOAT16 (a date or a decimal is not a number a tree splits on without a conversion the user
// should choose: the same table as CSV would hold text the CSV path refuses too); other encodings
// (DELTA_*, BYTE_STREAM_SPLIT) and codecs (LZ4, BROTLI, LZO); column chunks in other files.
// UNIMPLEMENTED for a well-formed feature Grove does not read, INVALID_ARGUMENT for malformed
// bytes; every message names the source and, past the footer, the column and the row group.
//
// Bounds: every offset, length and count is checked against the bytes it lies in; a page is at
// most ParquetLimits::max_page_bytes compressed and decompressed and must decompress to exactly
// its declared size; a row group has at most max_row_group_rows rows (one column of one row group
// is decoded at a time, its values growing as its pages decode); a dictionary holds at most as
// many values as its page's bytes allow; the footer's lists are bounded by its size
// (ParseParquetFileMetaData).
//
// Thread safety: a ParquetFile is immutable after Open; ReadColumn may be called from any number
// of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/io/parquet_metadata.h"

namespace grove {

// What a readable column's values are.
enum class ParquetValueKind : uint8_t {
  kNumber,   // FLOAT, DOUBLE
  kInteger,  // INT32, INT64 (any INTEGER logical type)
  kBoolean,  // BOOLEAN: 1 / 0
  kString,   // BYTE_ARRAY
};

// A top-level field of the schema.
struct ParquetColumn {
  std::string name;         // as the schema spells it, bytes that are not UTF-8 escaped
  std::string unsupported;  // empty when readable; otherwise what is not supported
  ParquetValueKind kind = ParquetValueKind::kNumber;
  int32_t physical = -1;  // ParquetType (-1 for a nested column)
};

// One column of one row group. Its vectors grow as pages decode: nothing is sized by the row
// group's declared row count.
struct ParquetColumnValues {
  ParquetValueKind kind = ParquetValueKind::kNumber;
  std::vector<double> numbers;  // not kString: one per row, NaN for a null
  // kString: one per row ("" for a null), views into `buffers` (no copy per cell).
  std::vector<absl::string_view> strings;
  std::vector<uint8_t> present;  // kString: 1 for a value, 0 for a null
  // The decompressed pages (dictionary, PLAIN values) that `strings` views; moving the object
  // keeps the views valid.
  std::vector<std::unique_ptr<const std::string>> buffers;
};

struct ParquetLimits {
  int64_t max_page_bytes = int64_t{1} << 28;
  int64_t max_row_group_rows = int64_t{1} << 24;
};

class ParquetFile {
 public:
  ParquetFile() = default;  // no columns and no rows; Open reads a file
  // Reads the footer of the file held in `bytes`, which must outlive the object; `source` names
  // it in errors. INVALID_ARGUMENT for a file that is not Parquet or whose footer is malformed.
  static absl::StatusOr<ParquetFile> Open(absl::string_view bytes, std::string source,
                                          ParquetLimits limits = {});

  const std::vector<ParquetColumn>& columns() const { return columns_; }
  int64_t num_rows() const { return meta_.num_rows; }
  int num_row_groups() const { return static_cast<int>(meta_.row_groups.size()); }
  int64_t row_group_rows(int group) const { return meta_.row_groups[group].num_rows; }

  // Decodes column `column` (an index into columns()) of row group `group`: UNIMPLEMENTED naming
  // the column when it is unsupported, otherwise as the top of this file says.
  absl::StatusOr<ParquetColumnValues> ReadColumn(int group, int column) const;

 private:
  struct Leaf {
    int schema = 0;     // index into meta_.schema
    int chunk = 0;      // index into a row group's columns
    bool optional = false;
  };
  absl::Status ColumnError(int group, int column, absl::Status status) const;
  absl::Status DecodeChunk(int group, int column, ParquetColumnValues* out) const;

  absl::string_view bytes_;
  std::string source_;
  ParquetLimits limits_;
  size_t footer_start_ = 0;
  ParquetFileMetaData meta_;
  std::vector<ParquetColumn> columns_;
  std::vector<Leaf> leaves_;  // per column
};

// True when `head` (a file's first bytes) starts with Parquet's magic "PAR1".
bool LooksLikeParquet(absl::string_view head);

}  // namespace grove
