// The one conversion of CUDA runtime errors to absl::Status, shared by every GPU engine (Tahoe
// prediction, TreeSHAP, quadrature). Needs cuda_runtime_api.h: included only from CUDA-enabled
// translation units.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace grove::gpu {

// OK for cudaSuccess. Otherwise "`what`: <CUDA error name> (<description>)" with the canonical code
// a caller can act on: RESOURCE_EXHAUSTED when device (or pinned host) memory ran out, UNAVAILABLE
// when no usable device or driver is present, INTERNAL for the rest (a bug or a broken device).
// Does not clear CUDA's per-thread error state.
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

// Restores the calling thread's current CUDA device when it goes out of scope. An engine's load
// visits every device; without this the caller's later allocations land on the last device it
// visited (seen on two GPUs: the test's rows were allocated on GPU 1 and read by GPU 0's kernel, an
// illegal address). Not thread-safe across threads (the current device is per thread).
class ScopedCurrentDevice {
 public:
  ScopedCurrentDevice() {
    if (cudaGetDevice(&device_) != cudaSuccess) {
      (void)cudaGetLastError();
      device_ = -1;
    }
  }
  ~ScopedCurrentDevice() {
    if (device_ >= 0) (void)cudaSetDevice(device_);
  }
  ScopedCurrentDevice(const ScopedCurrentDevice&) = delete;
  ScopedCurrentDevice& operator=(const ScopedCurrentDevice&) = delete;

 private:
  int device_ = -1;
};

}  // namespace grove::gpu

// Returns the CudaStatus of `expr` from the enclosing function unless it is cudaSuccess.
#define GROVE_CUDA_RETURN_IF_ERROR(expr, what)                                       \
  do {                                                                               \
    if (absl::Status _grove_cuda = ::grove::gpu::CudaStatus((expr), (what));         \
        !_grove_cuda.ok()) {                                                         \
      return _grove_cuda;                                                            \
    }                                                                                \
  } while (0)
