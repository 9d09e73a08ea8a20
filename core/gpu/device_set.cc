#include "core/gpu/device_set.h"

#if defined(GROVE_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace grove::gpu {

int VisibleGpuCount() {
#if defined(GROVE_HAVE_CUDA)
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

}  // namespace grove::gpu
