#include "core/io/csv.h"

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grove {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) /
          (std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(CsvParse, NumbersMissingValuesAndLineEnds) {
  std::vector<float> v;
  int64_t cols = 0;
  ASSERT_TRUE(ParseCsvFloats("1,2.5,-3e2\r\nnan,,NaN\n +4 ,\t-0.25,inf\n-nan,1e-3,-Infinity",
                             "t.csv", &cols, &v)
                  .ok());
  ASSERT_EQ(cols, 3);
  ASSERT_EQ(v.size(), 12u);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 2.5f);
  EXPECT_EQ(v[2], -300.0f);
  EXPECT_TRUE(std::isnan(v[3]));
  EXPECT_TRUE(std::isnan(v[4]));
  EXPECT_TRUE(std::isnan(v[5]));
  EXPECT_EQ(v[6], 4.0f);
  EXPECT_EQ(v[7], -0.25f);
  EXPECT_EQ(v[8], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(v[9]));
  EXPECT_EQ(v[10], 1e-3f);
  EXPECT_EQ(v[11], -std::numeric_limits<float>::infinity());
}

// Blank lines before the first row and after the last are skipped; one between rows is an error
// naming its line (skipping it would shift every later result by one row); for one-column rows a
// blank line is a row whose value is missing.
TEST(CsvParse, BlankLinesOnlyBeforeAndAfterTheRows) {
  std::vector<double> v;
  int64_t cols = 0;
  ASSERT_TRUE(ParseCsvDoubles("\n  \r\n1,2\n3,4\n\n \n", "t.csv", &cols, &v).ok());
  EXPECT_EQ(cols, 2);
  EXPECT_EQ(v, (std::vector<double>{1, 2, 3, 4}));
  v.clear();
  cols = 0;
  absl::Status s = ParseCsvDoubles("1,2\n\n  \r\n3,4\n", "t.csv", &cols, &v);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("t.csv:2: blank line between rows (the next row is on line 4)"));
  // Rows the caller's vector already holds are not rows of this text: its leading blank is fine.
  v = {9, 9};
  cols = 2;
  ASSERT_TRUE(ParseCsvDoubles("\n5,6\n", "t.csv", &cols, &v).ok());
  EXPECT_EQ(v, (std::vector<double>{9, 9, 5, 6}));
  v.clear();
  cols = 1;
  ASSERT_TRUE(ParseCsvDoubles("1\n\n3\n", "t.csv", &cols, &v).ok());
  ASSERT_EQ(v.size(), 3u);
  EXPECT_TRUE(std::isnan(v[1]));
}

// XGBoost receives float64 arrays and casts each value to float32; parsing the text straight to
// float32 can round differently (double rounding). This value is just above the midpoint between
// 1 and the next float, but its nearest double is the midpoint, which then rounds to even (1.0).
TEST(CsvParse, ParsesAsDoubleThenCastsToFloat) {
  const char* text = "1.00000005960464477625798673798840354720596224069595336914062";
  std::vector<float> v;
  int64_t cols = 0;
  ASSERT_TRUE(ParseCsvFloats(text, "t.csv", &cols, &v).ok());
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0], static_cast<float>(std::strtod(text, nullptr)));
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_NE(v[0], std::strtof(text, nullptr));
}

TEST(CsvParse, DoublesKeepFullPrecision) {
  std::vector<double> v;
  int64_t cols = 0;
  ASSERT_TRUE(ParseCsvDoubles("0.1,1e-310,1e400,-1e400", "t.csv", &cols, &v).ok());
  EXPECT_EQ(v[0], 0.1);
  EXPECT_EQ(v[1], 1e-310);
  EXPECT_EQ(v[2], std::numeric_limits<double>::infinity());
  EXPECT_EQ(v[3], -std::numeric_limits<double>::infinity());
}

