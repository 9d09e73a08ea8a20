// libFuzzer target for the XGBoost UBJSON loader (and the content sniffing of LoadModelBytes):
// any input must give a validated forest, or INVALID_ARGUMENT / UNIMPLEMENTED, never a crash, a
// sanitizer report or an unbounded allocation (UBJSON counts and lengths are untrusted). A forest
// that loads is predicted and explained (tests/fuzz/fuzz_common.h).
//
// Seed corpus: model.ubj files of the corpora and tests/model/data (tests/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/model/loader.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<grove::ForestPtr> loaded = grove::LoadXgboostUbjson(bytes, "<fuzz>");
  const grove::Forest* f = grove::fuzz::CheckLoad(
      loaded, {absl::StatusCode::kInvalidArgument, absl::StatusCode::kUnimplemented});
  if (f != nullptr) grove::fuzz::Exercise(*f);
  // Sniffing dispatches the same bytes to whichever loader their content looks like.
  const absl::StatusOr<grove::ForestPtr> sniffed = grove::LoadModelBytes(bytes, "<fuzz>.ubj");
  grove::fuzz::CheckLoad(sniffed,
                         {absl::StatusCode::kInvalidArgument, absl::StatusCode::kUnimplemented});
  return 0;
}
