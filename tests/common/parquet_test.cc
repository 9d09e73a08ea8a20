#include "core/io/parquet.h"

#include <sys/resource.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/io/csv.h"
#include "core/io/decompress.h"
#include "core/io/parquet_encoding.h"
#include "core/io/parquet_rows.h"
#include "core/io/snappy.h"
#include "core/io/thrift_compact.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kData = std::string(GROVE_SOURCE_DIR) + "/tests/common/data/parquet/";

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Equal as bits, NaN equal to NaN.
bool SameDouble(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof(double)) == 0;
}

// A decoder standing for a categorical feature's: the text's length, so that any difference of
// the text passed shows.
absl::StatusOr<double> TextLength(std::string_view cell) {
  return static_cast<double>(cell.size()) + 0.5;
}

struct Rows {
  std::vector<double> values;
  std::vector<std::string> kept;
};

// Every row of `reader` (a CsvReader or ParquetRowReader), in chunks of 7.
template <typename Reader>
Rows Drain(Reader& reader) {
  Rows rows;
  std::vector<double> chunk;
  std::vector<std::string> kept;
  while (true) {
    auto n = reader.ReadRows(7, &chunk, &kept);
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok() || *n == 0) break;
    rows.values.insert(rows.values.end(), chunk.begin(), chunk.end());
    rows.kept.insert(rows.kept.end(), kept.begin(), kept.end());
  }
  return rows;
}

Rows ReadCsv(const std::string& path, const std::vector<std::string>& names,
             const std::vector<std::string>& keep, std::vector<CsvCellDecoder> decoders) {
  auto reader = CsvReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  auto header = (*reader)->ReadHeader();
  EXPECT_TRUE(header.ok()) << header.status();
  auto layout = MatchCsvHeader(*header, names, keep, path);
  EXPECT_TRUE(layout.ok()) << layout.status();
  (*reader)->SetLayout(*layout);
  (*reader)->SetCellDecoders(std::move(decoders));
  return Drain(**reader);
}

Rows ReadParquet(const std::string& path, const std::vector<std::string>& names,
                 const std::vector<std::string>& keep, std::vector<CsvCellDecoder> decoders) {
  auto reader = ParquetRowReader::Open(path, names, keep);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return {};
  (*reader)->SetCellDecoders(std::move(decoders));
  return Drain(**reader);
}

void ExpectSameRows(const Rows& want, const Rows& got) {
  ASSERT_EQ(want.values.size(), got.values.size());
  ASSERT_FALSE(want.values.empty());
  for (size_t i = 0; i < want.values.size(); ++i) {
    ASSERT_TRUE(SameDouble(want.values[i], got.values[i]))
        << "value " << i << ": " << want.values[i] << " != " << got.values[i];
  }
  EXPECT_EQ(want.kept, got.kept);
}

const char* const kCodecs[] = {"none", "snappy", "gzip", "zstd"};

TEST(Parquet, EveryTypeCodecAndPageKindGivesTheRowsOfTheSameTableAsCsv) {
  // The demo features in another order than the file's, the id passed through, a TIMESTAMP and a
  // DECIMAL column present but unused.
  const std::vector<std::string> names = {"f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7"};
  int files = 0;
  for (const char* codec : kCodecs) {
    for (const char* kind : {"dict", "plain"}) {
      for (const char* version : {"v1", "v2"}) {
        const std::string stem = absl::StrCat(kData, "types_", codec, "_", kind, "_", version);
        if (!std::ifstream(stem + ".parquet").good()) continue;
        SCOPED_TRACE(stem);
        ++files;
        ExpectSameRows(ReadCsv(stem + ".csv", names, {"id"}, {}),
                       ReadParquet(stem + ".parquet", names, {"id"}, {}));
        // Each value column decoded as a categorical feature's text.
        std::vector<CsvCellDecoder> decoders(names.size(), TextLength);
        // f6 and f7: FLOAT and DOUBLE, whose texts differ from the CSV's (the shortest float32
        // text; "nan" there, missing here); the decoders of real features read both alike.
        decoders[6] = decoders[7] = nullptr;
        ExpectSameRows(ReadCsv(stem + ".csv", names, {}, decoders),
                       ReadParquet(stem + ".parquet", names, {}, decoders));
      }
    }
  }
  EXPECT_EQ(files, 8);
}