TEST(CsvParse, WrongColumnCountNamesFileAndLine) {
  std::vector<float> v;
  int64_t cols = 0;
  absl::Status s = ParseCsvFloats("1,2,3\n4,5,6\n7,8\n", "rows.csv", &cols, &v);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("rows.csv:3"));
  EXPECT_THAT(s.message(), HasSubstr("expected 3 fields, found 2"));

  cols = 2;
  v.clear();
  s = ParseCsvFloats("1,2\n4,5,6,7\n", "rows.csv", &cols, &v);
  EXPECT_THAT(s.message(), HasSubstr("rows.csv:2: expected 2 fields, found 4"));
}

TEST(CsvParse, TextInANumberFieldNamesFileLineAndField) {
  std::vector<float> v;
  int64_t cols = 0;
  for (const char* bad : {"1,abc,3", "1,2x,3", "1,--2,3", "1,+-2,3", "1,0x10,3", "1,1 2,3",
                          "1,+,3"}) {
    v.clear();
    cols = 0;
    absl::Status s = ParseCsvFloats(std::string("4,5,6\n") + bad, "in.csv", &cols, &v);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("in.csv:2: field 2")) << bad;
    EXPECT_THAT(s.message(), HasSubstr("is not a number")) << bad;
  }
}

TEST(CsvReader, MissingFileIsNotFoundAndNamesIt) {
  auto r = CsvReader::Open("/nonexistent/dir/X.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("/nonexistent/dir/X.csv"));
  auto m = ReadCsvFloats("/nonexistent/dir/X.csv");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
}

TEST(CsvReader, DirectoryIsRefused) {
  auto r = CsvReader::Open(::testing::TempDir());
  EXPECT_FALSE(r.ok());
}

TEST(CsvReader, StreamsChunksAcrossBufferBoundaries) {
  // ~6 MB: several refills of the 1 MiB read buffer, lines split across them.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1000, 1000);
  const int rows = 100000;
  const int cols = 7;
  std::vector<float> want;
  std::string text;
  char buf[40];
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      float x = (r * 7 + c) % 13 == 0 ? std::numeric_limits<float>::quiet_NaN() : dist(rng);
      want.push_back(x);
      char* e = FormatCsvNumber(x, buf);
      text.append(buf, e);
      text += c + 1 < cols ? "," : (r % 2 ? "\r\n" : "\n");
    }
  }
  text.pop_back();  // no final newline
  const std::string path = WriteFile("stream.csv", text);
  auto reader = CsvReader::Open(path, cols);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<float> got, chunk;
  int64_t total = 0;
  while (true) {
    auto n = (*reader)->ReadRows(3001, &chunk);
    ASSERT_TRUE(n.ok()) << n.status();
    if (*n == 0) break;
    EXPECT_LE(*n, 3001);
    EXPECT_EQ(static_cast<int64_t>(chunk.size()), *n * cols);
    got.insert(got.end(), chunk.begin(), chunk.end());
    total += *n;
  }
  EXPECT_EQ(total, rows);
  EXPECT_EQ((*reader)->rows_read(), rows);
  EXPECT_EQ((*reader)->bytes_consumed(), static_cast<int64_t>(text.size()));
  EXPECT_EQ((*reader)->total_bytes(), static_cast<int64_t>(text.size()));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << i;
    } else {
      ASSERT_EQ(got[i], want[i]) << i;
    }
  }
  std::filesystem::remove(path);
}

TEST(CsvReader, LineLongerThanTheReadBuffer) {
  const int cols = 300000;  // ~600 KB per line, 3 lines > 1 MiB buffer
  std::string line;
  for (int c = 0; c < cols; ++c) line += c ? ",1" : "1";
  const std::string path = WriteFile("long.csv", line + "\n" + line + "\n" + line + "\n");
  auto m = ReadCsvFloats(path);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->rows, 3);
  EXPECT_EQ(m->cols, cols);
  std::filesystem::remove(path);
}

TEST(CsvReader, ErrorLineNumbersCountBlankLines) {
  const std::string path = WriteFile("bad.csv", "\n1,2\n3,4\n5,x\n");
  auto m = ReadCsvFloats(path);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr(path + ":4: field 2 ('x') is not a number"));
  std::filesystem::remove(path);
}

