// Compiled only with CUDA (the header needs the CUDA runtime).
#if defined(GROVE_HAVE_CUDA)

#include "core/gpu/event_wait.h"

#include <chrono>

#include "core/gpu/cuda_status.h"

namespace grove::gpu {

absl::Status CreateWaitEvent(cudaEvent_t* event, absl::string_view what) {
  return CudaStatus(
      cudaEventCreateWithFlags(event, cudaEventDisableTiming | cudaEventBlockingSync), what);
}

absl::Status WaitForEvent(cudaEvent_t event, absl::string_view what, absl::Duration spin) {
  // A steady clock, not an injected one: this bounds a poll of the driver, not a schedule.
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(spin);
  do {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return absl::OkStatus();
    if (e != cudaErrorNotReady) return CudaStatus(e, what);
  } while (std::chrono::steady_clock::now() < deadline);
  return CudaStatus(cudaEventSynchronize(event), what);
}

}  // namespace grove::gpu

#endif  // GROVE_HAVE_CUDA