TEST(Parquet, CategoryNamesWithNullsAsTheCsvPathReadsThem) {
  const std::vector<std::string> names = {"city", "x", "size"};
  int files = 0;
  for (const char* codec : kCodecs) {
    for (const char* rest : {"_dict_v1", "_plain_v1", "_dict_v2", "_plain_v2"}) {
      const std::string stem = absl::StrCat(kData, "cats_", codec, rest);
      if (!std::ifstream(stem + ".parquet").good()) continue;
      SCOPED_TRACE(stem);
      ++files;
      const std::vector<CsvCellDecoder> decoders = {TextLength, nullptr, TextLength};
      ExpectSameRows(ReadCsv(stem + ".csv", names, {"id", "city"}, decoders),
                     ReadParquet(stem + ".parquet", names, {"id", "city"}, decoders));
    }
  }
  EXPECT_EQ(files, 4);
}

TEST(Parquet, RowGroupsAndColumnsAreListed) {
  const std::string bytes = Slurp(kData + "types_zstd_dict_v2.parquet");
  auto file = ParquetFile::Open(bytes, "t.parquet");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->num_rows(), 200);
  EXPECT_EQ(file->num_row_groups(), 4);
  std::vector<std::string> names;
  for (const ParquetColumn& c : file->columns()) names.push_back(c.name);
  EXPECT_THAT(names,
              ElementsAre("f7", "id", "f0", "f1", "f2", "f3", "f4", "f5", "f6", "when", "price"));
  EXPECT_THAT(file->columns()[9].unsupported, HasSubstr("TIMESTAMP"));
  EXPECT_THAT(file->columns()[10].unsupported, HasSubstr("DECIMAL"));
  auto when = file->ReadColumn(1, 9);
  EXPECT_EQ(when.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(when.status().message(), HasSubstr("t.parquet: column 'when' is TIMESTAMP"));
  auto f1 = file->ReadColumn(3, 3);
  ASSERT_TRUE(f1.ok()) << f1.status();
  EXPECT_EQ(f1->numbers.size(), 200u - 3 * 64);
}