// The streaming reader keeps the rule across its chunks: a blank line between rows fails the read
// even when the rows around it come in different ReadRows calls.
TEST(CsvReader, BlankLineBetweenRowsFailsAcrossChunks) {
  const std::string path = WriteFile("gap.csv", "1,2\n3,4\n\n5,6\n");
  absl::StatusOr<std::unique_ptr<CsvReader>> r = CsvReader::Open(path, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<float> chunk;
  absl::StatusOr<int64_t> first = (*r)->ReadRows(2, &chunk);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, 2);
  absl::StatusOr<int64_t> second = (*r)->ReadRows(2, &chunk);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr(path + ":3: blank line between rows"));
  std::filesystem::remove(path);
}

// Every field reads as std::from_chars reads it, whether or not the fast path for short decimals
// takes it: random values in many formats, with the blanks, signs and missing values the format
// allows around them.
TEST(CsvParse, FieldsMatchFromCharsBitForBit) {
  std::mt19937_64 rng(17);
  std::uniform_int_distribution<int> exponent(-40, 40);
  std::uniform_real_distribution<double> unit(-1, 1);
  std::uniform_int_distribution<int> pick(0, 99);
  const char* formats[] = {"%.9g", "%.17g", "%.3g", "%.12e", "%.6f", "%.25g"};
  const int cols = 13;
  std::string text;
  std::vector<double> want;
  char buf[512];
  for (int r = 0; r < 3000; ++r) {
    for (int c = 0; c < cols; ++c) {
      if (c > 0) text += ',';
      const int roll = pick(rng);
      if (roll < 3) {
        text += roll == 0 ? "" : roll == 1 ? "nan" : " NaN ";
        want.push_back(std::numeric_limits<double>::quiet_NaN());
        continue;
      }
      double v = unit(rng) * std::pow(10.0, exponent(rng));
      if (roll < 10) {
        const uint64_t b = rng();
        std::memcpy(&v, &b, 8);
        if (!std::isfinite(v)) v = 0.5;
      }
      std::snprintf(buf, sizeof(buf), formats[roll % 6], v);
      std::string field = buf;
      double parsed;
      const auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), parsed);
      ASSERT_EQ(ptr, field.data() + field.size()) << field;
      // Out of range (a value that rounds past the largest double, or to zero) reads as strtod.
      want.push_back(ec == std::errc() ? parsed : std::strtod(field.c_str(), nullptr));
      if (roll < 15 && field[0] != '-') field = "+" + field;
      if (roll >= 95) field = " \t" + field + "\t ";
      text += field;
    }
    text += r % 5 == 0 ? "\r\n" : "\n";
  }
  std::vector<double> got;
  int64_t got_cols = 0;
  ASSERT_TRUE(ParseCsvDoubles(text, "t.csv", &got_cols, &got).ok());
  EXPECT_EQ(got_cols, cols);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << i;
    } else {
      ASSERT_EQ(std::memcmp(&got[i], &want[i], 8), 0) << i << ": " << got[i] << " vs " << want[i];
    }
  }
}

