#include "core/io/csv.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/common/cpus.h"
#include "core/common/thread_pool.h"
#include "core/common/utf8.h"
#include "core/io/decimal.h"

namespace grove {
namespace {

constexpr size_t kInitialReadBuffer = size_t{1} << 20;
// With several threads, each takes about this much of a block of rows: enough that handing it out
// costs little against parsing it.
constexpr size_t kReadBufferPerThread = size_t{4} << 20;
// The least text per run of lines handed to one thread.
constexpr size_t kMinBytesPerTask = size_t{64} << 10;
constexpr size_t kWriteFlushBytes = size_t{1} << 20;
// The UTF-8 byte order mark that Excel, PowerShell and other Windows tools write first: skipped at
// the start of an input (anywhere else it is text, not a number).
constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

// Debian's Abseil has its own string_view type; StrCat takes only that one.
inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status OpenError(const std::string& path, int err, std::string_view what) {
  std::string message = absl::StrCat("cannot ", Sv(what), " ", path, ": ", std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::InvalidArgumentError(message);
}

inline bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// Bit i set when p[i] is ','; 64 bytes must be readable at p.
inline uint64_t CommaMask64(const char* p) {
#if defined(__SSE2__)
  const __m128i comma = _mm_set1_epi8(',');
  uint64_t mask = 0;
  for (int i = 0; i < 4; ++i) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i));
    const uint32_t bits = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, comma)));
    mask |= static_cast<uint64_t>(bits) << (16 * i);
  }
  return mask;
#else
  uint64_t mask = 0;
  for (int i = 0; i < 64; ++i) mask |= static_cast<uint64_t>(p[i] == ',') << i;
  return mask;
#endif
}

std::string_view Trimmed(const char* b, const char* e);
std::string Excerpt(const char* b, const char* e);

// Parses one field [b, e) as a double. Empty / nan = NaN. False when it is not a number.
inline bool ParseField(const char* b, const char* e, double* value) {
  while (b < e && IsBlank(*b)) ++b;
  while (e > b && IsBlank(e[-1])) --e;
  if (b == e) {
    *value = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (ParseShortDecimal(b, e, value) == e) return true;
  if (*b == '+') {
    ++b;
    if (b == e || *b == '-' || *b == '+') return false;
  }
  auto [ptr, ec] = std::from_chars(b, e, *value, std::chars_format::general);
  if (ec == std::errc::result_out_of_range) {
    // from_chars leaves the value alone on overflow/underflow; strtod gives +-HUGE_VAL or the
    // denormal/zero that a float64 array would have held.
    std::string copy(b, e);
    char* end = nullptr;
    *value = std::strtod(copy.c_str(), &end);
    return end == copy.c_str() + copy.size();
  }
  if (ec != std::errc()) return false;
  if (ptr != e) return false;
  if (std::isnan(*value)) *value = std::numeric_limits<double>::quiet_NaN();  // drop the sign
  return true;
}

// A boolean as pandas.to_csv writes it (True / False), also lower or upper case: 1 / 0.
bool ParseBoolWord(const char* b, const char* e, double* value) {
  const std::string_view word = Trimmed(b, e);
  for (std::string_view t : {"True", "true", "TRUE"}) {
    if (word == t) {
      *value = 1.0;
      return true;
    }
  }
  for (std::string_view f : {"False", "false", "FALSE"}) {
    if (word == f) {
      *value = 0.0;
      return true;
    }
  }
  return false;
}

// ParseField for the field [b, e) of a line that ends at `line_end`, booleans included. A field
// that is one short decimal -- the common case -- is parsed with the line's bytes after it
// readable, so that its digits are read eight at a time whatever its length.
inline bool ParseLineField(const char* b, const char* e, const char* line_end, double* value) {
  if (ParseShortDecimal(b, line_end, value) == e) return true;
  return ParseField(b, e, value) || ParseBoolWord(b, e, value);
}

// The text of quoted cell `t` (blanks around it already dropped) into *out: between its quotes,
// "" read as ".
absl::Status Unquote(std::string_view t, std::string* out) {
  out->clear();
  size_t i = 1;
  for (; i < t.size(); ++i) {
    if (t[i] != '"') {
      out->push_back(t[i]);
    } else if (i + 1 < t.size() && t[i + 1] == '"') {
      out->push_back('"');
      ++i;
    } else {
      break;  // the closing quote
    }
  }
  if (i + 1 != t.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", Excerpt(t.data(), t.data() + t.size()),
        i >= t.size() ? "' opens a quote it does not close (fields are split at every ',': a "
                        "quoted name may not hold one)"
                      : "' has text after its closing quote (a quote inside a name is written \"\")"));
  }
  return absl::OkStatus();
}

