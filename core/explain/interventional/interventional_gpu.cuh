// Interventional SHAP kernels (included only from interventional_gpu.cu); the per-lane arithmetic
// is MaskCoefficient / RowPathMask of interventional_paths.h, shared with the CPU paths strategy.
#pragma once

#include <cstdint>

#include "core/explain/interventional/interventional_exact.h"
#include "core/explain/interventional/interventional_paths.h"
#include "core/explain/paths.h"
#include "core/model/transform.h"

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
  DevicePathArrays d_layout;  // the merged path layout
  const uint32_t* d_mask_begin = nullptr;
  const uint32_t* d_masks = nullptr;
  const uint32_t* d_counts = nullptr;
  const double* d_weights = nullptr;
  const double* d_scale = nullptr;  // per output: fixed-point scale
  double inv_background = 1.0;      // 1 / background rows
  int64_t num_bins = 0;
  const float* d_rows = nullptr;
  int64_t num_rows = 0;
  int num_features = 0;  // the rows' columns
  // The players: per feature its column (PathLayout::player_of on the device; null for the
  // features) and their count. Output blocks are num_players + 1 wide.
  const int32_t* d_player_of = nullptr;
  int num_players = 0;
  int iteration_begin = 0;
  int iteration_end = 0;
  unsigned long long* d_acc = nullptr;  // num_rows x acc_width, fixed point
  int64_t acc_width = 0;
};

// The linearized output space's per-call arrays (workspace; see InterventionalGpu).
struct LinearizedArgs {
  const uint16_t* d_mask_rows = nullptr;  // LinearizedLayout::mask_rows
  int64_t n = 0;                          // background rows
  const double* d_rho = nullptr;          // rows x outputs x n: each pair's LinearizedFactor
};

// One lane's path element (a warp explains one bin: a path element per lane, as TreeShapGpu).
struct Lane {
  PathElement e;
  PathInfo info;
  int rel = 0;               // the element's index in its path (0: the root)
  bool active = false;       // the lane holds an element
  bool in_range = false;     // its tree is in the call's iteration range
  uint32_t full = 0;         // its path's full mask
  uint32_t members = 0;      // its path's group members (kElemGroupMember): FoldGroupMembers
  int32_t player = -1;       // the element's output column (PlayerColumn)
  // An element of a path in range: it evaluates its split for the row masks.
  __device__ bool is_element() const { return active && rel > 0 && in_range; }
  // ... and a player's element (not a group's null member): it has values to add.
  __device__ bool is_player() const { return is_element() && IsPlayerElement(e); }
};

__device__ inline Lane LoadLane(const KernelArgs& a, int64_t bin, int lane) {
  Lane l;
  const uint32_t index = a.d_layout.bin_offsets[bin] + lane;
  l.active = index < a.d_layout.bin_offsets[bin + 1];
  if (l.active) {
    l.e = a.d_layout.elements[index];
    l.info = a.d_layout.paths[l.e.path];
    l.rel = static_cast<int>(index - l.info.element_begin);
    l.in_range = l.info.iteration >= a.iteration_begin && l.info.iteration < a.iteration_end;
    l.full = FullMask(l.info.length);
    if (l.rel > 0) l.player = PlayerColumn(a.d_player_of, l.e);
  }
  const bool member = l.active && (l.e.flags & kElemGroupMember);
  l.members = (__ballot_sync(kAllLanes, member) >> (lane - l.rel)) & l.full;
  return l;
}

// The X mask of each of the warp's rows over the lane's path (one ballot per row; rows past the
// end match every element).
__device__ inline void RowMasks(const KernelArgs& a, const Lane& l, int64_t row_begin,
                                uint32_t (&x)[kRowsPerWarp]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = row_begin + r;
    bool match = true;  // the root, idle lanes and rows past the end
    if (l.is_element() && row < a.num_rows) {
      match = PathElementMatches(l.e, a.d_layout.category_bits,
                                 a.d_rows[row * a.num_features + l.e.feature]);
    }
    const uint32_t ballot = __ballot_sync(kAllLanes, match);
    x[r] = (ballot >> (lane - l.rel)) & l.full;  // the path's lanes start at lane - rel
    if (l.members != 0) x[r] = FoldGroupMembers(x[r], l.members);
  }
}

__device__ inline void LoadWeights(const KernelArgs& a, double* weights) {
  for (int i = threadIdx.x; i < kWeightEntries; i += blockDim.x) weights[i] = a.d_weights[i];
  __syncthreads();
}

// A warp's bin (one path element per lane) and its block's rows with their X masks.
struct WarpRows {
  Lane l;
  int64_t row_begin = 0;
  uint32_t x[kRowsPerWarp];
};