// Values no fast path takes still read as before: subnormals, overflow to +-inf, long mantissas.
TEST(CsvParse, LongSubnormalAndOverflowingValues) {
  std::vector<double> v;
  int64_t cols = 0;
  ASSERT_TRUE(ParseCsvDoubles("4.9406564584124654e-324,1e-400,-1e400,12345678901234567890123,-0,"
                              ".5,5.,-.5,1e22,1e23,9007199254740993",
                              "t.csv", &cols, &v)
                  .ok());
  ASSERT_EQ(cols, 11);
  EXPECT_EQ(v[0], 4.9406564584124654e-324);
  EXPECT_EQ(v[1], 0.0);
  EXPECT_EQ(v[2], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(v[3], 12345678901234567890123.0);
  EXPECT_TRUE(std::signbit(v[4]));
  EXPECT_EQ(v[5], 0.5);
  EXPECT_EQ(v[6], 5.0);
  EXPECT_EQ(v[7], -0.5);
  EXPECT_EQ(v[8], 1e22);
  EXPECT_EQ(v[9], 1e23);
  EXPECT_EQ(v[10], 9007199254740992.0);  // the nearest double (ties to even)
  for (const char* bad : {"1e", "1e+", "5..", "-", ".", "1-", "inf5", "2e,1"}) {
    v.clear();
    cols = 0;
    absl::Status s = ParseCsvDoubles(std::string("3,") + bad, "t.csv", &cols, &v);
    EXPECT_THAT(s.message(), HasSubstr("t.csv:1: field 2")) << bad;
  }
}

// A file of `rows` rows of 9 columns written like grove's own output; line `bad_line` (1-based,
// 0: none) replaced by `bad`.
std::string ManyRows(int rows, int bad_line = 0, const std::string& bad = "") {
  std::mt19937 rng(23);
  std::normal_distribution<float> normal;
  std::string text;
  char buf[40];
  for (int r = 1; r <= rows; ++r) {
    if (r == bad_line) {
      text += bad + "\n";
      continue;
    }
    for (int c = 0; c < 9; ++c) {
      const float x = (r + c) % 17 == 0 ? std::numeric_limits<float>::quiet_NaN()
                                         : normal(rng) * static_cast<float>(c * c + 1);
      char* e = FormatCsvNumber(x, buf);
      text.append(buf, e);
      text += c < 8 ? "," : (r % 3 ? "\n" : "\r\n");
    }
  }
  return text;
}

// Reads `path` with `threads` threads in chunks of `chunk` rows: a hash of every value's bits, the
// rows and the bytes read, or the error.
std::string ReadAll(const std::string& path, int threads, int64_t chunk) {
  absl::StatusOr<std::unique_ptr<CsvReader>> reader = CsvReader::Open(path, 9, threads);
  if (!reader.ok()) return reader.status().ToString();
  std::vector<double> values;
  uint64_t hash = 14695981039346656037u;
  while (true) {
    absl::StatusOr<int64_t> n = (*reader)->ReadRows(chunk, &values);
    if (!n.ok()) return n.status().ToString();
    if (*n == 0) break;
    EXPECT_EQ(values.size(), static_cast<size_t>(*n * (*reader)->cols()));
    for (double v : values) {
      uint64_t bits;
      std::memcpy(&bits, &v, 8);
      hash = (hash ^ bits) * 1099511628211u;
    }
  }
  return absl::StrCat("hash ", hash, " rows ", (*reader)->rows_read(), " bytes ",
                      (*reader)->bytes_consumed());
}

// Several threads parse runs of lines of each block; the rows, and the error when there is one,
// are exactly one thread's.
TEST(CsvReader, ThreadsReadTheSameRowsAndTheSameFirstError) {
  const int rows = 60000;  // ~4 MB: several blocks, and many runs per block
  struct Variant {
    int bad_line;
    std::string bad;
    std::string error;  // expected in the message; empty: reads
  };
  const std::vector<Variant> variants = {
      {0, "", ""},
      {35001, "1,2,3,4,5,6,7,8,x", ":35001: field 9 ('x') is not a number"},
      {49999, "1,2,3", ":49999: expected 9 fields, found 3"},
      {25000, "1,2,3,4,5,6,7,8,9,10", ":25000: expected 9 fields, found 10"},
      {30000, " ", ":30000: blank line between rows (the next row is on line 30001)"},
      {rows, "", ""},  // a blank last line is skipped
  };
  for (const Variant& v : variants) {
    const std::string text = ManyRows(rows, v.bad_line, v.bad);
    const std::string path = WriteFile("threads.csv", text);
    const std::string one = ReadAll(path, 1, 5000);
    if (v.error.empty()) {
      EXPECT_THAT(one, HasSubstr(" rows " + std::to_string(v.bad_line == rows ? rows - 1 : rows)));
      EXPECT_THAT(one, HasSubstr(" bytes " + std::to_string(text.size())));
    } else {
      EXPECT_THAT(one, HasSubstr(path + v.error));
    }
    for (int threads : {2, 3, 8}) {
      for (int64_t chunk : {int64_t{1} << 20, int64_t{7777}}) {
        EXPECT_EQ(ReadAll(path, threads, chunk), one)
            << v.bad_line << " threads " << threads << " chunk " << chunk;
      }
    }
    std::filesystem::remove(path);
  }
  // Two bad lines far apart, in different runs: the first is named.
  std::string text = ManyRows(rows, 50000, "1,2,3,4,5,6,7,8,bad2");
  text.replace(text.find('\n', text.size() / 10) + 1, 0, "1,2,3,4,5,6,7,bad1,9\n");
  const std::string path = WriteFile("two_errors.csv", text);
  for (int threads : {1, 2, 8}) {
    const std::string got = ReadAll(path, threads, 1 << 20);
    EXPECT_THAT(got, HasSubstr("('bad1') is not a number")) << threads;
  }
  std::filesystem::remove(path);
}

TEST(CsvReader, ThreadsWithAHeaderKeepTheKeptColumnsInOrder) {
  std::string text = "id,a,b\n";
  for (int r = 0; r < 50000; ++r) {
    text += "x" + std::to_string(r) + "," + std::to_string(r) + ".5," + std::to_string(-r) + "\n";
  }
  const std::string path = WriteFile("threads_header.csv", text);
  for (int threads : {1, 4}) {
    absl::StatusOr<std::unique_ptr<CsvReader>> reader = CsvReader::Open(path, 2, threads);
    ASSERT_TRUE(reader.ok());
    absl::StatusOr<std::vector<std::string>> names = (*reader)->ReadHeader();
    ASSERT_TRUE(names.ok()) << names.status();
    (*reader)->SetLayout(*MatchCsvHeader(*names, {"b", "a"}, {"id"}, path));
    std::vector<float> values;
    std::vector<std::string> kept;
    int64_t seen = 0;
    while (true) {
      absl::StatusOr<int64_t> n = (*reader)->ReadRows(3000, &values, &kept);
      ASSERT_TRUE(n.ok()) << n.status();
      if (*n == 0) break;
      ASSERT_EQ(kept.size(), static_cast<size_t>(*n));
      for (int64_t i = 0; i < *n; ++i, ++seen) {
        ASSERT_EQ(kept[i], "x" + std::to_string(seen));
        ASSERT_EQ(values[2 * i], static_cast<float>(-seen));
        ASSERT_EQ(values[2 * i + 1], static_cast<float>(seen + 0.5));
      }
    }
    EXPECT_EQ(seen, 50000);
  }
  std::filesystem::remove(path);
}

TEST(CsvParse, BooleansAsPandasWritesThem) {
  std::vector<float> v;
  int64_t cols = 0;
  ASSERT_TRUE(ParseCsvFloats("True,False, true ,FALSE\n", "b.csv", &cols, &v).ok());
  EXPECT_EQ(v, (std::vector<float>{1, 0, 1, 0}));
  absl::Status s = ParseCsvFloats("yes\n", "b.csv", &cols, &v);
  EXPECT_THAT(s.message(), HasSubstr("b.csv:1: field 1 ('yes') is not a number"));
  double d;
  EXPECT_TRUE(ParseCsvNumber("True", &d));
  EXPECT_EQ(d, 1.0);
  EXPECT_FALSE(ParseCsvNumber("Truee", &d));
}

TEST(CsvReader, DecodersReadTheirColumnsOnEveryThreadWithAndWithoutAHeader) {
  // Column 1 (the row's second value) holds names; the decoder gives their length, and refuses
  // "bad". With a header the names column is found by its name. A name is its cell as written:
  // the blanks around the plain file's names are part of them.
  const CsvCellDecoder length = [](std::string_view cell) -> absl::StatusOr<double> {
    if (cell == "bad") return absl::InvalidArgumentError("'bad' is refused");
    return static_cast<double>(cell.size());
  };
  std::string plain, headed = "name,id,x\n";
  for (int r = 0; r < 20000; ++r) {
    const std::string name(static_cast<size_t>(r % 7), 'n');
    plain += std::to_string(r) + ", " + name + " \n";
    headed += name + ",i" + std::to_string(r) + "," + std::to_string(r) + "\n";
  }
  const std::string plain_path = WriteFile("decoders.csv", plain);
  const std::string headed_path = WriteFile("decoders_header.csv", headed);
  for (int threads : {1, 4}) {
    for (bool header : {false, true}) {
      absl::StatusOr<std::unique_ptr<CsvReader>> reader =
          CsvReader::Open(header ? headed_path : plain_path, 2, threads);
      ASSERT_TRUE(reader.ok());
      if (header) {
        absl::StatusOr<std::vector<std::string>> names = (*reader)->ReadHeader();
        ASSERT_TRUE(names.ok());
        (*reader)->SetLayout(*MatchCsvHeader(*names, {"x", "name"}, {}, headed_path));
      }
      (*reader)->SetCellDecoders({nullptr, length});
      std::vector<float> values;
      absl::StatusOr<int64_t> n = (*reader)->ReadRows(100000, &values);
      ASSERT_TRUE(n.ok()) << n.status();
      ASSERT_EQ(*n, 20000);
      for (int r = 0; r < 20000; ++r) {
        ASSERT_EQ(values[2 * r], static_cast<float>(r));
        ASSERT_EQ(values[2 * r + 1], static_cast<float>(r % 7 + (header ? 0 : 2)));
      }
    }
  }
  const std::string bad = WriteFile("decoders_bad.csv", "name,x\nab,1\nbad,2\n");
  absl::StatusOr<std::unique_ptr<CsvReader>> reader = CsvReader::Open(bad, 2, 1);
  ASSERT_TRUE(reader.ok());
  (*reader)->SetLayout(*MatchCsvHeader(*(*reader)->ReadHeader(), {"x", "name"}, {}, bad));
  (*reader)->SetCellDecoders({nullptr, length});
  std::vector<float> values;
  absl::StatusOr<int64_t> n = (*reader)->ReadRows(10, &values);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(n.status().message(),
              HasSubstr("decoders_bad.csv:3: field 1 (column 'name'): 'bad' is refused"));
  for (const std::string& p : {plain_path, headed_path, bad}) std::filesystem::remove(p);
}

TEST(CsvReader, ADecoderReadsAQuotedCellBetweenItsQuotes) {
  // Each cell's text comes back through the decoder: a quoted cell is the text between its quotes,
  // spaces kept exactly and "" read as ", whatever blanks lie outside the quotes; an unquoted
  // one is its bytes, blanks included, as pandas.to_csv writes and read_csv reads them.
  std::vector<std::string> seen;
  absl::Mutex mu;
  const CsvCellDecoder record = [&](std::string_view cell) -> absl::StatusOr<double> {
    absl::MutexLock lock(&mu);
    seen.emplace_back(cell);
    return static_cast<double>(seen.size());
  };
  const std::string path = WriteFile(
      "decoders_quoted.csv",
      "1,\" nice \"\n2,  \"a\"\"b\"\t\n3, plain \n4,\"\"\n5,\"\"\"\"\n6,nice \n");
  absl::StatusOr<std::unique_ptr<CsvReader>> reader = CsvReader::Open(path, 2, 1);
  ASSERT_TRUE(reader.ok());
  (*reader)->SetCellDecoders({nullptr, record});
  std::vector<float> values;
  absl::StatusOr<int64_t> n = (*reader)->ReadRows(10, &values);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(seen, (std::vector<std::string>{" nice ", "a\"b", " plain ", "", "\"", "nice "}));
  std::filesystem::remove(path);
  for (const auto& [text, expect] : std::vector<std::pair<std::string, std::string>>{
           {"1,\"a,b\"\n", "'\"a' opens a quote it does not close"},
           {"1,\"a\"b\n", "'\"a\"b' has text after its closing quote"}}) {
    const std::string bad = WriteFile("decoders_quoted_bad.csv", text);
    reader = CsvReader::Open(bad, 0, 1);
    ASSERT_TRUE(reader.ok());
    (*reader)->SetCellDecoders({nullptr, record});
    n = (*reader)->ReadRows(10, &values);
    EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(n.status().message(), HasSubstr("decoders_quoted_bad.csv:1: field 2")) << text;
    EXPECT_THAT(n.status().message(), HasSubstr(expect)) << text;
    std::filesystem::remove(bad);
  }
}

TEST(CsvWrite, FormatMatchesPrintfG9) {
  std::mt19937_64 rng(11);
  std::vector<double> values = {0.0, -0.0, 1.0, -1.5, 1e-45, 3.4028234663852886e38, 1e9, 123456789,
                                1234567890, 0.1, 1e-5, 1e-4, 123456.789, -2.5e-300};
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 20000; ++i) {
    uint32_t b = bits(rng);
    float f;
    std::memcpy(&f, &b, 4);
    if (std::isfinite(f)) values.push_back(f);
    uint64_t b64 = rng();
    double d;
    std::memcpy(&d, &b64, 8);
    if (std::isfinite(d)) values.push_back(d);
  }
  char got[40];
  char want[64];
  for (double v : values) {
    char* e = FormatCsvNumber(v, got);
    *e = '\0';
    std::snprintf(want, sizeof(want), "%.9g", v);
    ASSERT_STREQ(got, want) << v;
  }
  char* e = FormatCsvNumber(std::numeric_limits<double>::quiet_NaN(), got);
  EXPECT_EQ(std::string(got, e), "nan");
  e = FormatCsvNumber(-std::numeric_limits<double>::quiet_NaN(), got);
  EXPECT_EQ(std::string(got, e), "nan");
  e = FormatCsvNumber(-std::numeric_limits<double>::infinity(), got);
  EXPECT_EQ(std::string(got, e), "-inf");
}

