// Interventional SHAP kernels (included only from interventional_gpu.cu); the per-lane arithmetic
// is MaskCoefficient / RowPathMask of interventional_paths.h, shared with the CPU paths strategy.
#pragma once

#include <cstdint>

#include "core/explain/interventional_paths.h"
#include "core/explain/paths.h"

namespace grove {
namespace interventional_kernels {

inline constexpr int kWarpsPerBlock = 4;
inline constexpr int kBlockThreads = kWarpsPerBlock * 32;
// Rows a warp explains per pass over its bin's masks: their X masks and accumulators stay in
// registers, so each (mask, count) load serves this many rows.
inline constexpr int kRowsPerWarp = 8;
inline constexpr unsigned kAllLanes = 0xffffffffu;
inline constexpr int kWeightEntries = kInterventionalWeightSide * kInterventionalWeightSide;

struct KernelArgs {
  const PathElement* d_elements = nullptr;
  const PathInfo* d_paths = nullptr;
  const uint32_t* d_bin_offsets = nullptr;
  const double* d_values = nullptr;
  const uint32_t* d_category_bits = nullptr;
  const uint32_t* d_mask_begin = nullptr;
  const uint32_t* d_masks = nullptr;
  const uint32_t* d_counts = nullptr;
  const double* d_weights = nullptr;
  const double* d_scale = nullptr;  // per output: fixed-point scale
  double inv_background = 1.0;      // 1 / background rows
  int64_t num_bins = 0;
  const float* d_rows = nullptr;
  int64_t num_rows = 0;
  int num_features = 0;
  int iteration_begin = 0;
  int iteration_end = 0;
  unsigned long long* d_acc = nullptr;  // num_rows x acc_width, fixed point
  int64_t acc_width = 0;
};

// Grid: x = bins / kWarpsPerBlock (rounded up), y = rows / kRowsPerWarp (rounded up).
__global__ void __launch_bounds__(kBlockThreads) InterventionalKernel(KernelArgs a) {
  __shared__ double weights[kWeightEntries];
  for (int i = threadIdx.x; i < kWeightEntries; i += blockDim.x) weights[i] = a.d_weights[i];
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const int64_t bin = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (bin >= a.num_bins) return;  // warp-uniform
  const uint32_t index = a.d_bin_offsets[bin] + lane;
  const bool active = index < a.d_bin_offsets[bin + 1];
  PathElement e;
  PathInfo info;
  int rel = 0;
  if (active) {
    e = a.d_elements[index];
    info = a.d_paths[e.path];
    rel = static_cast<int>(index - info.element_begin);
  }
  const bool is_element = active && rel > 0 && info.iteration >= a.iteration_begin &&
                          info.iteration < a.iteration_end;
  const uint32_t full = active ? FullMask(info.length) : 0u;
  const int64_t row_begin = static_cast<int64_t>(blockIdx.y) * kRowsPerWarp;
  uint32_t x[kRowsPerWarp];
  double acc[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = row_begin + r;
    bool match = true;  // the root, idle lanes and rows past the end
    if (is_element && row < a.num_rows) {
      match = PathElementMatches(e, a.d_category_bits, a.d_rows[row * a.num_features + e.feature]);
    }
    const uint32_t ballot = __ballot_sync(kAllLanes, match);
    x[r] = (ballot >> (lane - rel)) & full;  // the path's lanes start at lane - rel
    acc[r] = 0.0;
  }
  if (!is_element) return;
  const uint32_t bit = 1u << rel;
  const uint32_t mask_end = a.d_mask_begin[e.path + 1];
  for (uint32_t m = a.d_mask_begin[e.path]; m < mask_end; ++m) {
    const uint32_t z = a.d_masks[m];
    const double count = static_cast<double>(a.d_counts[m]);
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) acc[r] += count * MaskCoefficient(x[r], z, full, bit, weights);
  }
  const int64_t f1 = a.num_features + 1;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = row_begin + r;
    if (row >= a.num_rows || acc[r] == 0.0) continue;
    unsigned long long* out = a.d_acc + row * a.acc_width + e.feature;
    for (int k = 0; k < info.width; ++k) {
      const int group = info.group + k;
      const double v = acc[r] * a.inv_background * a.d_values[info.value_begin + k];
      const long long fixed = __double2ll_rn(v * a.d_scale[group]);
      if (fixed != 0) atomicAdd(out + group * f1, static_cast<unsigned long long>(fixed));
    }
  }
}

// out[r][c] = acc[r][c] / scale[k] as float; the bias column (c = F of each output block) gets
// base_margin[k] + prefix[end][k] - prefix[begin][k] (the trees of the iteration range).
__global__ void FinishKernel(const unsigned long long* d_acc, int64_t num_rows, int num_outputs,
                             int num_features, const double* d_scale, const double* d_base_margin,
                             const double* d_iteration_prefix, int iteration_begin,
                             int iteration_end, float* d_out) {
  const int64_t f1 = num_features + 1;
  const int64_t width = num_outputs * f1;
  const int64_t n = num_rows * width;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % width;
    const int k = static_cast<int>(c / f1);
    double v = static_cast<double>(static_cast<long long>(d_acc[i])) / d_scale[k];
    if (c % f1 == num_features) {
      v = d_base_margin[k] + d_iteration_prefix[iteration_end * num_outputs + k] -
          d_iteration_prefix[iteration_begin * num_outputs + k];
    }
    d_out[i] = static_cast<float>(v);
  }
}

}  // namespace interventional_kernels
}  // namespace grove