// Fills `w` for this warp; false when the warp has no bin (the grid's last block). Warp-uniform.
__device__ inline bool BeginWarp(const KernelArgs& a, WarpRows* w) {
  const int64_t bin = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (bin >= a.num_bins) return false;
  w->l = LoadLane(a, bin, threadIdx.x & 31);
  w->row_begin = static_cast<int64_t>(blockIdx.y) * kRowsPerWarp;
  RowMasks(a, w->l, w->row_begin, w->x);
  return true;
}

// acc[r] (a row's coefficient of the lane's element, times 1 / background rows) as a fixed-point
// value of output `group` added to the row's accumulator.
__device__ inline void AddFixed(const KernelArgs& a, const Lane& l, int64_t row_begin,
                                const double (&acc)[kRowsPerWarp], int k) {
  const int64_t f1 = a.num_players + 1;
  const int group = l.info.group + k;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = row_begin + r;
    if (row >= a.num_rows || acc[r] == 0.0) continue;
    const double v = acc[r] * a.inv_background * a.d_layout.values[l.info.value_begin + k];
    const long long fixed = __double2ll_rn(v * a.d_scale[group]);
    if (fixed != 0) {
      atomicAdd(a.d_acc + row * a.acc_width + group * f1 + l.player,
                static_cast<unsigned long long>(fixed));
    }
  }
}

// The start of the kernels whose player lanes add coefficients (InterventionalKernel,
// LinearizedKernel): the weight table loaded into the block's `weights`, then BeginWarp; false
// where the warp has no bin or the lane no player's element (nothing to add).
__device__ __forceinline__ bool BeginPlayerWarp(const KernelArgs& a, double* weights,
                                                WarpRows* w) {
  LoadWeights(a, weights);
  return BeginWarp(a, w) && w->l.is_player();
}

// Grid: x = bins / kWarpsPerBlock (rounded up), y = rows / kRowsPerWarp (rounded up).
__global__ void __launch_bounds__(kBlockThreads) InterventionalKernel(KernelArgs a) {
  __shared__ double weights[kWeightEntries];
  WarpRows w;
  if (!BeginPlayerWarp(a, weights, &w)) return;
  const uint32_t bit = 1u << w.l.rel;
  double acc[kRowsPerWarp] = {};
  const uint32_t mask_end = a.d_mask_begin[w.l.e.path + 1];
  for (uint32_t m = a.d_mask_begin[w.l.e.path]; m < mask_end; ++m) {
    const uint32_t z = a.d_masks[m];
    const double count = static_cast<double>(a.d_counts[m]);
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      acc[r] += count * MaskCoefficient(w.x[r], z, w.l.full, bit, weights);
    }
  }
  for (int k = 0; k < w.l.info.width; ++k) AddFixed(a, w.l, w.row_begin, acc, k);
}

// Linearized output space: as InterventionalKernel, each mask's background rows weighted by their
// pair's factor (l.d_rho) instead of counted, per output of the path.
__global__ void __launch_bounds__(kBlockThreads) LinearizedKernel(KernelArgs a, LinearizedArgs la) {
  __shared__ double weights[kWeightEntries];
  WarpRows w;
  if (!BeginPlayerWarp(a, weights, &w)) return;
  const uint32_t bit = 1u << w.l.rel;
  const int num_outputs = static_cast<int>(a.acc_width / (a.num_players + 1));
  const uint16_t* path_rows = la.d_mask_rows + static_cast<int64_t>(w.l.e.path) * la.n;
  const uint32_t mask_begin = a.d_mask_begin[w.l.e.path];
  const uint32_t mask_end = a.d_mask_begin[w.l.e.path + 1];
  for (int k = 0; k < w.l.info.width; ++k) {
    const double* rho = la.d_rho + (w.row_begin * num_outputs + w.l.info.group + k) * la.n;
    const int64_t row_stride = num_outputs * la.n;
    double acc[kRowsPerWarp] = {};
    const uint16_t* rows_of_mask = path_rows;
    for (uint32_t m = mask_begin; m < mask_end; ++m) {
      const uint32_t z = a.d_masks[m];
      const uint32_t count = a.d_counts[m];
      double c[kRowsPerWarp];
      bool any = false;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        c[r] = w.row_begin + r < a.num_rows ? MaskCoefficient(w.x[r], z, w.l.full, bit, weights)
                                            : 0.0;
        any |= c[r] != 0.0;
      }
      if (any) {
        double rho_sum[kRowsPerWarp] = {};
        for (uint32_t i = 0; i < count; ++i) {
          const int j = rows_of_mask[i];
#pragma unroll
          for (int r = 0; r < kRowsPerWarp; ++r) {
            if (c[r] != 0.0) rho_sum[r] += rho[r * row_stride + j];
          }
        }
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) acc[r] += c[r] * rho_sum[r];
      }
      rows_of_mask += count;
    }
    AddFixed(a, w.l, w.row_begin, acc, k);
  }
}