TEST(CsvWrite, FloatsRoundTripBitForBit) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  const int rows = 2000;
  const int cols = 5;
  std::vector<float> m(rows * cols);
  for (float& f : m) {
    do {
      uint32_t b = bits(rng);
      std::memcpy(&f, &b, 4);
    } while (!std::isfinite(f));
  }
  m[3] = std::numeric_limits<float>::quiet_NaN();
  const std::string path = TempPath("roundtrip.csv");
  ASSERT_TRUE(WriteCsv(path, MakeMatrixView<const float>(m.data(), rows, cols)).ok());
  auto back = ReadCsvFloats(path, cols);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->rows, rows);
  for (size_t i = 0; i < m.size(); ++i) {
    if (std::isnan(m[i])) {
      EXPECT_TRUE(std::isnan(back->values[i]));
    } else {
      ASSERT_EQ(std::memcmp(&m[i], &back->values[i], 4), 0) << i << " " << m[i];
    }
  }
  std::filesystem::remove(path);
}

TEST(CsvWrite, LayoutAndStride) {
  // A 2x2 view into a 2x3 buffer: the stride must be honoured.
  const double data[] = {1, 0.5, 99, -2, 1e-7, 99};
  const std::string path = TempPath("layout.csv");
  ASSERT_TRUE(WriteCsv(path, MatrixView<const double>{data, 2, 2, 3}).ok());
  EXPECT_EQ(ReadFile(path), "1,0.5\n-2,1e-07\n");
  std::filesystem::remove(path);
}