TEST(Parquet, UnsupportedColumnsAndFeaturesAreRefusedNamingThem) {
  const std::vector<std::string> names = {"f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7"};
  struct Case {
    const char* file;
    absl::StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {"refused_nested", absl::StatusCode::kUnimplemented,
       "refused_nested.parquet: column 'f3' is a nested column"},
      {"refused_decimal", absl::StatusCode::kUnimplemented,
       "refused_decimal.parquet: column 'f2' is DECIMAL"},
      {"refused_lz4", absl::StatusCode::kUnimplemented,
       "column 'f7', row group 0: page 0: compression LZ4"},
      {"refused_delta", absl::StatusCode::kUnimplemented,
       "column 'f4', row group 0: page 0: value encoding DELTA_BINARY_PACKED (5) is not "
       "supported"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    auto reader = ParquetRowReader::Open(kData + c.file + ".parquet", names, {});
    absl::Status status = reader.status();
    if (reader.ok()) {
      std::vector<double> rows;
      status = (*reader)->ReadRows(10, &rows, nullptr).status();
    }
    EXPECT_EQ(status.code(), c.code) << status;
    EXPECT_THAT(status.message(), HasSubstr(c.message));
  }
  // A nested or refused column nobody reads is no obstacle, and the columns after a nested one
  // (whose leaves are column chunks of their own) are found.
  const std::vector<std::string> some = {"f0", "f7", "f4", "f6"};
  auto reader = ParquetRowReader::Open(kData + "refused_nested.parquet", some, {"id"});
  ASSERT_TRUE(reader.ok()) << reader.status();
  ExpectSameRows(ReadCsv(kData + "types_snappy_dict_v2.csv", some, {"id"}, {}), Drain(**reader));
}

TEST(Parquet, MissingFeaturesAndStringsThatAreNotNumbers) {
  auto missing = ParquetRowReader::Open(kData + "cats_none_dict_v1.parquet", {"x", "height"}, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("'height'"));
  auto city = ParquetRowReader::Open(kData + "cats_none_dict_v1.parquet", {"x", "city"}, {});
  ASSERT_TRUE(city.ok()) << city.status();
  std::vector<float> rows;
  auto n = (*city)->ReadRows(1000, &rows, nullptr);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(n.status().message(),
              HasSubstr("cats_none_dict_v1.parquet: row 1, column 'city': 'lyon' is not a number"));
}

TEST(Parquet, TheFilesBoundsAreEnforced) {
  const std::string bytes = Slurp(kData + "types_snappy_plain_v1.parquet");
  ParquetLimits small_pages;
  small_pages.max_page_bytes = 64;
  auto file = ParquetFile::Open(bytes, "t.parquet", small_pages);
  ASSERT_TRUE(file.ok());
  auto column = file->ReadColumn(0, 0);
  EXPECT_EQ(column.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(column.status().message(), HasSubstr("column 'f7', row group 0: page 0: a page of"));
  ParquetLimits few_rows;
  few_rows.max_row_group_rows = 10;
  file = ParquetFile::Open(bytes, "t.parquet", few_rows);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->ReadColumn(0, 0).status().code(), absl::StatusCode::kResourceExhausted);

  EXPECT_THAT(ParquetFile::Open("PAR1 not parquet", "x").status().message(),
              HasSubstr("x: not a Parquet file"));
  std::string huge_footer = bytes;
  huge_footer[huge_footer.size() - 6] = '\x7f';
  EXPECT_THAT(ParquetFile::Open(huge_footer, "x").status().message(), HasSubstr("a footer of"));
}

TEST(Parquet, TruncatedFilesAreRefusedAndDamagedOnesReadSafely) {
  // Truncations (every 7th length) refused, and a byte set to 0xff at each position: an error or
  // rows, never a crash;
  // the fuzzer (tests/fuzz/parquet_fuzz.cc) explores further.
  const std::string bytes = Slurp(kData + "cats_snappy_plain_v1.parquet");
  const std::vector<std::string> names = {"x", "size"};
  int refused = 0;
  auto read_all = [&](std::string data) -> absl::Status {
    auto reader = ParquetRowReader::FromBytes(std::move(data), "d", names, {"city"});
    if (!reader.ok()) return reader.status();
    std::vector<double> rows;
    std::vector<std::string> kept;
    while (true) {
      auto n = (*reader)->ReadRows(50, &rows, &kept);
      if (!n.ok()) return n.status();
      if (*n == 0) return absl::OkStatus();
    }
  };
  ASSERT_TRUE(read_all(bytes).ok());
  for (size_t cut = 0; cut < bytes.size(); cut += 7) refused += !read_all(bytes.substr(0, cut)).ok();
  EXPECT_EQ(refused, static_cast<int>((bytes.size() + 6) / 7));
  // A damaged byte is read or refused with a canonical input error, never anything else.
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string damaged = bytes;
    damaged[i] = '\xff';
    const absl::Status s = read_all(damaged);
    EXPECT_TRUE(s.ok() || absl::IsInvalidArgument(s) || absl::IsUnimplemented(s) ||
                absl::IsResourceExhausted(s) || absl::IsFailedPrecondition(s))
        << "byte " << i << ": " << s;
  }
}

// Thrift compact bytes of hand-made footers and page headers (parquet.thrift's field ids).
class Compact {
 public:
  Compact& I32(int id, int64_t v) { return Int(id, 5, v); }
  Compact& I64(int id, int64_t v) { return Int(id, 6, v); }
  Compact& Binary(int id, const std::string& v) {
    Field(id, 8);
    Varint(v.size());
    out_ += v;
    return *this;
  }
  Compact& Begin(int id) {  // a struct field
    Field(id, 12);
    last_.push_back(0);
    return *this;
  }
  Compact& End() {
    out_.push_back('\0');
    last_.pop_back();
    return *this;
  }
  // A list field of `n` elements of `type`, written next by the caller (structs: BeginElement).
  Compact& List(int id, uint8_t type, uint64_t n) {
    Field(id, 9);
    if (n < 15) {
      out_.push_back(static_cast<char>((n << 4) | type));
    } else {
      out_.push_back(static_cast<char>(0xf0 | type));
      Varint(n);
    }
    return *this;
  }
  Compact& BeginElement() {
    last_.push_back(0);
    return *this;
  }
  Compact& Element(const std::string& v) {  // a binary list element
    Varint(v.size());
    out_ += v;
    return *this;
  }
  Compact& Element(int64_t v) {  // an integer list element
    Varint(static_cast<uint64_t>((v << 1) ^ (v >> 63)));
    return *this;
  }
  Compact& Raw(const std::string& bytes) {
    out_ += bytes;
    return *this;
  }
  std::string Done() {
    out_.push_back('\0');  // the top struct's stop
    return out_;
  }

