// Stand-in for the GPU interventional SHAP engine in builds without CUDA: Create fails cleanly.
#include "absl/status/status.h"
#include "core/explain/interventional/interventional_gpu.h"

namespace grove {

absl::StatusOr<std::unique_ptr<InterventionalGpu>> InterventionalGpu::Create(
    ForestPtr, PathLayoutPtr, InterventionalLayoutPtr) {
  return absl::UnavailableError("no GPU: Grove was built without CUDA");
}

}  // namespace grove
