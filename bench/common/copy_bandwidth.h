// Measured bandwidth of the copies between host memory and the GPUs (bench programs only), for
// benchmarks that state the host's limit beside multi-GPU figures: rows staged for N GPUs cross
// host memory N times as fast, and once the host's DMA or memory bandwidth is spent, more GPUs add
// nothing. Compiles with or without CUDA.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace grove::bench {

struct CopyBandwidth {
  std::vector<double> to_device;  // GB/s, page-locked host -> device, each device alone
  double to_all = 0;              // GB/s summed, page-locked host -> every device at once
  double from_all = 0;            // GB/s summed, device -> page-locked host, every device at once
};

// Copies `bytes` (> 0) between a page-locked host buffer of each device and its memory `reps`
// (>= 1) times per measure, on one stream per device, all issued before any is awaited: each
// figure is the bytes copied over the time from the first issue to the last completion. A device may
// be listed twice (two buffers and streams on it). Allocates (not for the request path).
// FAILED_PRECONDITION without CUDA or a visible GPU, INVALID_ARGUMENT for an empty or invisible
// device list or non-positive sizes, the driver's error otherwise. Thread-compatible.
absl::StatusOr<CopyBandwidth> MeasureCopyBandwidth(const std::vector<int>& devices, int64_t bytes,
                                                   int reps);

}  // namespace grove::bench