 private:
  Compact& Int(int id, uint8_t type, int64_t v) {
    Field(id, type);
    return Element(v);
  }
  void Field(int id, uint8_t type) {
    const int delta = id - last_.back();
    last_.back() = id;
    if (delta > 0 && delta < 16) {
      out_.push_back(static_cast<char>((delta << 4) | type));
    } else {
      out_.push_back(static_cast<char>(type));
      Element(static_cast<int64_t>(id));
    }
  }
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  std::string out_;
  std::vector<int> last_{0};
};

std::string ParquetWithFooter(const std::string& data, const std::string& footer) {
  std::string file = "PAR1" + data + footer;
  const uint32_t length = static_cast<uint32_t>(footer.size());
  file.append(reinterpret_cast<const char*>(&length), 4);
  return file + "PAR1";
}

// A file of `columns` required DOUBLE columns and one row group that declares `rows` rows, each of
// whose chunks holds one data page of a single value.
std::string FileDeclaringRows(int columns, int64_t rows) {
  std::string data;
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;
  for (int c = 0; c < columns; ++c) {
    offsets.push_back(4 + static_cast<int64_t>(data.size()));
    const std::string page = Compact()
                                 .I32(1, kParquetDataPage)
                                 .I32(2, 8)
                                 .I32(3, 8)
                                 .Begin(5)
                                 .I32(1, 1)
                                 .I32(2, kParquetPlain)
                                 .I32(3, kParquetRle)
                                 .I32(4, kParquetRle)
                                 .End()
                                 .Done() +
                             std::string("\0\0\0\0\0\0\xf0\x3f", 8);  // 1.0
    sizes.push_back(static_cast<int64_t>(page.size()));
    data += page;
  }
  Compact footer;
  footer.I32(1, 1).List(2, 12, columns + 1);
  footer.BeginElement().Binary(4, "schema").I32(5, columns).End();
  for (int c = 0; c < columns; ++c) {
    footer.BeginElement().I32(1, kParquetDouble).I32(3, kParquetRequired);
    footer.Binary(4, absl::StrCat("c", c)).End();
  }
  footer.I64(3, rows).List(4, 12, 1).BeginElement().List(1, 12, columns);
  for (int c = 0; c < columns; ++c) {
    footer.BeginElement().I64(2, offsets[c]).Begin(3).I32(1, kParquetDouble);
    footer.List(2, 5, 1).Element(int64_t{kParquetPlain});
    footer.List(3, 8, 1).Element(absl::StrCat("c", c));
    footer.I32(4, kParquetUncompressed).I64(5, rows).I64(6, sizes[c]).I64(7, sizes[c]);
    footer.I64(9, offsets[c]).End().End();
  }
  footer.I64(2, static_cast<int64_t>(data.size())).I64(3, rows).End();
  return ParquetWithFooter(data, footer.Done());
}

TEST(Parquet, AHandMadeFileReads) {
  // The writer above, checked: a row group of the one row its pages hold.
  const std::string bytes = FileDeclaringRows(3, 1);
  std::vector<std::string> names = {"c0", "c1", "c2"};
  auto reader = ParquetRowReader::FromBytes(bytes, "one.parquet", names, {});
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<double> rows;
  absl::StatusOr<int64_t> n = (*reader)->ReadRows(10, &rows, nullptr);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);
  EXPECT_THAT(rows, ElementsAre(1.0, 1.0, 1.0));
}