// The value of field [b, e) of row column `column` through its decoder (a column without one:
// false, so that the caller parses a number); the decoder's error in *error.
inline bool DecodeField(const std::vector<CsvCellDecoder>* decoders, int64_t column,
                        const char* b, const char* e, double* value, absl::Status* error) {
  if (decoders == nullptr || column >= static_cast<int64_t>(decoders->size()) ||
      !(*decoders)[static_cast<size_t>(column)]) {
    return false;
  }
  std::string_view cell(b, static_cast<size_t>(e - b));
  if (const std::string_view t = Trimmed(b, e); !t.empty() && t.front() == '"') {
    thread_local std::string unquoted;
    if (absl::Status s = Unquote(t, &unquoted); !s.ok()) {
      *error = s;
      return true;
    }
    cell = unquoted;
  }
  absl::StatusOr<double> v = (*decoders)[static_cast<size_t>(column)](cell);
  if (v.ok()) {
    *value = *v;
  } else {
    *error = v.status();
  }
  return true;
}

absl::Status Prefixed(const absl::Status& s, absl::string_view where) {
  return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
}

// std::popcount without a library call where the target lacks the instruction (x86-64's
// baseline does).
inline int PopCount(uint64_t x) {
  x -= (x >> 1) & 0x5555555555555555;
  x = (x & 0x3333333333333333) + ((x >> 2) & 0x3333333333333333);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0F;
  return static_cast<int>((x * 0x0101010101010101) >> 56);
}

// The positions of the commas in [b, e), in order, in (*commas)[0, count); returns the count.
// `commas` only grows. The commas are found 64 bytes at a time and their positions written
// without a branch per comma, so that no branch depends on where the fields end.
size_t FindCommas(const char* b, const char* e, std::vector<const char*>* commas) {
  constexpr ptrdiff_t kBlock = 64;
  constexpr int kUnrolled = 8;  // positions written per block before counting
  const size_t needed = static_cast<size_t>(e - b) + kUnrolled;
  if (commas->size() < needed) commas->resize(needed);
  const char** out = commas->data();
  size_t n = 0;
  const char* p = b;
  for (; e - p >= kBlock; p += kBlock) {
    uint64_t mask = CommaMask64(p);
    const int count = PopCount(mask);
    for (int i = 0; i < kUnrolled; ++i) {  // past `count` these are overwritten or ignored
      out[n + static_cast<size_t>(i)] = p + std::countr_zero(mask);
      mask &= mask - 1;
    }
    for (int i = kUnrolled; i < count; ++i) {
      out[n + static_cast<size_t>(i)] = p + std::countr_zero(mask);
      mask &= mask - 1;
    }
    n += static_cast<size_t>(count);
  }
  for (; p < e; ++p) {
    if (*p == ',') out[n++] = p;
  }
  return n;
}

int64_t CountFields(const char* b, const char* e) {
  int64_t n = 1;
  for (const char* p = b; p < e; ++p) n += (*p == ',');
  return n;
}

std::string Excerpt(const char* b, const char* e) {
  while (b < e && IsBlank(*b)) ++b;
  while (e > b && IsBlank(e[-1])) --e;
  constexpr ptrdiff_t kMax = 40;
  if (e - b > kMax) return absl::StrCat(absl::string_view(b, kMax), "...");
  return std::string(b, e);
}

// Whether [b, e) (no '\n') is a blank line: empty or only blanks, before an optional CR.
inline bool IsBlankLine(const char* b, const char* e) {
  if (e > b && e[-1] == '\r') --e;
  while (b < e && IsBlank(*b)) ++b;
  return b == e;
}

