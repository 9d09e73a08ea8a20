// libFuzzer target for background files (core/servable/background.h) and the .npy parser under them
// (core/io/npy.h): any bytes, read as a .npy array and as a background in both formats, must parse
// into what the bounds allow (1 to kMaxBackgroundRows rows of exactly the model's width, no
// infinities, the shape's product of values) or fail with INVALID_ARGUMENT. Never a crash, a
// sanitizer report or an allocation beyond a small multiple of the input.
//
// Seed corpus: tests/fuzz/seeds/background/ (.npy files of several dtypes, orders and versions)
// and the corpus X.csv files (tests/fuzz/CMakeLists.txt).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "core/servable/background.h"
#include "core/io/npy.h"

namespace {

void Check(const absl::StatusOr<grove::BackgroundValues>& b, int64_t width) {
  if (!b.ok()) {
    if (b.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return;
  }
  if (b->cols != width || b->rows < 1 || b->rows > grove::kMaxBackgroundRows) std::abort();
  if (static_cast<int64_t>(b->values.size()) != b->rows * b->cols) std::abort();
  for (double v : b->values) {
    if (std::isinf(v)) std::abort();
  }
}

// Fields of the first line (a CSV background as wide as its first row), at most 4096.
int64_t FirstLineFields(absl::string_view text) {
  int64_t fields = 1;
  for (char c : text) {
    if (c == '\n' || fields >= 4096) break;
    fields += c == ',' ? 1 : 0;
  }
  return fields;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<grove::NpyArray> a = grove::ParseNpy(bytes, "<fuzz>.npy", int64_t{1} << 20);
  int64_t npy_width = 3;
  if (!a.ok()) {
    if (a.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
  } else {
    int64_t count = 1;
    for (int64_t d : a->shape) count *= d;
    if (count != static_cast<int64_t>(a->values.size())) std::abort();
    if (a->shape.size() == 2 && a->shape[1] > 0) npy_width = a->shape[1];
  }
  Check(grove::ParseBackgroundValues(bytes, "<fuzz>.npy", npy_width), npy_width);
  const int64_t csv_width = FirstLineFields(bytes);
  Check(grove::ParseBackgroundValues(bytes, "<fuzz>.csv", csv_width), csv_width);
  return 0;
}