TEST(CsvWrite, UnwritablePathNamesIt) {
  auto w = CsvWriter::Open("/nonexistent/dir/out.csv");
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr("/nonexistent/dir/out.csv"));
}


TEST(CsvHeader, MatchesByNameKeepsAndDrops) {
  absl::StatusOr<std::vector<std::string>> header =
      ParseCsvHeader(" id ,b,label,a\r", "h.csv", 1);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(*header, (std::vector<std::string>{"id", "b", "label", "a"}));
  absl::StatusOr<CsvLayout> layout = MatchCsvHeader(*header, {"a", "b"}, {"label", "id"}, "h.csv");
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->target, (std::vector<int64_t>{-1, 1, -1, 0}));
  EXPECT_EQ(layout->keep, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(layout->row_cols, 2);

  const std::string path = WriteFile("header.csv", "id,b,label,a\n\nx7, 2 ,yes,1\nx8,,no,nan\n");
  absl::StatusOr<std::unique_ptr<CsvReader>> reader = CsvReader::Open(path, 2);
  ASSERT_TRUE(reader.ok());
  absl::StatusOr<std::vector<std::string>> names = (*reader)->ReadHeader();
  ASSERT_TRUE(names.ok()) << names.status();
  (*reader)->SetLayout(*MatchCsvHeader(*names, {"a", "b"}, {"label", "id"}, path));
  std::vector<double> values;
  std::vector<std::string> kept;
  absl::StatusOr<int64_t> n = (*reader)->ReadRows(10, &values, &kept);
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_EQ(*n, 2);
  EXPECT_EQ(values[0], 1.0);
  EXPECT_EQ(values[1], 2.0);
  EXPECT_TRUE(std::isnan(values[2]));
  EXPECT_TRUE(std::isnan(values[3]));
  EXPECT_EQ(kept, (std::vector<std::string>{"yes,x7", "no,x8"}));
}

