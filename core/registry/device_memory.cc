#include "core/registry/device_memory.h"

#if defined(GROVE_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "core/gpu/device_set.h"

namespace grove::registry {

std::vector<DeviceMemory> QueryDeviceMemory() {
  std::vector<DeviceMemory> out;
#if defined(GROVE_HAVE_CUDA)
  const int count = gpu::VisibleGpuCount();
  int current = 0;
  cudaGetDevice(&current);
  for (int d = 0; d < count; ++d) {
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaSetDevice(d) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    out.push_back(DeviceMemory{"cuda:" + std::to_string(d),
                               static_cast<int64_t>(total_bytes - free_bytes),
                               static_cast<int64_t>(total_bytes)});
  }
  cudaSetDevice(current);
#endif
  return out;
}

}  // namespace grove::registry
