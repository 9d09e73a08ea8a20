// Stand-in for the GPU TreeSHAP engine in builds without CUDA: no device, Create fails cleanly.
#include "absl/status/status.h"
#include "core/explain/treeshap/treeshap_gpu.h"

namespace grove {

absl::StatusOr<std::unique_ptr<TreeShapGpu>> TreeShapGpu::Create(PathLayoutPtr,
                                                                  const TreeShapGpuOptions&) {
  return absl::UnavailableError("no GPU: Grove was built without CUDA");
}

}  // namespace grove