// A UTF-8 byte order mark (what Excel and PowerShell write first) is skipped at the start of the
// input, with or without a header; anywhere else it is not a number, as before.
TEST(CsvReader, LeadingUtf8ByteOrderMarkIsSkipped) {
  const std::string bom = "\xEF\xBB\xBF";
  const std::string rows_path = WriteFile("bom_rows.csv", bom + "1,2\n3,4\n");
  absl::StatusOr<CsvMatrix<float>> m = ReadCsvFloats(rows_path);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->rows, 2);
  EXPECT_EQ(m->cols, 2);
  EXPECT_EQ(m->values, (std::vector<float>{1, 2, 3, 4}));
  m = ReadCsvFloats(rows_path, 2, 2);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->values, (std::vector<float>{1, 2, 3, 4}));

  const std::string header_path = WriteFile("bom_header.csv", bom + "b,a\n1,2\n");
  absl::StatusOr<std::unique_ptr<CsvReader>> reader = CsvReader::Open(header_path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::StatusOr<std::vector<std::string>> names = (*reader)->ReadHeader();
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, (std::vector<std::string>{"b", "a"}));
  EXPECT_EQ((*reader)->bytes_consumed(), 7);

  std::vector<double> v;
  int64_t cols = 0;
  ASSERT_TRUE(ParseCsvDoubles(bom + "5,6\n", "t.csv", &cols, &v).ok());
  EXPECT_EQ(v, (std::vector<double>{5, 6}));

  v.clear();
  cols = 0;
  absl::Status mid = ParseCsvDoubles("5,6\n" + bom + "7,8\n", "t.csv", &cols, &v);
  EXPECT_EQ(mid.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mid.message(), HasSubstr("t.csv:2"));
}