// Parses the `expected` fields of the row on line [b, e) (no '\n', no final CR) into row[0,
// expected). Fields are checked in order, so that the first bad one is named even on a line with
// too many or too few fields.
template <typename T>
absl::Status ParseFields(const char* b, const char* e, std::string_view source, int64_t line,
                         int64_t expected, T* row,
                         const std::vector<CsvCellDecoder>* decoders = nullptr) {
  // The commas are found a window at a time, then the fields that end in it are parsed.
  constexpr ptrdiff_t kWindow = 4096;
  thread_local std::vector<const char*> commas;
  int64_t field = 0;
  const char* p = b;  // the current field's start
  for (const char* w = b;; w += kWindow) {
    const bool last = e - w <= kWindow;
    const size_t n = FindCommas(w, last ? e : w + kWindow, &commas);
    for (size_t c = 0; c <= n; ++c) {
      if (c == n && !last) break;  // the field goes on in the next window
      const char* fe = c < n ? commas[c] : e;
      if (field >= expected) {
        return absl::InvalidArgumentError(absl::StrCat(Sv(source), ":", line, ": expected ",
                                                       expected, " fields, found ",
                                                       CountFields(b, e)));
      }
      double v;
      absl::Status decoded;
      if (decoders != nullptr && DecodeField(decoders, field, p, fe, &v, &decoded)) {
        if (!decoded.ok()) {
          return Prefixed(decoded, absl::StrCat(Sv(source), ":", line, ": field ", field + 1));
        }
      } else if (!ParseLineField(p, fe, e, &v)) {
        return absl::InvalidArgumentError(absl::StrCat(Sv(source), ":", line, ": field ",
                                                       field + 1, " ('", Excerpt(p, fe),
                                                       "') is not a number"));
      }
      row[field++] = static_cast<T>(v);
      p = fe + 1;
    }
    if (last) break;
  }
  if (field != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(source), ":", line, ": expected ", expected, " fields, found ", field));
  }
  return absl::OkStatus();
}

// Parses one line [b, e) (no '\n'). Returns false in *parsed for a blank line (but for one-column
// rows, where a blank line is a row whose value is missing). `cols` is in-out: <= 0, the line's
// field count becomes it.
template <typename T>
absl::Status ParseLine(const char* b, const char* e, std::string_view source, int64_t line,
                       int64_t* cols, std::vector<T>* out, bool* parsed,
                       const std::vector<CsvCellDecoder>* decoders = nullptr) {
  *parsed = *cols == 1 || !IsBlankLine(b, e);
  if (!*parsed) return absl::OkStatus();
  if (e > b && e[-1] == '\r') --e;
  const int64_t n = *cols > 0 ? *cols : CountFields(b, e);
  const size_t base = out->size();
  out->resize(base + static_cast<size_t>(n));
  absl::Status s = ParseFields(b, e, source, line, n, out->data() + base, decoders);
  if (!s.ok()) {
    out->resize(base);
    return s;
  }
  *cols = n;
  return absl::OkStatus();
}

// Splits [b, e) at commas into `fields` (pairs of begin and end).
void SplitFields(const char* b, const char* e,
                 std::vector<std::pair<const char*, const char*>>* fields) {
  fields->clear();
  const char* p = b;
  while (true) {
    const char* comma = static_cast<const char*>(std::memchr(p, ',', static_cast<size_t>(e - p)));
    fields->emplace_back(p, comma != nullptr ? comma : e);
    if (comma == nullptr) return;
    p = comma + 1;
  }
}

std::string_view Trimmed(const char* b, const char* e) {
  while (b < e && IsBlank(*b)) ++b;
  while (e > b && IsBlank(e[-1])) --e;
  return std::string_view(b, static_cast<size_t>(e - b));
}

// ParseFields for a line laid out by a header: values go to row[layout.target[i]], and the kept
// fields, ','-joined, to *kept unless it is null.
template <typename T>
absl::Status ParseMappedFields(const char* b, const char* e, std::string_view source,
                               int64_t line, const CsvLayout& layout, T* row, std::string* kept,
                               const std::vector<CsvCellDecoder>* decoders = nullptr) {
  const int64_t expected = static_cast<int64_t>(layout.header.size());
  thread_local std::vector<std::pair<const char*, const char*>> fields;
  SplitFields(b, e, &fields);
  if (static_cast<int64_t>(fields.size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(source), ":", line, ": expected ", expected,
                                                   " fields (the header's), found ",
                                                   fields.size()));
  }
  for (int64_t i = 0; i < expected; ++i) {
    const int64_t t = layout.target[static_cast<size_t>(i)];
    if (t < 0) continue;
    double v;
    absl::Status decoded;
    if (decoders != nullptr &&
        DecodeField(decoders, t, fields[i].first, fields[i].second, &v, &decoded)) {
      if (!decoded.ok()) {
        return Prefixed(decoded, absl::StrCat(Sv(source), ":", line, ": field ", i + 1,
                                              " (column '", layout.header[i], "')"));
      }
    } else if (!ParseLineField(fields[i].first, fields[i].second, e, &v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          Sv(source), ":", line, ": field ", i + 1, " (column '", layout.header[i], "': '",
          Excerpt(fields[i].first, fields[i].second), "') is not a number"));
    }
    row[t] = static_cast<T>(v);
  }
  if (kept != nullptr) {
    kept->clear();
    for (size_t k = 0; k < layout.keep.size(); ++k) {
      const auto& f = fields[static_cast<size_t>(layout.keep[k])];
      absl::StrAppend(kept, k ? "," : "", Sv(Trimmed(f.first, f.second)));
    }
  }
  return absl::OkStatus();
}