// Reads the rows of `bytes` with 768 MiB more address space than the process maps now, and
// exits: 0 when they are refused for lacking rows (a child of EXPECT_EXIT).
void ReadUnderAnAddressLimit(const std::string& bytes, const std::vector<std::string>& names) {
  std::ifstream status("/proc/self/status");
  std::string line;
  int64_t vm_kib = 0;
  while (std::getline(status, line)) {
    if (line.rfind("VmSize:", 0) == 0) vm_kib = std::atoll(line.c_str() + 7);
  }
  rlimit limit;
  limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(vm_kib * 1024 + (int64_t{768} << 20));
  if (setrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(3);
  auto reader = ParquetRowReader::FromBytes(bytes, "rows.parquet", names, {});
  if (!reader.ok()) std::_Exit(4);
  std::vector<double> out;
  absl::StatusOr<int64_t> n = (*reader)->ReadRows(100, &out, nullptr);
  const bool refused = n.status().code() == absl::StatusCode::kInvalidArgument &&
                       n.status().message().find("ends after 1 of") != std::string::npos;
  std::_Exit(refused ? 0 : 5);
}

// A row group's declared row count sizes nothing: a few hundred bytes declaring 2^24 rows of 16
// columns (2 GiB of values) are refused for the rows they lack without that memory being taken.
// Run under an address-space limit in a child process (not with AddressSanitizer, whose shadow
// memory needs more address space than any such limit).
TEST(Parquet, DeclaredRowsAreNotAllocatedBeforeTheyDecode) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "an address-space limit and AddressSanitizer do not mix";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "an address-space limit and AddressSanitizer do not mix";
#endif
#endif
  const int columns = 16;
  const int64_t rows = int64_t{1} << 24;
  const std::string bytes = FileDeclaringRows(columns, rows);
  std::vector<std::string> names;
  for (int c = 0; c < columns; ++c) names.push_back(absl::StrCat("c", c));
  EXPECT_EXIT(ReadUnderAnAddressLimit(bytes, names),
      ::testing::ExitedWithCode(0), "");
}

TEST(Parquet, FooterListsAreBoundedByTheFootersSize) {
  // 30 one-byte schema elements in a footer of 34 bytes: more than one per 4 bytes.
  const std::string dense = Compact().List(2, 12, 30).Raw(std::string(30, '\0')).Done();
  absl::StatusOr<ParquetFile> file = ParquetFile::Open(ParquetWithFooter("", dense), "d.parquet");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(file.status().message(),
              HasSubstr("d.parquet: malformed footer: FileMetaData.schema: 30 more elements than a "
                        "footer of 34 bytes holds (at most one per 4 bytes over every list: 8)"));
  // The budget is shared by every list: row groups of one-byte column chunks exhaust it too.
  Compact groups;
  groups.List(4, 12, 2);
  for (int g = 0; g < 2; ++g) groups.BeginElement().List(1, 12, 6).Raw(std::string(6, '\0')).End();
  EXPECT_THAT(ParseParquetFileMetaData(groups.Done()).status().message(),
              HasSubstr("RowGroup.columns: 6 more elements than a footer of"));
  // One list holds at most kMaxParquetListElements, whatever the footer's size.
  const int64_t n = kMaxParquetListElements + 1;
  const std::string big = Compact().List(2, 12, static_cast<uint64_t>(n)).Done() +
                          std::string(static_cast<size_t>(4 * n), '\0');
  EXPECT_THAT(ParseParquetFileMetaData(big).status().message(),
              HasSubstr(absl::StrCat("FileMetaData.schema: a list of ", n,
                                     " elements (at most ", kMaxParquetListElements)));
}