// Margins by paths: the root lane of each path in range adds its leaf values (fixed point, per
// output scale) to d_margin_acc[row * outputs + group + k] of the rows that reach the leaf.
__global__ void __launch_bounds__(kBlockThreads) MarginKernel(KernelArgs a,
                                                              unsigned long long* d_margin_acc,
                                                              int num_outputs) {
  WarpRows w;
  if (!BeginWarp(a, &w) || !w.l.active || w.l.rel != 0 || !w.l.in_range) return;
  const Lane& l = w.l;
  const int64_t row_begin = w.row_begin;
  const uint32_t(&x)[kRowsPerWarp] = w.x;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = row_begin + r;
    if (row >= a.num_rows || x[r] != l.full) continue;
    for (int k = 0; k < l.info.width; ++k) {
      const int group = l.info.group + k;
      const long long fixed =
          __double2ll_rn(a.d_layout.values[l.info.value_begin + k] * a.d_scale[group]);
      atomicAdd(d_margin_acc + row * num_outputs + group, static_cast<unsigned long long>(fixed));
    }
  }
}

// d_margins[i] = base_margin[k] + d_margin_acc[i] / scale[k] (i over rows x outputs).
__global__ void MarginsFromFixed(const unsigned long long* d_margin_acc, int64_t n, int num_outputs,
                                 const double* d_scale, const double* d_base_margin,
                                 double* d_margins) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int k = static_cast<int>(i % num_outputs);
    d_margins[i] = d_base_margin[k] +
                   static_cast<double>(static_cast<long long>(d_margin_acc[i])) / d_scale[k];
  }
}

// A flat index t over rows x outputs x `inner` entries: its entry (t % inner), its row and output
// (t / inner = row * outputs + k) and the output k.
struct RowOutputEntry {
  int64_t entry;
  int64_t rk;
  int k;
};
__device__ __forceinline__ RowOutputEntry SplitRowOutput(int64_t t, int64_t inner,
                                                         int num_outputs) {
  const int64_t entry = t % inner;
  const int64_t rk = t / inner;
  return {entry, rk, static_cast<int>(rk % num_outputs)};
}

// d_rho[(r * outputs + k) * n + j] = LinearizedFactor(row r's margin k, background row j's).
__global__ void RhoKernel(TransformParams tp, const double* d_row_margins, int64_t rows,
                          const double* d_background_margins, int64_t n, int num_outputs,
                          double* d_rho) {
  const int64_t total = rows * num_outputs * n;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const RowOutputEntry e = SplitRowOutput(i, n, num_outputs);
    d_rho[i] = LinearizedFactor(tp, d_row_margins[e.rk],
                                d_background_margins[e.entry * num_outputs + e.k]);
  }
}

// d_bias[k] = mean over the background of the link of its margin k (one thread per output, the
// rows in order: deterministic).
__global__ void LinkMeanKernel(TransformParams tp, const double* d_background_margins, int64_t n,
                               int num_outputs, double* d_bias) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= num_outputs) return;
  double s = 0;
  for (int64_t j = 0; j < n; ++j) {
    s += TransformScalar(tp, d_background_margins[j * num_outputs + k] / tp.average_divisor);
  }
  d_bias[k] = s / static_cast<double>(n);
}

// The 32 lanes of a warp as one team of interventional_exact.h.
struct WarpTeam {
  GROVE_HD int rank() const {
#if defined(__CUDA_ARCH__)
    return threadIdx.x & 31;
#else
    return 0;
#endif
  }
  GROVE_HD int size() const { return 32; }
  GROVE_HD void Sync() const {
#if defined(__CUDA_ARCH__)
    __syncwarp();
#endif
  }
  GROVE_HD uint32_t Ballot(bool b) const {
#if defined(__CUDA_ARCH__)
    return __ballot_sync(kAllLanes, b);
#else
    return b ? 1u : 0u;
#endif
  }
  GROVE_HD uint32_t Broadcast(uint32_t v, int src) const {
#if defined(__CUDA_ARCH__)
    return __shfl_sync(kAllLanes, v, src);
#else
    return v;
#endif
  }
  // A fixed tree to lane 0, then lane 0's sum to every lane: the same bits on all of them.
  GROVE_HD double Sum(double v) const {
#if defined(__CUDA_ARCH__)
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(kAllLanes, v, offset);
    return __shfl_sync(kAllLanes, v, 0);
#else
    return v;
#endif
  }
};

