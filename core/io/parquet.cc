#include "core/io/parquet.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/utf8.h"
#include "core/io/decompress.h"
#include "core/io/parquet_encoding.h"

namespace grove {
namespace {

constexpr absl::string_view kMagic = "PAR1";

absl::Status Invalid(absl::string_view what) { return absl::InvalidArgumentError(what); }

// The LogicalType union's field id of a column, or, for a file that writes only the legacy
// ConvertedType, the id of its equivalent (kInterval for INTERVAL, which has none; -1: neither).
constexpr int32_t kInterval = 1000;
int32_t LogicalTypeOf(const ParquetSchemaElement& e) {
  if (e.logical_type >= 0) return e.logical_type;
  const int32_t c = e.converted_type;
  if (c == 0) return 1;                  // UTF8: STRING
  if (c == 1 || c == 2) return 2;        // MAP, MAP_KEY_VALUE
  if (c >= 3 && c <= 6) return c;        // LIST, ENUM, DECIMAL, DATE
  if (c == 7 || c == 8) return 7;        // TIME_*
  if (c == 9 || c == 10) return 8;       // TIMESTAMP_*
  if (c >= 11 && c <= 18) return 10;     // UINT_*, INT_*
  if (c == 19 || c == 20) return c - 7;  // JSON, BSON
  if (c == 21) return kInterval;
  return c < 0 ? -1 : 2000 + c;  // unknown: named by its converted type
}

// Why the column of schema element `e` cannot be read (empty when it can), and its kind.
std::string Classify(const ParquetSchemaElement& e, ParquetValueKind* kind) {
  if (e.type < 0 || e.num_children > 0) {
    return "a nested column (a struct, list or map; only flat columns are read)";
  }
  if (e.repetition == kParquetRepeated) return "a repeated column (lists are not read)";
  if (e.repetition != kParquetRequired && e.repetition != kParquetOptional) {
    return absl::StrCat("repetition ", e.repetition);
  }
  switch (LogicalTypeOf(e)) {
    case -1:
    case 1:
    case 4:
    case 10:
    case 11:
      break;  // none, STRING, ENUM, INTEGER, NULL
    case 2:
    case 3:
      return "a nested column (a list or map)";
    case 5:
      return "DECIMAL (convert it to FLOAT or DOUBLE)";
    case 6:
      return "DATE (convert it to a number, e.g. days since an epoch)";
    case 7:
      return "TIME (convert it to a number)";
    case 8:
      return "TIMESTAMP (convert it to a number, e.g. seconds since an epoch)";
    case 12:
      return "JSON";
    case 13:
      return "BSON";
    case 14:
      return "UUID";
    case 15:
      return "FLOAT16 (convert it to FLOAT)";
    case kInterval:
      return "INTERVAL";
    default:
      return e.logical_type >= 0 ? absl::StrCat("logical type ", e.logical_type)
                                 : absl::StrCat("converted type ", e.converted_type);
  }
  switch (e.type) {
    case kParquetBoolean:
      *kind = ParquetValueKind::kBoolean;
      return "";
    case kParquetInt32:
    case kParquetInt64:
      *kind = ParquetValueKind::kInteger;
      return "";
    case kParquetFloat:
    case kParquetDouble:
      *kind = ParquetValueKind::kNumber;
      return "";
    case kParquetByteArray:
      *kind = ParquetValueKind::kString;
      return "";
    case kParquetInt96:
      return "INT96 (a legacy timestamp; convert it to a number)";
    case kParquetFixedLenByteArray:
      return "FIXED_LEN_BYTE_ARRAY";
    default:
      return absl::StrCat("physical type ", e.type);
  }
}

bool IsUnsigned(const ParquetSchemaElement& e) {
  if (e.logical_type == 10) return !e.int_signed;
  return e.logical_type == -1 && e.converted_type >= 11 && e.converted_type <= 14;
}

// The subtree of schema[first] in depth-first order: sets *end past it and counts its leaves.
absl::Status Subtree(const std::vector<ParquetSchemaElement>& schema, size_t first, size_t* end,
                     int64_t* leaves) {
  int64_t pending = 1;
  size_t i = first;
  *leaves = 0;
  while (pending > 0) {
    if (i >= schema.size())
      return Invalid("malformed footer: the schema's children run past its end");
    --pending;
    const ParquetSchemaElement& e = schema[i++];
    if (e.num_children < 0) return Invalid("malformed footer: a negative child count");
    if (e.num_children > 0) {
      pending += e.num_children;
    } else if (e.type >= 0) {
      ++*leaves;
    }
  }
  *end = i;
  return absl::OkStatus();
}

const char* EncodingName(int32_t encoding) {
  switch (encoding) {
    case 0:
      return "PLAIN";
    case 2:
      return "PLAIN_DICTIONARY";
    case 3:
      return "RLE";
    case 4:
      return "BIT_PACKED";
    case 5:
      return "DELTA_BINARY_PACKED";
    case 6:
      return "DELTA_LENGTH_BYTE_ARRAY";
    case 7:
      return "DELTA_BYTE_ARRAY";
    case 8:
      return "RLE_DICTIONARY";
    case 9:
      return "BYTE_STREAM_SPLIT";
    default:
      return "an unknown encoding";
  }
}

absl::Status UnsupportedEncoding(int32_t encoding, absl::string_view what) {
  return absl::UnimplementedError(
      absl::StrCat(what, " encoding ", EncodingName(encoding), " (", encoding,
                   ") is not supported (PLAIN, PLAIN_DICTIONARY, RLE_DICTIONARY and RLE are)"));
}

}  // namespace

bool LooksLikeParquet(absl::string_view head) { return head.substr(0, 4) == kMagic; }

absl::StatusOr<ParquetFile> ParquetFile::Open(absl::string_view bytes, std::string source,
                                              ParquetLimits limits) {
  auto fail = [&source](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(source, ": ", s.message()));
  };
  if (bytes.size() < 12 || !LooksLikeParquet(bytes) || bytes.substr(bytes.size() - 4) != kMagic) {
    return fail(Invalid("not a Parquet file (PAR1 at its start and end)"));
  }
  uint32_t footer_len;
  std::memcpy(&footer_len, bytes.data() + bytes.size() - 8, 4);
  if (footer_len > bytes.size() - 12) {
    return fail(
        Invalid(absl::StrCat("a footer of ", footer_len, " bytes in a file of ", bytes.size())));
  }
  ParquetFile file;
  file.bytes_ = bytes;
  file.source_ = source;  // `fail` names it in the errors below
  file.limits_ = limits;
  file.footer_start_ = bytes.size() - 8 - footer_len;
  absl::StatusOr<ParquetFileMetaData> meta =
      ParseParquetFileMetaData(bytes.substr(file.footer_start_, footer_len));
  if (!meta.ok()) return fail(meta.status());
  file.meta_ = *std::move(meta);
  const std::vector<ParquetSchemaElement>& schema = file.meta_.schema;
  if (schema.empty()) return fail(Invalid("the schema is empty"));
  size_t end = 0;
  int64_t num_leaves;
  if (absl::Status s = Subtree(schema, 0, &end, &num_leaves); !s.ok()) return fail(s);
  if (end != schema.size())
    return fail(Invalid("malformed footer: schema elements after the root's"));
  // The root's children are the columns; a nested one's leaves are column chunks nobody reads.
  int chunk = 0;
  for (size_t i = 1; i < schema.size();) {
    int64_t leaves;
    if (absl::Status s = Subtree(schema, i, &end, &leaves); !s.ok()) return fail(s);
    ParquetColumn column;
    column.name = EscapeInvalidUtf8(schema[i].name);
    column.unsupported = Classify(schema[i], &column.kind);
    column.physical = schema[i].type;
    file.columns_.push_back(std::move(column));
    file.leaves_.push_back({static_cast<int>(i), chunk, schema[i].repetition == kParquetOptional});
    chunk += static_cast<int>(leaves);
    i = end;
  }
  int64_t rows = 0;
  for (size_t g = 0; g < file.meta_.row_groups.size(); ++g) {
    const ParquetRowGroup& group = file.meta_.row_groups[g];
    if (static_cast<int64_t>(group.columns.size()) != num_leaves) {
      return fail(Invalid(absl::StrCat("row group ", g, " has ", group.columns.size(),
                                       " column chunks; the schema has ", num_leaves, " columns")));
    }
    if (group.num_rows < 0 || group.num_rows > std::numeric_limits<int64_t>::max() - rows) {
      return fail(Invalid(absl::StrCat("row group ", g, ": ", group.num_rows, " rows")));
    }
    rows += group.num_rows;
  }
  if (rows != file.meta_.num_rows) {
    return fail(Invalid(absl::StrCat("the row groups hold ", rows, " rows; the footer says ",
                                     file.meta_.num_rows)));
  }
  return file;
}