TEST(Snappy, LiteralsAndOverlappingCopies) {
  // "abc" as a literal, then a copy of 9 bytes at offset 3 (1-byte offset form: length 4 + 5).
  const std::string block = std::string(
                                "\x0c\x08"
                                "abc",
                                5) +
                            std::string("\x15\x03", 2);
  std::string out;
  ASSERT_TRUE(SnappyDecompress(block, 12, &out).ok());
  EXPECT_EQ(out, "abcabcabcabc");
  // The 2-byte offset form.
  const std::string two = std::string(
                              "\x04\x04"
                              "ab",
                              4) +
                          std::string("\x06\x02\x00", 3);
  ASSERT_TRUE(SnappyDecompress(two, 4, &out).ok());
  EXPECT_EQ(out, "abab");
  EXPECT_THAT(SnappyDecompress(block, 11, &out).message(), HasSubstr("the page header says 11"));
  EXPECT_THAT(SnappyDecompress(std::string("\x0c\x08"
                                           "abc\x15\x04",
                                           7),
                               12, &out)
                  .message(),
              HasSubstr("a copy at offset 4 after 3 bytes"));
  EXPECT_THAT(SnappyDecompress(std::string("\x0c\x08"
                                           "abc\x15\x00",
                                           7),
                               12, &out)
                  .message(),
              HasSubstr("offset 0"));
  EXPECT_THAT(SnappyDecompress(std::string("\x0c\x20"
                                           "abc",
                                           5),
                               12, &out)
                  .message(),
              HasSubstr("truncated literal"));
  EXPECT_THAT(SnappyDecompress(std::string("\x02\x08"
                                           "abc",
                                           5),
                               2, &out)
                  .message(),
              HasSubstr("past the declared length"));
}

TEST(Decompress, EachCodecMustGiveTheDeclaredSize) {
  std::string out;
  EXPECT_TRUE(DecompressParquetPage(kParquetUncompressed, "abc", 3, &out).ok());
  EXPECT_FALSE(DecompressParquetPage(kParquetUncompressed, "abc", 4, &out).ok());
  // gzip of "hello" (python3 -c "import gzip; gzip.compress(b'hello', mtime=0)").
  const std::string gz(
      "\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff\xcb\x48\xcd\xc9\xc9\x07\x00\x86"
      "\xa6\x10\x36\x05\x00\x00\x00",
      25);
  ASSERT_TRUE(DecompressParquetPage(kParquetGzip, gz, 5, &out).ok());
  EXPECT_EQ(out, "hello");
  EXPECT_THAT(DecompressParquetPage(kParquetGzip, gz, 4, &out).message(), HasSubstr("gzip"));
  EXPECT_THAT(DecompressParquetPage(kParquetGzip, gz, 6, &out).message(), HasSubstr("gzip"));
  EXPECT_EQ(DecompressParquetPage(5, gz, 5, &out).code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(DecompressParquetPage(kParquetZstd, "not zstd", 5, &out).message(),
              HasSubstr("zstd"));
}

TEST(ParquetEncoding, RleHybridRunsAndBitPackedGroups) {
  std::vector<uint32_t> out;
  // The format's example: 0..7 bit-packed at width 3, then a run of five 4s.
  const std::string data("\x03\x88\xc6\xfa\x0a\x04", 6);
  ASSERT_TRUE(DecodeRleHybrid(data, 3, 13, &out).ok());
  EXPECT_THAT(out, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 4, 4, 4, 4, 4));
  EXPECT_THAT(DecodeRleHybrid(data, 3, 14, &out).message(), HasSubstr("end after 13 of 14"));
  EXPECT_THAT(DecodeRleHybrid(std::string("\x0a\x09", 2), 3, 5, &out).message(),
              HasSubstr("wider than 3 bits"));
  EXPECT_FALSE(DecodeRleHybrid(data, 33, 1, &out).ok());
  ASSERT_TRUE(DecodeRleHybrid("", 0, 0, &out).ok());
  // A count the runs do not hold is not allocated: the values grow as the runs decode.
  out = {};
  EXPECT_THAT(DecodeRleHybrid(data, 3, int64_t{1} << 50, &out).message(),
              HasSubstr("end after 13 of"));
  EXPECT_LT(out.capacity(), 1024u);
}

TEST(ThriftCompact, DepthAndSizesAreBounded) {
  std::string deep(200, '\x0c');  // struct fields nested in struct fields
  ThriftCompactReader deep_reader(deep);
  deep_reader.Skip(kThriftStruct);
  EXPECT_THAT(deep_reader.error(), HasSubstr("nested deeper than"));
  ThriftCompactReader list(std::string("\xf5\xff\xff\xff\x0f", 5));  // 2^32 - 1 i32s in 0 bytes
  uint8_t type;
  EXPECT_EQ(list.ReadListHeader(kThriftList, &type), 0);
  EXPECT_THAT(list.error(), HasSubstr("elements in 0 bytes"));
  EXPECT_FALSE(ParseParquetFileMetaData("\x19\xfc").ok());
}

}  // namespace
}  // namespace grove
