// Compiled only with CUDA (the header needs the CUDA runtime).
#if defined(GROVE_HAVE_CUDA)

#include "core/gpu/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace grove::gpu {

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": ", cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInvalidDevice:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace grove::gpu

#endif  // GROVE_HAVE_CUDA