TEST(CsvHeader, ErrorsNameTheProblem) {
  EXPECT_THAT(ParseCsvHeader("a,,b", "h.csv", 3).status().message(),
              HasSubstr("h.csv:3: header column 2 has no name"));
  EXPECT_THAT(ParseCsvHeader("a,\"b\"", "h.csv", 1).status().message(), HasSubstr("quoted"));
  EXPECT_THAT(ParseCsvHeader("a,b,a", "h.csv", 1).status().message(), HasSubstr("already named"));
  EXPECT_THAT(MatchCsvHeader({"a"}, {"a", "b", "c"}, {}, "h.csv").status().message(),
              HasSubstr("lacks 2 of the model's 3 features: 'b', 'c'"));
  EXPECT_THAT(MatchCsvHeader({"a"}, {"a"}, {"z"}, "h.csv").status().message(),
              HasSubstr("--keep column 'z' is not in the header"));
}

TEST(CsvWrite, HeaderQuotesWhatNeedsQuotingAndLeadFieldsComeFirst) {
  const std::string path = TempPath("header_out.csv");
  absl::StatusOr<std::unique_ptr<CsvWriter>> w = CsvWriter::Open(path);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->WriteHeader({"id", "a,b", "say \"hi\"", "bias"}).ok());
  const float rows[] = {1.5f, 2.0f};
  ASSERT_TRUE(
      (*w)->WriteRows(MakeMatrixView<const float>(rows, 2, 1), {"x7", "x8"}).ok());
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_EQ(ReadFile(path), "id,\"a,b\",\"say \"\"hi\"\"\",bias\nx7,1.5\nx8,2\n");
}

}  // namespace
}  // namespace grove
