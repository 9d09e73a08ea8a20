// libFuzzer target for the LightGBM text loader: any input must give a validated forest or
// INVALID_ARGUMENT, never a crash, a sanitizer report or an unbounded allocation. A forest that
// loads is predicted and explained (tests/fuzz/fuzz_common.h; linear trees are refused by the
// explainer, as LightGBM does) and its double thresholds feed DoubleRowConverter.
//
// Seed corpus: model.txt files of the corpora (see tests/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/model/double_rows.h"
#include "core/model/loader.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<grove::ForestPtr> loaded = grove::LoadLightgbmText(text, "<fuzz>");
  const grove::Forest* f = grove::fuzz::CheckLoad(loaded, {absl::StatusCode::kInvalidArgument});
  if (f == nullptr) return 0;
  grove::fuzz::Exercise(*f);
  const grove::DoubleRowConverter converter(*f);
  float sink = 0;
  for (int feature = 0; feature < f->num_features && feature < 64; ++feature) {
    for (double v : {0.1, -1.325, 1e300, 0.0}) sink += converter.Convert(feature, v);
  }
  if (sink == 12345.678f) __builtin_trap();  // keeps `sink` alive
  return 0;
}
