// ResidentPathLayout: uploads and the registry of live copies (see path_layout_gpu.h).
#include "core/explain/path_layout_gpu.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/shared_by_key.h"
#include "core/gpu/cuda_status.h"
#include "core/gpu/device_buffer.h"
#include "core/gpu/device_set.h"

namespace grove {
namespace {

class ResidentPathLayoutImpl final : public ResidentPathLayout {
 public:
  ResidentPathLayoutImpl(PathLayoutPtr layout, int device)
      : ResidentPathLayout(std::move(layout), device) {}

  // The copies; called once, on `device`.
  absl::Status Upload() {
    const PathLayout& l = *layout_;
    const std::string what = absl::StrCat("path layout upload to GPU ", device_);
    auto up = [&](const auto& host, gpu::DeviceBuffer* b) {
      return gpu::UploadCounted(host, what, b, &bytes_);
    };
    for (absl::Status s :
         {up(l.elements, &elements_), up(l.paths, &paths_), up(l.bin_offsets, &bin_offsets_),
          up(l.values, &values_), up(l.category_bits, &category_bits_), up(l.bias, &bias_buffer_),
          up(FixedPointScales(l, false), &scales_[0]),
          up(FixedPointScales(l, true), &scales_[1])}) {
      if (!s.ok()) return s;
    }
    if (!l.player_of.empty()) {
      if (absl::Status s = up(l.player_of, &player_of_buffer_); !s.ok()) return s;
      player_of_ = player_of_buffer_.as<int32_t>();
    }
    arrays_ = {elements_.as<PathElement>(), paths_.as<PathInfo>(), bin_offsets_.as<uint32_t>(),
               values_.as<double>(), category_bits_.as<uint32_t>()};
    bias_ = bias_buffer_.as<double>();
    scale_[0] = scales_[0].as<double>();
    scale_[1] = scales_[1].as<double>();
    // cudaMemcpy from pageable memory may return before the DMA lands, and the engines read the
    // copy from non-blocking streams, which do not wait for the legacy stream.
    GROVE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(cudaStreamLegacy), what);
    return absl::OkStatus();
  }

 private:
  gpu::DeviceBuffer elements_, paths_, bin_offsets_, values_, category_bits_, player_of_buffer_,
      bias_buffer_, scales_[2];
};

// The live copies by (layout object's address, device): each uploaded under its own key's lock,
// so two engines of one model never upload twice and another model's load never waits for it.
using Registry = SharedByKey<std::pair<uintptr_t, int>, ResidentPathLayout>;

Registry& TheRegistry() {
  // Never destroyed: On and ResidentBytes may run from other objects' static destructors.
  static Registry* const registry = new Registry();
  return *registry;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ResidentPathLayout>> ResidentPathLayout::On(
    PathLayoutPtr layout, int device) {
  if (layout == nullptr) return absl::InvalidArgumentError("path layout upload: no layout");
  const int visible = gpu::VisibleGpuCount();
  if (device < 0 || device >= visible) {
    return absl::UnavailableError(
        absl::StrCat("path layout upload: no GPU ", device, " (", visible, " visible)"));
  }
  const auto key = std::make_pair(reinterpret_cast<uintptr_t>(layout.get()), device);
  return TheRegistry().Get(key, [&]() -> absl::StatusOr<ResidentPathLayoutPtr> {
    const gpu::ScopedCurrentDevice keep_device;
    GROVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), "path layout upload: cudaSetDevice");
    auto copy = std::make_shared<ResidentPathLayoutImpl>(std::move(layout), device);
    if (absl::Status s = copy->Upload(); !s.ok()) return s;
    return ResidentPathLayoutPtr(std::move(copy));
  });
}

int64_t ResidentPathLayout::ResidentBytes(const PathLayout& layout) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(&layout);
  int64_t bytes = 0;
  auto of_layout = [&](const std::pair<uintptr_t, int>& key) { return key.first == address; };
  for (const std::shared_ptr<const ResidentPathLayout>& copy : TheRegistry().Live(of_layout)) {
    bytes += copy->bytes();
  }
  return bytes;
}

}  // namespace grove