absl::Status ParquetFile::ColumnError(int group, int column, absl::Status status) const {
  return absl::Status(status.code(), absl::StrCat(source_, ": column '", columns_[column].name,
                                                  "', row group ", group, ": ", status.message()));
}

absl::StatusOr<ParquetColumnValues> ParquetFile::ReadColumn(int group, int column) const {
  if (column < 0 || column >= static_cast<int>(columns_.size()) || group < 0 ||
      group >= num_row_groups()) {
    return absl::OutOfRangeError(
        absl::StrCat(source_, ": no column ", column, " of row group ", group));
  }
  if (!columns_[column].unsupported.empty()) {
    return absl::UnimplementedError(absl::StrCat(source_, ": column '", columns_[column].name,
                                                 "' is ", columns_[column].unsupported,
                                                 ", which grove does not read"));
  }
  ParquetColumnValues out;
  if (absl::Status s = DecodeChunk(group, column, &out); !s.ok()) {
    return ColumnError(group, column, s);
  }
  return out;
}

absl::Status ParquetFile::DecodeChunk(int group, int column, ParquetColumnValues* out) const {
  const Leaf& leaf = leaves_[column];
  const ParquetSchemaElement& e = meta_.schema[leaf.schema];
  const ParquetRowGroup& rg = meta_.row_groups[group];
  const ParquetColumnChunk& chunk = rg.columns[leaf.chunk];
  const ParquetValueKind kind = columns_[column].kind;
  const bool strings = kind == ParquetValueKind::kString;
  out->kind = kind;
  const int64_t rows = rg.num_rows;
  if (rows > limits_.max_row_group_rows) {
    return absl::ResourceExhaustedError(absl::StrCat(rows, " rows in a row group; at most ",
                                                     limits_.max_row_group_rows, " are read"));
  }
  if (!chunk.has_meta_data) return Invalid("the column chunk has no metadata");
  if (chunk.external) return absl::UnimplementedError("the column chunk is in another file");
  if (chunk.type != e.type) {
    return Invalid(absl::StrCat("the chunk's type ", chunk.type, " is not the schema's ", e.type));
  }
  int64_t start = chunk.data_page_offset;
  if (chunk.dictionary_page_offset > 0 && chunk.dictionary_page_offset < start) {
    start = chunk.dictionary_page_offset;
  }
  const int64_t footer = static_cast<int64_t>(footer_start_);
  if (start < 4 || start > footer || chunk.total_compressed_size < 0 ||
      chunk.total_compressed_size > footer - start) {
    return Invalid(absl::StrCat("the column chunk's bytes [", start, ", +",
                                chunk.total_compressed_size, ") are not within the file's data"));
  }
  const absl::string_view data =
      bytes_.substr(static_cast<size_t>(start), static_cast<size_t>(chunk.total_compressed_size));
  const ParquetNumberType number_type{e.type, IsUnsigned(e)};

  // The values grow as pages decode, never sized by the declared row count.
  std::string dictionary_page;  // the decompressed dictionary of numbers
  std::vector<double> dict_numbers;
  std::vector<absl::string_view> dict_strings;
  bool has_dictionary = false;
  std::string page;
  std::vector<uint32_t> levels, indices;
  std::vector<double> numbers;
  std::vector<absl::string_view> texts;
  int64_t done = 0;
  size_t pos = 0;
  int page_index = 0;
  while (done < rows) {
    if (pos >= data.size()) {
      return Invalid(absl::StrCat("the column chunk ends after ", done, " of ", rows, " rows"));
    }
    size_t header_size;
    absl::StatusOr<ParquetPageHeader> header =
        ParseParquetPageHeader(data.substr(pos), &header_size);
    if (!header.ok()) return header.status();
    pos += header_size;
    const ParquetPageHeader& h = *header;
    const std::string where = absl::StrCat("page ", page_index++, ": ");
    if (h.compressed_page_size < 0 ||
        static_cast<uint64_t>(h.compressed_page_size) > data.size() - pos) {
      return Invalid(absl::StrCat(where, "a page of ", h.compressed_page_size,
                                  " bytes past the end of the column chunk"));
    }
    if (h.uncompressed_page_size < 0 || h.uncompressed_page_size > limits_.max_page_bytes ||
        h.compressed_page_size > limits_.max_page_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          where, "a page of ", h.uncompressed_page_size, " bytes (", h.compressed_page_size,
          " compressed); at most ", limits_.max_page_bytes, " are read"));
    }
    const absl::string_view raw = data.substr(pos, static_cast<size_t>(h.compressed_page_size));
    pos += static_cast<size_t>(h.compressed_page_size);
    if (h.type == kParquetIndexPage) continue;
    if (h.type != kParquetDictionaryPage && h.type != kParquetDataPage &&
        h.type != kParquetDataPageV2) {
      return absl::UnimplementedError(absl::StrCat(where, "page type ", h.type, " is not read"));
    }
    if (!h.has_kind_header)
      return Invalid(absl::StrCat(where, "the page header lacks its kind's header"));
    auto page_error = [&where](const absl::Status& s) {
      return absl::Status(s.code(), absl::StrCat(where, s.message()));
    };

    if (h.type == kParquetDictionaryPage) {
      if (has_dictionary || done > 0)
        return Invalid(absl::StrCat(where, "a second dictionary page"));
      if (h.encoding != kParquetPlain && h.encoding != kParquetPlainDictionary) {
        return page_error(UnsupportedEncoding(h.encoding, "dictionary"));
      }
      if (e.type == kParquetBoolean)
        return Invalid(absl::StrCat(where, "a dictionary of booleans"));
      // A dictionary of strings stays with the values, which view it.
      std::unique_ptr<std::string> kept;
      if (strings) kept = std::make_unique<std::string>();
      std::string* target = strings ? kept.get() : &dictionary_page;
      if (absl::Status s = DecompressParquetPage(
              chunk.codec, raw, static_cast<size_t>(h.uncompressed_page_size), target);
          !s.ok()) {
        return page_error(s);
      }
      if (kept != nullptr) out->buffers.push_back(std::move(kept));
      const std::string& dictionary_bytes = *target;
      if (h.num_values < 0) return Invalid(absl::StrCat(where, "a negative dictionary size"));
      size_t used;
      absl::Status s =
          strings ? DecodePlainByteArrays(dictionary_bytes, h.num_values, &dict_strings, &used)
                  : DecodePlainNumbers(dictionary_bytes, number_type, h.num_values, &dict_numbers,
                                       &used);
      if (!s.ok()) return page_error(s);
      has_dictionary = true;
      continue;
    }

    // A data page: its levels, then its values.
    const int64_t num_values = h.num_values;
    if (num_values < 0 || num_values > rows - done) {
      return Invalid(absl::StrCat(where, num_values, " values where ", rows - done,
                                  " rows of the row group are left"));
    }
    absl::string_view values;
    // PLAIN strings are views into their page, which then stays with the values.
    std::unique_ptr<std::string> kept_page;
    if (strings && h.encoding == kParquetPlain) kept_page = std::make_unique<std::string>();
    std::string& page_bytes = kept_page != nullptr ? *kept_page : page;
    if (h.type == kParquetDataPage) {
      if (absl::Status s = DecompressParquetPage(
              chunk.codec, raw, static_cast<size_t>(h.uncompressed_page_size), &page_bytes);
          !s.ok()) {
        return page_error(s);
      }
      values = page_bytes;
      if (leaf.optional) {
        if (h.definition_level_encoding != kParquetRle) {
          return page_error(UnsupportedEncoding(h.definition_level_encoding, "definition level"));
        }
        size_t used;
        if (absl::Status s = DecodeLengthPrefixedRle(values, 1, num_values, &levels, &used);
            !s.ok()) {
          return page_error(s);
        }
        values.remove_prefix(used);
      }
    } else {
      if (h.repetition_levels_byte_length != 0) {
        return Invalid(absl::StrCat(where, "repetition levels in a flat column"));
      }
      const int64_t level_bytes = h.definition_levels_byte_length;
      if (level_bytes < 0 || level_bytes > h.compressed_page_size ||
          level_bytes > h.uncompressed_page_size) {
        return Invalid(absl::StrCat(where, "definition levels of ", level_bytes,
                                    " bytes in a page of ", h.compressed_page_size));
      }
      const absl::string_view level_data = raw.substr(0, static_cast<size_t>(level_bytes));
      const absl::string_view rest = raw.substr(static_cast<size_t>(level_bytes));
      const size_t value_size = static_cast<size_t>(h.uncompressed_page_size - level_bytes);
      if (absl::Status s =
              h.is_compressed
                  ? DecompressParquetPage(chunk.codec, rest, value_size, &page_bytes)
                  : DecompressParquetPage(kParquetUncompressed, rest, value_size, &page_bytes);
          !s.ok()) {
        return page_error(s);
      }
      values = page_bytes;
      if (leaf.optional) {
        if (absl::Status s = DecodeRleHybrid(level_data, 1, num_values, &levels); !s.ok()) {
          return page_error(s);
        }
      } else if (level_bytes != 0) {
        return Invalid(absl::StrCat(where, "definition levels in a required column"));
      }
    }
    int64_t present = num_values;
    if (leaf.optional) {
      present = 0;
      for (int64_t i = 0; i < num_values; ++i) present += levels[static_cast<size_t>(i)];
    }

    numbers.clear();
    texts.clear();
    size_t used = 0;
    absl::Status s;
    switch (h.encoding) {
      case kParquetPlain:
        s = strings ? DecodePlainByteArrays(values, present, &texts, &used)
                    : DecodePlainNumbers(values, number_type, present, &numbers, &used);
        break;
      case kParquetPlainDictionary:
      case kParquetRleDictionary: {
        if (!has_dictionary)
          return Invalid(absl::StrCat(where, "dictionary indices without a dictionary page"));
        if (values.empty()) {
          if (present > 0)
            return Invalid(absl::StrCat(where, "dictionary indices without their bit width"));
          break;
        }
        const int width = static_cast<uint8_t>(values[0]);
        s = DecodeRleHybrid(values.substr(1), width, present, &indices);
        if (!s.ok()) break;
        const size_t dict_size = strings ? dict_strings.size() : dict_numbers.size();
        for (uint32_t index : indices) {
          if (index >= dict_size) {
            return Invalid(
                absl::StrCat(where, "dictionary index ", index, " of a dictionary of ", dict_size));
          }
          if (strings)
            texts.push_back(dict_strings[index]);
          else
            numbers.push_back(dict_numbers[index]);
        }
        break;
      }
      case kParquetRle: {
        if (e.type != kParquetBoolean) return page_error(UnsupportedEncoding(h.encoding, "value"));
        s = DecodeLengthPrefixedRle(values, 1, present, &indices, &used);
        for (uint32_t bit : indices) numbers.push_back(bit);
        break;
      }
      default:
        return page_error(UnsupportedEncoding(h.encoding, "value"));
    }
    if (!s.ok()) return page_error(s);
    if (kept_page != nullptr) out->buffers.push_back(std::move(kept_page));

    // Scatter the present values among the page's rows, nulls where the level is 0.
    size_t k = 0;
    for (int64_t i = 0; i < num_values; ++i) {
      const bool has = !leaf.optional || levels[static_cast<size_t>(i)] != 0;
      if (strings) {
        out->strings.emplace_back(has ? texts[k] : absl::string_view());
        out->present.push_back(has ? 1 : 0);
      } else {
        out->numbers.push_back(has ? numbers[k] : std::numeric_limits<double>::quiet_NaN());
      }
      k += has ? 1 : 0;
    }
    done += num_values;
  }
  return absl::OkStatus();
}

}  // namespace grove