// ParseLine for a line laid out by a header (ParseMappedFields); the kept string is appended to
// `kept` when it is not null and the layout keeps columns.
template <typename T>
absl::Status ParseMappedLine(const char* b, const char* e, std::string_view source, int64_t line,
                             const CsvLayout& layout, std::vector<T>* out,
                             std::vector<std::string>* kept, bool* parsed,
                             const std::vector<CsvCellDecoder>* decoders = nullptr) {
  *parsed = layout.header.size() == 1 || !IsBlankLine(b, e);
  if (!*parsed) return absl::OkStatus();
  if (e > b && e[-1] == '\r') --e;
  const size_t base = out->size();
  out->resize(base + static_cast<size_t>(layout.row_cols));
  const bool keeping = kept != nullptr && !layout.keep.empty();
  std::string joined;
  absl::Status s = ParseMappedFields(b, e, source, line, layout, out->data() + base,
                                     keeping ? &joined : nullptr, decoders);
  if (!s.ok()) {
    out->resize(base);
    return s;
  }
  if (keeping) kept->push_back(std::move(joined));
  return absl::OkStatus();
}

// Blank lines before the first row and after the last are skipped; one between two rows is an
// error, since skipping it would shift every later result row against the file's lines (a join by
// position would pair the wrong rows). `blank` is the first blank line since the last row.
absl::Status CheckBlankLine(bool parsed, bool seen_row, int64_t line, std::string_view source,
                            int64_t* blank) {
  if (!parsed) {
    if (seen_row && *blank == 0) *blank = line;
    return absl::OkStatus();
  }
  if (*blank == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      Sv(source), ":", *blank, ": blank line between rows (the next row is on line ", line,
      "); every row needs its fields (a row whose values are all missing is a line of commas), "
      "and skipping the line would shift every later result by one row"));
}

template <typename T>
absl::Status ParseText(std::string_view text, std::string_view source, int64_t* cols,
                       std::vector<T>* values) {
  if (text.substr(0, kUtf8Bom.size()) == kUtf8Bom) text.remove_prefix(kUtf8Bom.size());
  const char* p = text.data();
  const char* end = p + text.size();
  int64_t line = 0, blank = 0;
  bool seen_row = false;  // of this text (the caller's vector may hold rows already)
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    const char* le = nl != nullptr ? nl : end;
    ++line;
    bool parsed;
    absl::Status s = ParseLine(p, le, source, line, cols, values, &parsed);
    if (s.ok()) s = CheckBlankLine(parsed, seen_row, line, source, &blank);
    if (!s.ok()) return s;
    seen_row |= parsed;
    p = nl != nullptr ? nl + 1 : end;
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<CsvMatrix<T>> ReadWhole(const std::string& path, int64_t expected_cols,
                                       int threads) {
  absl::StatusOr<std::unique_ptr<CsvReader>> reader = CsvReader::Open(path, expected_cols, threads);
  if (!reader.ok()) return reader.status();
  CsvMatrix<T> m;
  std::vector<T> chunk;
  while (true) {
    absl::StatusOr<int64_t> n = (*reader)->ReadRows(int64_t{1} << 20, &chunk);
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    if (m.values.empty()) {
      m.values = std::move(chunk);
      chunk = {};
    } else {
      m.values.insert(m.values.end(), chunk.begin(), chunk.end());
    }
    m.rows += *n;
  }
  m.cols = (*reader)->cols();
  return m;
}

absl::Status WriteAll(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseCsvHeader(std::string_view text,
                                                        std::string_view source, int64_t line) {
  const char* b = text.data();
  const char* e = b + text.size();
  if (e > b && e[-1] == '\r') --e;
  std::vector<std::pair<const char*, const char*>> fields;
  SplitFields(b, e, &fields);
  std::vector<std::string> names;
  absl::flat_hash_set<std::string_view> seen;
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string_view name = Trimmed(fields[i].first, fields[i].second);
    const std::string where = absl::StrCat(Sv(source), ":", line, ": header column ", i + 1);
    if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(where, " has no name"));
    if (name.find('"') != std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " ('", Sv(name), "') is quoted; grove reads plain names only (no quoting)"));
    }
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " ('", Sv(name), "') names a column already named before it"));
    }
    // Named as a model's feature names are (BuildForest), so that a Latin-1 header matches the
    // Latin-1 names of a model written by the same tool.
    names.push_back(EscapeInvalidUtf8(name));
  }
  return names;
}

