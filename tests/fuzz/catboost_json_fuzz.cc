// libFuzzer target for the CatBoost JSON loader: any input must give a validated forest, or
// INVALID_ARGUMENT / UNIMPLEMENTED (CTRs over combinations or of other types, text splits,
// unknown losses), never a crash, a sanitizer report or an unbounded allocation. A forest that loads is predicted and explained
// (tests/fuzz/fuzz_common.h). The content dispatch (LoadModelBytes) is exercised on the same bytes,
// which must agree with the direct call when it picks CatBoost.
//
// Seed corpus: catboost.json files of tests/golden (cb_ctr_* with ctr_data) and the refused
// CatBoost models (tests/fuzz/CMakeLists.txt), and tests/fuzz/seeds/catboost/ (a small model with
// two CTR tables).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/model/loader.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<grove::ForestPtr> loaded = grove::LoadCatboostJson(text, "<fuzz>");
  const grove::Forest* f = grove::fuzz::CheckLoad(
      loaded, {absl::StatusCode::kInvalidArgument, absl::StatusCode::kUnimplemented});
  if (f != nullptr) grove::fuzz::Exercise(*f);
  const absl::StatusOr<grove::ForestPtr> dispatched = grove::LoadModelBytes(text, "<fuzz>");
  if (dispatched.ok() && (*dispatched)->format == grove::ModelFormat::kCatboostJson &&
      !loaded.ok()) {
    __builtin_trap();  // the dispatcher chose CatBoost for bytes the loader refuses
  }
  return 0;
}
