// Stand-in for the GPU path layout copies in builds without CUDA: no device, nothing resident.
#include "absl/status/status.h"
#include "core/explain/path_layout_gpu.h"

namespace grove {

absl::StatusOr<std::shared_ptr<const ResidentPathLayout>> ResidentPathLayout::On(
    PathLayoutPtr layout, int) {
  if (layout == nullptr) return absl::InvalidArgumentError("path layout upload: no layout");
  return absl::UnavailableError("no GPU: Grove was built without CUDA");
}

int64_t ResidentPathLayout::ResidentBytes(const PathLayout&) { return 0; }

}  // namespace grove