absl::StatusOr<CsvLayout> MatchCsvHeader(std::vector<std::string> header,
                                         const std::vector<std::string>& value_names,
                                         const std::vector<std::string>& keep,
                                         std::string_view source) {
  absl::flat_hash_map<std::string_view, int64_t> position;
  for (size_t i = 0; i < header.size(); ++i) position.emplace(header[i], static_cast<int64_t>(i));
  CsvLayout layout;
  layout.target.assign(header.size(), -1);
  layout.row_cols = static_cast<int64_t>(value_names.size());
  std::vector<std::string_view> missing;
  for (size_t v = 0; v < value_names.size(); ++v) {
    auto it = position.find(value_names[v]);
    if (it == position.end()) {
      missing.push_back(value_names[v]);
    } else {
      layout.target[static_cast<size_t>(it->second)] = static_cast<int64_t>(v);
    }
  }
  if (!missing.empty()) {
    constexpr size_t kShown = 5;
    std::string list;
    for (size_t i = 0; i < std::min(kShown, missing.size()); ++i) {
      absl::StrAppend(&list, i ? ", " : "", "'", Sv(missing[i]), "'");
    }
    if (missing.size() > kShown) absl::StrAppend(&list, " and ", missing.size() - kShown, " more");
    return absl::InvalidArgumentError(absl::StrCat(
        Sv(source), ": the header lacks ", missing.size(), " of the model's ", value_names.size(),
        " features: ", list, " (columns are matched by name, in any order)"));
  }
  for (const std::string& k : keep) {
    auto it = position.find(k);
    if (it == position.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Sv(source), ": --keep column '", k, "' is not in the header"));
    }
    if (std::find(layout.keep.begin(), layout.keep.end(), it->second) != layout.keep.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--keep column '", k, "' given twice"));
    }
    layout.keep.push_back(it->second);
  }
  layout.header = std::move(header);
  return layout;
}

bool ParseCsvNumber(std::string_view field, double* value) {
  const char* b = field.data();
  const char* e = b + field.size();
  return ParseField(b, e, value) || ParseBoolWord(b, e, value);
}

absl::Status ParseCsvFloats(std::string_view text, std::string_view source, int64_t* cols,
                            std::vector<float>* values) {
  return ParseText(text, source, cols, values);
}

absl::Status ParseCsvDoubles(std::string_view text, std::string_view source, int64_t* cols,
                             std::vector<double>* values) {
  return ParseText(text, source, cols, values);
}

absl::StatusOr<CsvMatrix<float>> ReadCsvFloats(const std::string& path, int64_t expected_cols,
                                               int threads) {
  return ReadWhole<float>(path, expected_cols, threads);
}

absl::StatusOr<CsvMatrix<double>> ReadCsvDoubles(const std::string& path, int64_t expected_cols,
                                                 int threads) {
  return ReadWhole<double>(path, expected_cols, threads);
}

// ---------------------------------------------------------------------------------------------
// CsvReader

CsvReader::CsvReader(std::string path, int fd, bool owns_fd, int64_t expected_cols,
                     int64_t total_bytes, int threads)
    : path_(std::move(path)),
      fd_(fd),
      owns_fd_(owns_fd),
      cols_(expected_cols > 0 ? expected_cols : 0),
      total_bytes_(total_bytes),
      buf_(threads > 1 ? kReadBufferPerThread * static_cast<size_t>(threads)
                       : kInitialReadBuffer) {
  if (threads > 1) pool_ = std::make_unique<ThreadPool>(threads - 1);
}

