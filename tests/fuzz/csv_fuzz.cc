// libFuzzer target for the CSV reader (core/io/csv.h): any bytes must parse into rows x cols values
// or fail with INVALID_ARGUMENT naming the source; the streaming CsvReader (fed the same bytes through
// a memory file, a few rows at a time) must agree value for value with the in-memory parser whenever
// both succeed. The same bytes are also read as a header line plus rows (grove --header): the
// header's first two names are the values, its last is kept, and every row has one kept string and
// two values (the second read as a category name: CsvReader::SetCellDecoders, CategoryCodes), or the
// read fails with INVALID_ARGUMENT. Never a crash or a sanitizer report.
//
// Seed corpus: X.csv files of tests/golden and examples/rows.csv (tests/fuzz/CMakeLists.txt).
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/io/csv.h"
#include "core/model/category_codes.h"

namespace {

bool Same(float a, float b) { return std::isnan(a) ? std::isnan(b) : a == b; }

void CheckParsed(const absl::Status& s, int64_t cols, size_t values) {
  if (s.ok()) {
    if (values > 0 && (cols <= 0 || values % static_cast<size_t>(cols) != 0)) std::abort();
    return;
  }
  if (s.code() != absl::StatusCode::kInvalidArgument) std::abort();
}

// Reads the memory file `path` as a header plus rows (CsvReader::ReadHeader / SetLayout).
void CheckHeaderPath(const std::string& path) {
  absl::StatusOr<std::unique_ptr<grove::CsvReader>> reader = grove::CsvReader::Open(path);
  if (!reader.ok()) std::abort();
  absl::StatusOr<std::vector<std::string>> header = (*reader)->ReadHeader();
  if (!header.ok()) {
    if (header.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return;
  }
  if (header->size() < 2) return;
  absl::StatusOr<grove::CsvLayout> layout =
      grove::MatchCsvHeader(*header, {(*header)[1], (*header)[0]}, {header->back()}, path);
  if (!layout.ok()) std::abort();  // every name is in the header
  (*reader)->SetLayout(*std::move(layout));
  // The second value is a categorical column read by name (grove's CSV cells of category names).
  static const grove::FeatureCategories* categories = new grove::FeatureCategories{
      {"paris", "brest", "lyon", ""}, {}};
  auto coder = std::make_shared<const grove::CategoryCodes>(
      *categories, grove::UnknownCategory::kError, "city");
  (*reader)->SetCellDecoders(
      {nullptr, [coder](std::string_view cell) -> absl::StatusOr<double> {
         absl::StatusOr<float> code = coder->Code(absl::string_view(cell.data(), cell.size()));
         if (!code.ok()) return code.status();
         return *code;
       }});
  std::vector<double> values;
  std::vector<std::string> kept;
  while (true) {
    absl::StatusOr<int64_t> n = (*reader)->ReadRows(2, &values, &kept);
    if (!n.ok()) {
      if (n.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
      return;
    }
    if (*n == 0) return;
    if (values.size() != static_cast<size_t>(*n) * 2 || kept.size() != static_cast<size_t>(*n)) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  int64_t cols = 0;
  std::vector<float> floats;
  const absl::Status f = grove::ParseCsvFloats(text, "<fuzz>", &cols, &floats);
  CheckParsed(f, cols, floats.size());
  int64_t dcols = 0;
  std::vector<double> doubles;
  CheckParsed(grove::ParseCsvDoubles(text, "<fuzz>", &dcols, &doubles), dcols, doubles.size());

  // The same bytes through the streaming reader, 3 rows at a time.
  const int fd = ::memfd_create("csv_fuzz", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (size > 0 && ::write(fd, data, size) != static_cast<ssize_t>(size)) {
    ::close(fd);
    return 0;
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  absl::StatusOr<std::unique_ptr<grove::CsvReader>> reader = grove::CsvReader::Open(path);
  if (!reader.ok()) std::abort();  // a memory file always opens
  std::vector<float> streamed, chunk;
  bool stream_ok = true;
  while (true) {
    absl::StatusOr<int64_t> n = (*reader)->ReadRows(3, &chunk);
    if (!n.ok()) {
      if (n.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
      stream_ok = false;
      break;
    }
    if (*n == 0) break;
    if (static_cast<int64_t>(chunk.size()) != *n * (*reader)->cols()) std::abort();
    streamed.insert(streamed.end(), chunk.begin(), chunk.end());
  }
  CheckHeaderPath(path);
  ::close(fd);
  if (f.ok() && stream_ok) {
    if (streamed.size() != floats.size()) std::abort();
    for (size_t i = 0; i < floats.size(); ++i) {
      if (!Same(streamed[i], floats[i])) std::abort();
    }
  }
  return 0;
}
