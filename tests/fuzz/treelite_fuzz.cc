// libFuzzer target for the Treelite checkpoint loader: any input must give a validated forest, or
// INVALID_ARGUMENT / UNIMPLEMENTED (the == operator, isolation forests, v3 checkpoints, nodes
// without covers, ...), never a crash, a sanitizer report or an allocation beyond the input's
// size. A forest that loads is predicted and explained (tests/fuzz/fuzz_common.h). The content
// dispatch (LoadModelBytes) is exercised on the same bytes, which must agree with the direct call
// when it picks Treelite.
//
// Seed corpus: the checkpoint.tl files of tests/golden (XGBoost, LightGBM and scikit-learn models:
// float32 and float64 checkpoints, categorical lists, vector leaves, averaging) and
// tests/fuzz/seeds/treelite/ (hand-made checkpoints of the other operators and layouts, written by
// scripts/make_treelite_corpus.py).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/model/loader.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<grove::ForestPtr> loaded = grove::LoadTreeliteCheckpoint(bytes, "<fuzz>");
  const grove::Forest* f = grove::fuzz::CheckLoad(
      loaded, {absl::StatusCode::kInvalidArgument, absl::StatusCode::kUnimplemented});
  if (f != nullptr) grove::fuzz::Exercise(*f);
  const absl::StatusOr<grove::ForestPtr> dispatched = grove::LoadModelBytes(bytes, "<fuzz>");
  if (dispatched.ok() && (*dispatched)->format == grove::ModelFormat::kTreeliteCheckpoint &&
      !loaded.ok()) {
    __builtin_trap();  // the dispatcher chose Treelite for bytes the loader refuses
  }
  return 0;
}