CsvReader::~CsvReader() {
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::unique_ptr<CsvReader>> CsvReader::Open(const std::string& path,
                                                           int64_t expected_cols, int threads) {
  if (threads <= 0) threads = UsableCpus();
  int fd = 0;
  bool owns = false;
  if (path != "-") {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return OpenError(path, errno, "open");
    owns = true;
  }
  struct stat st;
  int64_t total = -1;
  if (::fstat(fd, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      if (owns) ::close(fd);
      return absl::InvalidArgumentError(absl::StrCat("cannot read ", path, ": is a directory"));
    }
    if (S_ISREG(st.st_mode)) total = static_cast<int64_t>(st.st_size);
  }
  return std::unique_ptr<CsvReader>(
      new CsvReader(path == "-" ? std::string("<stdin>") : path, fd, owns, expected_cols, total,
                    threads));
}

absl::Status CsvReader::SkipByteOrderMark() {
  if (bom_checked_) return absl::OkStatus();
  while (end_ - begin_ < kUtf8Bom.size() && !eof_) {
    absl::StatusOr<bool> more = Fill();
    if (!more.ok()) return more.status();
  }
  bom_checked_ = true;
  if (std::string_view(buf_.data() + begin_, std::min(end_ - begin_, kUtf8Bom.size())) ==
      kUtf8Bom) {
    begin_ += kUtf8Bom.size();
    consumed_ += static_cast<int64_t>(kUtf8Bom.size());
  }
  return absl::OkStatus();
}

void CsvReader::Compact() {
  if (begin_ == 0) return;
  std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
  end_ -= begin_;
  begin_ = 0;
}

absl::StatusOr<bool> CsvReader::ReadSome() {
  while (true) {
    const ssize_t n = ::read(fd_, buf_.data() + end_, buf_.size() - end_);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read ", path_, ": ", std::strerror(errno)));
    }
    if (n == 0) {
      eof_ = true;
      return false;
    }
    end_ += static_cast<size_t>(n);
    return true;
  }
}

absl::StatusOr<bool> CsvReader::Fill() {
  if (eof_) return false;
  Compact();
  if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);  // a line longer than the buffer
  return ReadSome();
}

absl::Status CsvReader::Refill() {
  Compact();
  while (!eof_ && end_ < buf_.size()) {
    absl::StatusOr<bool> more = ReadSome();
    if (!more.ok()) return more.status();
    if (total_bytes_ < 0) break;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> CsvReader::NextLine(const char** b, const char** e, size_t* used) {
  while (true) {
    const char* base = buf_.data();
    const char* nl = static_cast<const char*>(std::memchr(base + begin_, '\n', end_ - begin_));
    if (nl == nullptr && !eof_) {
      absl::StatusOr<bool> more = Fill();
      if (!more.ok()) return more.status();
      continue;
    }
    if (nl == nullptr && begin_ == end_) return false;
    *b = base + begin_;
    *e = nl != nullptr ? nl : base + end_;
    *used = static_cast<size_t>(*e - *b) + (nl != nullptr ? 1 : 0);
    return true;
  }
}

template <typename T>
absl::StatusOr<int64_t> CsvReader::ReadRowsImpl(int64_t max_rows, std::vector<T>* out,
                                                std::vector<std::string>* kept) {
  out->clear();
  if (kept != nullptr) kept->clear();
  if (failed_) return absl::FailedPreconditionError(absl::StrCat(path_, ": reader failed"));
  if (absl::Status s = SkipByteOrderMark(); !s.ok()) {
    failed_ = true;
    return s;
  }
  if (cols_ > 0 && max_rows > 0) {
    // Reserve for the chunk, at most 4M values up front (the vector grows past that if needed).
    const int64_t cap = std::max<int64_t>(1, (int64_t{1} << 22) / cols_);
    out->reserve(static_cast<size_t>(std::min(max_rows, cap) * cols_));
  }
  int64_t rows = 0;
  while (rows < max_rows) {
    // Runs of rows go to ReadBlock; a blank line, the first row (which may set the column count)
    // and a line longer than the buffer take the path below, one line at a time.
    if (cols_ > 0 && blank_line_ == 0) {
      absl::StatusOr<int64_t> n = ReadBlock(max_rows - rows, out, kept);
      if (!n.ok()) {
        failed_ = true;
        return n.status();
      }
      rows += *n;
      if (*n > 0) continue;
    }
    const char* lb;
    const char* le;
    size_t used;
    absl::StatusOr<bool> more = NextLine(&lb, &le, &used);
    if (!more.ok()) {
      failed_ = true;
      return more.status();
    }
    if (!*more) break;
    ++line_;
    bool parsed;
    const bool seen_row = rows_read_ + rows > 0;
    absl::Status s = has_layout_
                         ? ParseMappedLine(lb, le, path_, line_, layout_, out, kept, &parsed,
                                           decoders())
                         : ParseLine(lb, le, path_, line_, &cols_, out, &parsed, decoders());
    if (s.ok()) s = CheckBlankLine(parsed, seen_row, line_, path_, &blank_line_);
    if (!s.ok()) {
      failed_ = true;
      return s;
    }
    begin_ += used;
    consumed_ += static_cast<int64_t>(used);
    if (parsed) ++rows;
  }
  rows_read_ += rows;
  return rows;
}

template <typename T>
absl::StatusOr<int64_t> CsvReader::ReadBlock(int64_t max_rows, std::vector<T>* out,
                                             std::vector<std::string>* kept) {
  if (!eof_ && end_ - begin_ < buf_.size() / 2) {
    if (absl::Status s = Refill(); !s.ok()) return s;
  }
  // The lines of the block: each complete (or the last of the input) and a row.
  const int64_t line_fields =
      has_layout_ ? static_cast<int64_t>(layout_.header.size()) : cols_;
  const char* const start = buf_.data() + begin_;
  const char* const end = buf_.data() + end_;
  line_ends_.clear();
  const char* p = start;
  while (static_cast<int64_t>(line_ends_.size()) < max_rows && p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    if (nl == nullptr && !eof_) break;
    const char* le = nl != nullptr ? nl : end;
    if (line_fields != 1 && IsBlankLine(p, le)) break;
    line_ends_.push_back(le);
    p = nl != nullptr ? nl + 1 : end;
  }
  const int64_t rows = static_cast<int64_t>(line_ends_.size());
  if (rows == 0) return 0;

  const size_t base = out->size();
  out->resize(base + static_cast<size_t>(rows * cols_));
  T* const values = out->data() + base;
  std::string* joined = nullptr;
  if (has_layout_ && kept != nullptr && !layout_.keep.empty()) {
    kept->resize(kept->size() + static_cast<size_t>(rows));
    joined = kept->data() + (kept->size() - static_cast<size_t>(rows));
  }
  // Each task stops at its first bad line; the first of those is the one a single thread meets.
  std::mutex mu;
  int64_t first_bad = rows;
  absl::Status error;
  auto parse = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const char* b = i == 0 ? start : line_ends_[static_cast<size_t>(i - 1)] + 1;
      const char* e = line_ends_[static_cast<size_t>(i)];
      if (e > b && e[-1] == '\r') --e;
      const int64_t line = line_ + 1 + i;
      T* row = values + i * cols_;
      absl::Status s =
          has_layout_
              ? ParseMappedFields(b, e, path_, line, layout_, row,
                                  joined != nullptr ? joined + i : nullptr, decoders())
              : ParseFields(b, e, path_, line, cols_, row, decoders());
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (i < first_bad) {
          first_bad = i;
          error = std::move(s);
        }
        return;
      }
    }
  };
  const size_t used = static_cast<size_t>(p - start);
  // Runs of lines of at least kMinBytesPerTask (by the block's mean line length).
  const int64_t grain = std::max<int64_t>(
      1, static_cast<int64_t>(kMinBytesPerTask * static_cast<size_t>(rows) / used));
  ParallelFor(pool_.get(), rows, grain, parse);
  if (!error.ok()) return error;
  begin_ += used;
  consumed_ += static_cast<int64_t>(used);
  line_ += rows;
  return rows;
}

