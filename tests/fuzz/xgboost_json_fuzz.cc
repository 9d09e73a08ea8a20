// libFuzzer target for the XGBoost JSON loader: any input must give a validated forest, or
// INVALID_ARGUMENT / UNIMPLEMENTED (gblinear, unknown objectives), never a crash, a sanitizer
// report or an unbounded allocation. A forest that loads is predicted and explained
// (tests/fuzz/fuzz_common.h).
//
// Seed corpus: model.json files of the corpora and tests/model/data (tests/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/model/loader.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<grove::ForestPtr> loaded = grove::LoadXgboostJson(text, "<fuzz>");
  const grove::Forest* f = grove::fuzz::CheckLoad(
      loaded, {absl::StatusCode::kInvalidArgument, absl::StatusCode::kUnimplemented});
  if (f != nullptr) grove::fuzz::Exercise(*f);
  return 0;
}
