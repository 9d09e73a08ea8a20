// libFuzzer target for the GPU calibration cache file (core/predict/tahoe/perf_model.h,
// GpuHardwareParams::Parse; LoadOrCalibrateGpu reads it from --calibration_cache_dir): any text
// must parse into parameters that are Valid() and survive Serialize -> Parse unchanged, or be
// INVALID_ARGUMENT; never a crash, a sanitizer report or an exception.
//
// Seed corpus: tests/fuzz/seeds/calibration/ (see tests/fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/predict/tahoe/perf_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<grove::GpuHardwareParams> p = grove::GpuHardwareParams::Parse(text);
  if (!p.ok()) {
    if (p.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  if (!p->Valid()) std::abort();
  absl::StatusOr<grove::GpuHardwareParams> again = grove::GpuHardwareParams::Parse(p->Serialize());
  if (!again.ok() || again->Serialize() != p->Serialize()) std::abort();
  return 0;
}