absl::StatusOr<int64_t> CsvReader::ReadRows(int64_t max_rows, std::vector<float>* out) {
  return ReadRowsImpl(max_rows, out, nullptr);
}

absl::StatusOr<int64_t> CsvReader::ReadRows(int64_t max_rows, std::vector<double>* out) {
  return ReadRowsImpl(max_rows, out, nullptr);
}

absl::StatusOr<int64_t> CsvReader::ReadRows(int64_t max_rows, std::vector<float>* out,
                                            std::vector<std::string>* kept) {
  return ReadRowsImpl(max_rows, out, kept);
}

absl::StatusOr<int64_t> CsvReader::ReadRows(int64_t max_rows, std::vector<double>* out,
                                            std::vector<std::string>* kept) {
  return ReadRowsImpl(max_rows, out, kept);
}

absl::StatusOr<std::vector<std::string>> CsvReader::ReadHeader() {
  if (rows_read_ > 0 || has_layout_) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": the header is the first line"));
  }
  if (absl::Status s = SkipByteOrderMark(); !s.ok()) return s;
  while (true) {
    const char* lb;
    const char* le;
    size_t used;
    absl::StatusOr<bool> more = NextLine(&lb, &le, &used);
    if (!more.ok()) return more.status();
    if (!*more) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": empty input; --header expects a first line naming the columns"));
    }
    ++line_;
    const std::string_view text(lb, static_cast<size_t>(le - lb));
    begin_ += used;
    consumed_ += static_cast<int64_t>(used);
    if (Trimmed(lb, le > lb && le[-1] == '\r' ? le - 1 : le).empty()) continue;
    return ParseCsvHeader(text, path_, line_);
  }
}

void CsvReader::SetLayout(CsvLayout layout) {
  layout_ = std::move(layout);
  has_layout_ = true;
  cols_ = layout_.row_cols;
}

