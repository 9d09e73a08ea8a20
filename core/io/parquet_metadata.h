// Parquet's footer (FileMetaData) and page headers, decoded from Thrift's compact protocol
// (core/io/thrift_compact.h): only the fields Grove's reader uses are kept, every other field is
// skipped. The enum values are those of parquet-format's parquet.thrift.
//
// Decoding checks the encoding only (well-formed, within the bytes); what the values mean (types,
// offsets, sizes) is checked by the reader (core/io/parquet.cc). Errors are INVALID_ARGUMENT with
// a message saying what is malformed, for the caller to prefix with the file.
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grove {

// parquet.thrift's Type.
enum ParquetType : int32_t {
  kParquetBoolean = 0,
  kParquetInt32 = 1,
  kParquetInt64 = 2,
  kParquetInt96 = 3,
  kParquetFloat = 4,
  kParquetDouble = 5,
  kParquetByteArray = 6,
  kParquetFixedLenByteArray = 7,
};
// FieldRepetitionType.
enum ParquetRepetition : int32_t {
  kParquetRequired = 0,
  kParquetOptional = 1,
  kParquetRepeated = 2
};
// Encoding.
enum ParquetEncoding : int32_t {
  kParquetPlain = 0,
  kParquetPlainDictionary = 2,
  kParquetRle = 3,
  kParquetBitPacked = 4,
  kParquetRleDictionary = 8,
};
// CompressionCodec.
enum ParquetCodec : int32_t {
  kParquetUncompressed = 0,
  kParquetSnappy = 1,
  kParquetGzip = 2,
  kParquetZstd = 6,
};
// PageType.
enum ParquetPageType : int32_t {
  kParquetDataPage = 0,
  kParquetIndexPage = 1,
  kParquetDictionaryPage = 2,
  kParquetDataPageV2 = 3,
};

// One SchemaElement.
struct ParquetSchemaElement {
  std::string name;
  int32_t type = -1;  // ParquetType; -1 for a group
  int32_t repetition = kParquetRequired;
  int32_t num_children = 0;
  int32_t converted_type = -1;  // ConvertedType; -1 when absent
  int32_t logical_type = -1;    // the LogicalType union's field id; -1 when absent
  int32_t int_bit_width = 0;    // LogicalType INTEGER (field 10)
  bool int_signed = true;
};

// A ColumnChunk and its ColumnMetaData.
struct ParquetColumnChunk {
  bool has_meta_data = false;
  bool external = false;  // file_path set: the data is in another file
  int32_t type = -1;
  std::vector<std::string> path;
  int32_t codec = kParquetUncompressed;
  int64_t num_values = 0;
  int64_t total_compressed_size = 0;
  int64_t data_page_offset = -1;
  int64_t dictionary_page_offset = -1;  // -1 when absent
};

struct ParquetRowGroup {
  std::vector<ParquetColumnChunk> columns;
  int64_t num_rows = 0;
};

struct ParquetFileMetaData {
  std::vector<ParquetSchemaElement> schema;  // depth-first; schema[0] is the root
  int64_t num_rows = 0;
  std::vector<ParquetRowGroup> row_groups;
};

// A PageHeader with the header of its kind.
struct ParquetPageHeader {
  int32_t type = -1;
  int32_t uncompressed_page_size = 0;
  int32_t compressed_page_size = 0;
  // DATA_PAGE, DATA_PAGE_V2, DICTIONARY_PAGE: their num_values and encoding.
  int32_t num_values = 0;
  int32_t encoding = kParquetPlain;
  bool has_kind_header = false;  // the header of `type` was present
  // DATA_PAGE: the encodings of the levels.
  int32_t definition_level_encoding = kParquetRle;
  int32_t repetition_level_encoding = kParquetRle;
  // DATA_PAGE_V2.
  int32_t num_nulls = 0;
  int32_t num_rows = 0;
  int32_t definition_levels_byte_length = 0;
  int32_t repetition_levels_byte_length = 0;
  bool is_compressed = true;
};

// Bounds on the lists of a footer, whose counts are untrusted: at most kMaxParquetListElements
// elements in one list (Arrow's default container limit is 1,000,000), and over every list kept
// (schema elements, row groups, column chunks, path elements) at most one element per
// kMinParquetFooterBytesPerElement bytes of the footer. A schema element holds its name, a row
// group its sizes, a column chunk its offsets and metadata: none is written in fewer bytes, while
// a one-byte empty struct would otherwise cost a ~100-byte object.
inline constexpr int64_t kMaxParquetListElements = int64_t{1} << 20;
inline constexpr int64_t kMinParquetFooterBytesPerElement = 4;

// Decodes the footer's FileMetaData (the bytes before the length and "PAR1"). INVALID_ARGUMENT
// also for a list beyond the bounds above, naming the list and the bound.
absl::StatusOr<ParquetFileMetaData> ParseParquetFileMetaData(absl::string_view bytes);

// Decodes the PageHeader at the start of `bytes`; `*header_size` receives its length in bytes.
absl::StatusOr<ParquetPageHeader> ParseParquetPageHeader(absl::string_view bytes,
                                                         size_t* header_size);

}  // namespace grove
