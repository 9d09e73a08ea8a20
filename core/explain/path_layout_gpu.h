// One PathLayout's resident copy on one GPU, shared by the GPU explanation engines built on that
// layout (TreeShapGpu, InterventionalGpu): the arrays their warp kernels read (DevicePathArrays),
// a grouped layout's player map, the per-output biases and the fixed-point scales of SHAP values
// and of interaction values. Plain C++: compiles with g++; path_layout_gpu.cu uploads, and
// path_layout_gpu_nocuda.cc stands in without CUDA (UNAVAILABLE).
//
// Sharing: ResidentPathLayout::On(layout, device) returns the copy of that layout object on that
// GPU: uploaded by the first call, the same copy for every later call while some caller still
// holds it, freed with its last holder. The key is the layout object, not its contents: the
// servable builds one layout per model and hands it to each of its engines, so a model's SHAP and
// interventional engines hold its paths on a GPU once; a layout built separately (a grouping's)
// is a copy of its own. A copy holds its layout, so the key outlives every copy made of it.
//
// Accounting: the engines' DeviceBytes leave shared copies out; ResidentBytes(layout) counts a
// layout's live copies once, for whoever owns the layout: the servable for the model's; an engine
// for a layout it built itself (no caller gave it one) and for its groupings' layouts.
//
// Thread safety: On and ResidentBytes may be called concurrently (core/common/shared_by_key.h);
// On waits only for an upload of the same layout to the same GPU in progress, ResidentBytes for
// none (a copy being uploaded is not counted until it is complete). A copy is
// complete and immutable once returned (the upload has synchronised) and may be read by kernels
// on any stream of its GPU. Its memory is freed (cudaFree, which synchronises the device) on
// whichever thread drops the last holder.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "core/explain/paths.h"

namespace grove {

class ResidentPathLayout {
 public:
  // The copy of `layout` on GPU `device` (uploaded synchronously if there is none).
  // INVALID_ARGUMENT for a null layout, UNAVAILABLE without CUDA or for a device that is not
  // visible, RESOURCE_EXHAUSTED when the copy does not fit.
  static absl::StatusOr<std::shared_ptr<const ResidentPathLayout>> On(PathLayoutPtr layout,
                                                                      int device);
  // Bytes of `layout`'s live copies, all GPUs together (0 when none is held).
  static int64_t ResidentBytes(const PathLayout& layout);

  ResidentPathLayout(const ResidentPathLayout&) = delete;
  ResidentPathLayout& operator=(const ResidentPathLayout&) = delete;
  virtual ~ResidentPathLayout() = default;

  int device() const { return device_; }
  const PathLayout& layout() const { return *layout_; }
  // elements, paths, bin_offsets, values and category_bits on the device.
  const DevicePathArrays& arrays() const { return arrays_; }
  // PathLayout::player_of on the device; null for a layout of the features.
  const int32_t* player_of() const { return player_of_; }
  // PathLayout::bias (one per output) on the device.
  const double* bias() const { return bias_; }
  // FixedPointScales(layout, interactions) on the device (one per output).
  const double* scale(bool interactions) const { return scale_[interactions ? 1 : 0]; }
  int64_t bytes() const { return bytes_; }

 protected:
  ResidentPathLayout(PathLayoutPtr layout, int device)
      : layout_(std::move(layout)), device_(device) {}

  PathLayoutPtr layout_;
  int device_ = 0;
  DevicePathArrays arrays_;
  const int32_t* player_of_ = nullptr;
  const double* bias_ = nullptr;
  const double* scale_[2] = {nullptr, nullptr};
  int64_t bytes_ = 0;
};

using ResidentPathLayoutPtr = std::shared_ptr<const ResidentPathLayout>;

}  // namespace grove
