// libFuzzer target for the CSV reader (core/io/csv.h): any bytes must parse into rows x cols values
// or fail with INVALID_ARGUMENT naming the source; the streaming CsvReader (fed the same bytes through
// a memory file, a few rows at a time) must agree value for value with the in-memory parser whenever
// both succeed. Never a crash or a sanitizer report.
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

namespace {

bool Same(float a, float b) { return std::isnan(a) ? std::isnan(b) : a == b; }

void CheckParsed(const absl::Status& s, int64_t cols, size_t values) {
  if (s.ok()) {
    if (values > 0 && (cols <= 0 || values % static_cast<size_t>(cols) != 0)) std::abort();
    return;
  }
  if (s.code() != absl::StatusCode::kInvalidArgument) std::abort();
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
  ::close(fd);
  if (f.ok() && stream_ok) {
    if (streamed.size() != floats.size()) std::abort();
    for (size_t i = 0; i < floats.size(); ++i) {
      if (!Same(streamed[i], floats[i])) std::abort();
    }
  }
  return 0;
}