// ---------------------------------------------------------------------------------------------
// Writing

char* FormatCsvNumber(double value, char* out) {
  if (std::isnan(value)) {
    std::memcpy(out, "nan", 3);
    return out + 3;
  }
  // to_chars with a precision is specified as printf("%.*g"), without the locale.
  return std::to_chars(out, out + 32, value, std::chars_format::general, 9).ptr;
}

CsvWriter::CsvWriter(std::string path, int fd, bool owns_fd)
    : path_(std::move(path)), fd_(fd), owns_fd_(owns_fd) {
  buf_.reserve(kWriteFlushBytes + 4096);
}

CsvWriter::~CsvWriter() {
  if (!closed_) (void)Close();
}

absl::StatusOr<std::unique_ptr<CsvWriter>> CsvWriter::Open(const std::string& path) {
  if (path == "-") return std::unique_ptr<CsvWriter>(new CsvWriter("<stdout>", 1, false));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return OpenError(path, errno, "create");
  return std::unique_ptr<CsvWriter>(new CsvWriter(path, fd, true));
}

absl::Status CsvWriter::Flush() {
  absl::Status s = WriteAll(fd_, buf_.data(), buf_.size(), path_);
  buf_.clear();
  return s;
}

template <typename T>
absl::Status CsvWriter::WriteRowsImpl(MatrixView<const T> rows,
                                      const std::vector<std::string>* lead) {
  if (closed_) return absl::FailedPreconditionError(absl::StrCat(path_, ": writer closed"));
  char scratch[40];
  for (int64_t r = 0; r < rows.rows; ++r) {
    const T* row = rows.Row(r);
    if (lead != nullptr) {
      buf_.append((*lead)[static_cast<size_t>(r)]);
      buf_.push_back(rows.cols > 0 ? ',' : '\n');
    }
    for (int64_t c = 0; c < rows.cols; ++c) {
      char* e = FormatCsvNumber(static_cast<double>(row[c]), scratch);
      *e++ = c + 1 < rows.cols ? ',' : '\n';
      buf_.append(scratch, static_cast<size_t>(e - scratch));
    }
    if (rows.cols == 0 && lead == nullptr) buf_.push_back('\n');
    if (buf_.size() >= kWriteFlushBytes) {
      absl::Status s = Flush();
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CsvWriter::WriteRows(MatrixView<const float> rows) {
  return WriteRowsImpl(rows, nullptr);
}
absl::Status CsvWriter::WriteRows(MatrixView<const double> rows) {
  return WriteRowsImpl(rows, nullptr);
}
absl::Status CsvWriter::WriteRows(MatrixView<const float> rows,
                                  const std::vector<std::string>& lead) {
  if (static_cast<int64_t>(lead.size()) != rows.rows) {
    return absl::InternalError(absl::StrCat(path_, ": ", lead.size(), " leading fields for ",
                                            rows.rows, " rows"));
  }
  return WriteRowsImpl(rows, &lead);
}

absl::Status CsvWriter::WriteHeader(const std::vector<std::string>& names) {
  if (closed_) return absl::FailedPreconditionError(absl::StrCat(path_, ": writer closed"));
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) buf_.push_back(',');
    const std::string& n = names[i];
    if (n.find_first_of(",\"\r\n") == std::string::npos) {
      buf_.append(n);
      continue;
    }
    buf_.push_back('"');
    for (char c : n) {
      if (c == '"') buf_.push_back('"');
      buf_.push_back(c);
    }
    buf_.push_back('"');
  }
  buf_.push_back('\n');
  return absl::OkStatus();
}

absl::Status CsvWriter::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  absl::Status s = Flush();
  if (owns_fd_) {
    if (::close(fd_) != 0 && s.ok()) {
      s = absl::InternalError(absl::StrCat("cannot write ", path_, ": ", std::strerror(errno)));
    }
    fd_ = -1;
  }
  return s;
}

namespace {
template <typename T>
absl::Status WriteCsvImpl(const std::string& path, MatrixView<const T> rows) {
  absl::StatusOr<std::unique_ptr<CsvWriter>> w = CsvWriter::Open(path);
  if (!w.ok()) return w.status();
  absl::Status s = (*w)->WriteRows(rows);
  absl::Status c = (*w)->Close();
  return s.ok() ? c : s;
}
}  // namespace

absl::Status WriteCsv(const std::string& path, MatrixView<const float> rows) {
  return WriteCsvImpl(path, rows);
}
absl::Status WriteCsv(const std::string& path, MatrixView<const double> rows) {
  return WriteCsvImpl(path, rows);
}

}  // namespace grove