// Exact probability space (interventional_exact.h): the per-call arrays.
struct ExactKernelArgs {
  const float* d_rows = nullptr;
  int64_t num_rows = 0;
  const uint32_t* d_z_masks = nullptr;  // background rows x paths
  int64_t n = 0;                        // background rows
  // Per warp w: its ExactScratch arrays start at w * the ExactScratchSizes entry of each.
  uint32_t* d_x_masks = nullptr;
  int32_t* d_slot_of = nullptr;  // all -1 before the launch
  int32_t* d_slot_feature = nullptr;
  double* d_partial = nullptr;  // all 0 before the launch
  double* d_table = nullptr;    // all 0 before the launch
  ExactScratchSizes sizes{};
  int64_t num_warps = 0;                     // warps with scratch (the grid may hold more)
  double* d_phi = nullptr;                   // num_rows x acc_width, all 0 before the launch
  int64_t acc_width = 0;
  double* d_inter = nullptr;  // null, or interaction values: num_rows x inter_width, all 0 before
  int64_t inter_width = 0;
  unsigned long long* d_refused = nullptr;   // ULLONG_MAX before; min of (pair << 16 | min(d, 65535))
};

// z_masks of every path (one thread per path).
__global__ void ScatterMasksKernel(int64_t num_paths, int64_t n, const uint32_t* d_mask_begin,
                                   const uint32_t* d_masks, const uint32_t* d_counts,
                                   const uint16_t* d_mask_rows, uint32_t* d_z_masks) {
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < num_paths;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    ScatterPathMasks(p, num_paths, n, d_mask_begin, d_masks, d_counts, d_mask_rows, d_z_masks);
  }
}

// One warp per row (grid-stride over rows): ExplainExactRow into d_phi; a refused pair is
// recorded in d_refused and ends its row.
__global__ void __launch_bounds__(kBlockThreads) ExactKernel(ExactArgs a, ExactKernelArgs k) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t warps = k.num_warps;
  if (warp >= warps) return;
  const WarpTeam team;
  const ExactScratchSizes& z = k.sizes;
  const ExactScratch s{k.d_x_masks + warp * z.x_masks, k.d_slot_of + warp * z.slot_of,
                       k.d_slot_feature + warp * z.slot_feature, k.d_partial + warp * z.partial,
                       k.d_table + warp * z.table};
  for (int64_t row = warp; row < k.num_rows; row += warps) {
    int d = 0;
    const int64_t j = ExplainExactRow(
        team, a, s, k.d_rows + row * a.num_features, k.d_z_masks, k.n, k.d_phi + row * k.acc_width,
        &d, k.d_inter != nullptr ? k.d_inter + row * k.inter_width : nullptr);
    if (j >= 0 && team.rank() == 0) {
      const unsigned long long pair = static_cast<unsigned long long>(row * k.n + j);
      atomicMin(k.d_refused, (pair << 16) | static_cast<unsigned long long>(d < 65535 ? d : 65535));
    }
  }
}

// out[r][c] = acc[r][c] / scale[k] / divisor as float (d_phi[r][c] when given: the exact space's
// double accumulators); the bias column (c = F of each output block) gets d_bias[k] when given,
// else (base_margin[k] + prefix[end][k] - prefix[begin][k]) / divisor (the trees of the iteration
// range). `divisor`: 1, or the average divisor of an identity link's probability space.
__global__ void FinishKernel(const unsigned long long* d_acc, const double* d_phi,
                             int64_t num_rows, int num_outputs, int num_players,
                             const double* d_scale, const double* d_base_margin,
                             const double* d_iteration_prefix, int iteration_begin,
                             int iteration_end, const double* d_bias, double divisor,
                             float* d_out) {
  const int64_t f1 = num_players + 1;
  const int64_t width = num_outputs * f1;
  const int64_t n = num_rows * width;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % width;
    const int k = static_cast<int>(c / f1);
    double v = d_phi != nullptr ? d_phi[i]
                                : static_cast<double>(static_cast<long long>(d_acc[i])) / d_scale[k];
    if (c % f1 == num_players) {
      v = d_bias != nullptr ? d_bias[k]
                            : d_base_margin[k] + d_iteration_prefix[iteration_end * num_outputs + k] -
                                  d_iteration_prefix[iteration_begin * num_outputs + k];
    }
    if (divisor != 1.0) v /= divisor;
    d_out[i] = static_cast<float>(v);
  }
}

}  // namespace interventional_kernels
}  // namespace grove
