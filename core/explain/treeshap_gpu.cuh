// Warp-level TreeSHAP kernels (included only from treeshap_gpu.cu).
//
// One warp explains one bin (kWarpLanes path elements of whole paths, one element per lane) for
// rows_per_warp rows. A path occupies the lanes [seg, seg + len) of its bin; lane seg holds the
// root element. Per row each lane computes its one fraction o, then
//   EXTEND: the subset weights pw[0..len) of the path, pw[k] in lane seg + k, one element at a
//           time: element u is broadcast from its lane, each lane updates its weight from its own
//           and its left neighbour's (shuffles);
//   UNWOUNDSUM: every lane walks the path's weights from the top (shuffles) with its own (z, o);
//   phi = unwound sum * (o - z) * leaf value, added in 64-bit fixed point (integer atomics:
//   deterministic).
// Interactions condition on each path element c in turn: the path without c is EXTENDed and
// UNWOUND, contributions scaled by (o_c - z_c) / 2 go to M[c][j], their negation to M[c][c];
// the unconditioned phi_i goes to M[i][i].
// All shuffles are executed by all 32 lanes (loops run to the bin's longest path); lanes whose
// path is shorter ignore the results.
#pragma once

#include <cstdint>

#include "core/explain/paths.h"

namespace grove {
namespace treeshap_kernels {

inline constexpr int kWarpsPerBlock = 4;
inline constexpr int kBlockThreads = kWarpsPerBlock * 32;
inline constexpr unsigned kFullMask = 0xffffffffu;
inline constexpr int kNoSkip = 1 << 20;

struct KernelArgs {
  const PathElement* d_elements = nullptr;
  const PathInfo* d_paths = nullptr;
  const uint32_t* d_bin_offsets = nullptr;
  const double* d_values = nullptr;
  const uint32_t* d_category_bits = nullptr;
  const double* d_scale = nullptr;  // per output: fixed-point scale
  int64_t num_bins = 0;
  const float* d_rows = nullptr;
  int64_t num_rows = 0;
  int num_features = 0;
  int rows_per_warp = 1;
  unsigned long long* d_acc = nullptr;  // num_rows x acc_width, fixed point
  int64_t acc_width = 0;
  int bins_per_warp = 1;    // bins each warp explains (consecutive blocks of kWarpsPerBlock bins)
  bool use_shared = false;  // accumulate the block's rows in shared memory, then flush
};

// Lane of reduced-path element k when element `skip` is left out.
__device__ __forceinline__ int Phys(int k, int skip) { return k < skip ? k : k + 1; }

// Subset weight of this lane's element after EXTENDing the path's elements in order (element
// `skip` left out; kNoSkip: none). rl: this lane's index in the (reduced) path, ln: its length,
// in_path: the lane takes part.
template <typename T>
__device__ __forceinline__ T ExtendWarp(T z, T o, int seg, int rl, int ln, bool in_path,
                                        int max_len, int skip) {
  T pw = (in_path && rl == 0) ? T(1) : T(0);
  const int left_src = seg + Phys(rl > 0 ? rl - 1 : 0, skip);
  for (int u = 1; u < max_len; ++u) {
    const int src = seg + Phys(u < ln ? u : (ln > 0 ? ln - 1 : 0), skip);
    const T zu = __shfl_sync(kFullMask, z, src);
    const T ou = __shfl_sync(kFullMask, o, src);
    const T left = __shfl_sync(kFullMask, pw, left_src);
    if (in_path && u < ln && rl <= u) {
      const T inv = T(1) / T(u + 1);
      T next = zu * pw * T(u - rl) * inv;
      if (rl > 0) next += ou * left * T(rl) * inv;
      pw = next;
    }
  }
  return pw;
}

// sum(UNWIND(path, this lane's element).w), same conventions as ExtendWarp.
template <typename T>
__device__ __forceinline__ T UnwoundSumWarp(T pw, T z, T o, int seg, int ln, int max_len,
                                            int skip) {
  const int d = ln > 0 ? ln - 1 : 0;
  T next = __shfl_sync(kFullMask, pw, seg + Phys(d, skip));
  T total = T(0);
  for (int i = max_len - 2; i >= 0; --i) {
    const T pw_i = __shfl_sync(kFullMask, pw, seg + Phys(i < d ? i : d, skip));
    if (i <= d - 1) {
      if (o != T(0)) {
        const T tmp = next * T(d + 1) / T(i + 1);
        total += tmp;
        next = pw_i - tmp * z * T(d - i) / T(d + 1);
      } else {
        total += pw_i / z * T(d + 1) / T(d - i);
      }
    }
  }
  return total;
}

// Is any element of this lane's path dead (z == 0 and o == 0: every subset weight vanishes)?
__device__ __forceinline__ bool PathDead(int seg, int len, bool dead_here) {
  const unsigned dead = __ballot_sync(kFullMask, dead_here);
  const unsigned seg_mask = len >= 32 ? kFullMask : (((1u << len) - 1u) << seg);
  return (dead & seg_mask) != 0;
}

// Per-lane state loaded once per bin.
struct LaneState {
  PathElement e;
  int seg = 0, rel = 0, len = 1;
  int group = 0, width = 0;
  uint32_t value_begin = 0;
  double value_scale0 = 0;  // first value x its output's fixed-point scale
  bool active = false;
  int max_len = 1;
  int max_width = 0;  // over the warp
};

__device__ __forceinline__ void LoadLane(const KernelArgs& a, int64_t bin, LaneState* s) {
  const int lane = threadIdx.x % 32;
  const uint32_t begin = a.d_bin_offsets[bin];
  const uint32_t end = a.d_bin_offsets[bin + 1];
  s->active = static_cast<uint32_t>(lane) < end - begin;
  s->seg = lane;
  s->rel = 0;
  s->len = 1;
  s->width = 0;
  if (s->active) {
    s->e = a.d_elements[begin + lane];
    const PathInfo p = a.d_paths[s->e.path];
    s->rel = static_cast<int>(begin + lane - p.element_begin);
    s->len = p.length;
    s->seg = lane - s->rel;
    s->group = p.group;
    s->width = p.width;
    s->value_begin = p.value_begin;
    s->value_scale0 = a.d_values[p.value_begin] * a.d_scale[p.group];
  } else {
    s->e.flags = kElemRoot;
    s->e.feature = -1;
    s->e.zero_fraction = 1.0;
  }
  int m = s->len;
  for (int off = 16; off > 0; off /= 2) m = max(m, __shfl_xor_sync(kFullMask, m, off));
  s->max_len = m;
  int mw = s->width;
  for (int off = 16; off > 0; off /= 2) mw = max(mw, __shfl_xor_sync(kFullMask, mw, off));
  s->max_width = mw;
}

// Value w of the lane's path times its output's scale.
__device__ __forceinline__ double ValueScale(const KernelArgs& a, const LaneState& s, int w) {
  return w == 0 ? s.value_scale0
                : a.d_values[s.value_begin + w] * a.d_scale[s.group + w];
}

// Accumulator of row r (relative to the block's first row): shared memory when the block's rows
// fit there, else global.
struct Acc {
  unsigned long long* shared;  // nullptr: global
  unsigned long long* global;  // row 0 of the block
  int64_t width;
  __device__ __forceinline__ void Add(int64_t r, int64_t col, long long v) const {
    if (v == 0) return;
    if (shared != nullptr) {
      atomicAdd(shared + r * width + col, static_cast<unsigned long long>(v));
    } else {
      atomicAdd(global + r * width + col, static_cast<unsigned long long>(v));
    }
  }
};

__device__ __forceinline__ long long Fixed(double v) { return __double2ll_rn(v); }

// Zeroes the block's shared accumulator (when used).
__device__ __forceinline__ void ZeroShared(unsigned long long* sh, int64_t n) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sh[i] = 0;
  __syncthreads();
}

// Adds the block's shared accumulator to global memory (integer adds: order-independent).
__device__ __forceinline__ void FlushShared(const unsigned long long* sh, int64_t n,
                                            unsigned long long* global) {
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const unsigned long long v = sh[i];
    if (v != 0) atomicAdd(global + i, v);
  }
}

// Sum of `v` over the lanes of this lane's path, in the path's root lane (other lanes: partial).
__device__ __forceinline__ long long SegmentSum(long long v, int rel, int len) {
  for (int off = 1; off < 32; off *= 2) {
    const long long other = __shfl_down_sync(kFullMask, v, off);
    if (rel + off < len) v += other;
  }
  return v;
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads) ShapKernel(KernelArgs a) {
  extern __shared__ unsigned long long shared_acc[];
  const int warp = threadIdx.x / 32;
  const int64_t row_begin = static_cast<int64_t>(blockIdx.y) * a.rows_per_warp;
  const int64_t row_end = min(row_begin + a.rows_per_warp, a.num_rows);
  const int64_t f1 = a.num_features + 1;
  const Acc acc{a.use_shared ? shared_acc : nullptr, a.d_acc + row_begin * a.acc_width,
                a.acc_width};
  const int64_t shared_n = a.use_shared ? (row_end - row_begin) * a.acc_width : 0;
  if (a.use_shared) ZeroShared(shared_acc, shared_n);
  const int64_t first_bin = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock * a.bins_per_warp;
  for (int j = 0; j < a.bins_per_warp; ++j) {
    const int64_t bin = first_bin + j * kWarpsPerBlock + warp;
    if (bin >= a.num_bins) break;  // warp-uniform
    LaneState s;
    LoadLane(a, bin, &s);
    const T z = static_cast<T>(s.e.zero_fraction);
    const bool is_element = s.active && s.rel > 0;
    for (int64_t r = row_begin; r < row_end; ++r) {
      const float x = is_element ? a.d_rows[r * a.num_features + s.e.feature] : 0.0f;
      const bool match = !is_element || PathElementMatches(s.e, a.d_category_bits, x);
      const T o = match ? T(1) : T(0);
      const bool dead = PathDead(s.seg, s.len, is_element && z == T(0) && !match);
      const T pw = ExtendWarp<T>(z, o, s.seg, s.rel, s.len, s.active, s.max_len, kNoSkip);
      const T total = UnwoundSumWarp<T>(pw, z, o, s.seg, s.len, s.max_len, kNoSkip);
      if (is_element && !dead) {
        const double c = static_cast<double>(total * (o - z));
        for (int w = 0; w < s.width; ++w) {
          acc.Add(r - row_begin, (s.group + w) * f1 + s.e.feature, Fixed(c * ValueScale(a, s, w)));
        }
      }
    }
  }
  if (a.use_shared) FlushShared(shared_acc, shared_n, acc.global);
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads) InteractionsKernel(KernelArgs a) {
  extern __shared__ unsigned long long shared_acc[];
  const int warp = threadIdx.x / 32;
  const int64_t row_begin = static_cast<int64_t>(blockIdx.y) * a.rows_per_warp;
  const int64_t row_end = min(row_begin + a.rows_per_warp, a.num_rows);
  const int64_t f1 = a.num_features + 1;
  const int64_t block = f1 * f1;
  const Acc acc{a.use_shared ? shared_acc : nullptr, a.d_acc + row_begin * a.acc_width,
                a.acc_width};
  const int64_t shared_n = a.use_shared ? (row_end - row_begin) * a.acc_width : 0;
  if (a.use_shared) ZeroShared(shared_acc, shared_n);
  const int64_t first_bin = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock * a.bins_per_warp;
  for (int j = 0; j < a.bins_per_warp; ++j) {
    const int64_t bin = first_bin + j * kWarpsPerBlock + warp;
    if (bin >= a.num_bins) break;  // warp-uniform
    LaneState s;
    LoadLane(a, bin, &s);
    const T z = static_cast<T>(s.e.zero_fraction);
    const bool is_element = s.active && s.rel > 0;
    for (int64_t r = row_begin; r < row_end; ++r) {
      const int64_t rr = r - row_begin;
      const float x = is_element ? a.d_rows[r * a.num_features + s.e.feature] : 0.0f;
      const bool match = !is_element || PathElementMatches(s.e, a.d_category_bits, x);
      const T o = match ? T(1) : T(0);
      const bool dead = PathDead(s.seg, s.len, is_element && z == T(0) && !match);
      // phi_i on the diagonal.
      {
        const T pw = ExtendWarp<T>(z, o, s.seg, s.rel, s.len, s.active, s.max_len, kNoSkip);
        const T total = UnwoundSumWarp<T>(pw, z, o, s.seg, s.len, s.max_len, kNoSkip);
        if (is_element && !dead) {
          const double c = static_cast<double>(total * (o - z));
          for (int w = 0; w < s.width; ++w) {
            acc.Add(rr, (s.group + w) * block + s.e.feature * f1 + s.e.feature,
                    Fixed(c * ValueScale(a, s, w)));
          }
        }
      }
      for (int cond = 1; cond < s.max_len; ++cond) {
        const bool has_cond = cond < s.len;
        const int src = s.seg + (has_cond ? cond : 0);
        const T zc = __shfl_sync(kFullMask, z, src);
        const T oc = __shfl_sync(kFullMask, o, src);
        const int fc = __shfl_sync(kFullMask, s.e.feature, src);
        const T scale = T(0.5) * (oc - zc);
        const bool work = has_cond && !dead && scale != T(0);
        if (!__any_sync(kFullMask, work)) continue;
        const int skip = has_cond ? cond : kNoSkip;
        const int rl = s.rel < skip ? s.rel : s.rel - 1;
        const int ln = has_cond ? s.len - 1 : s.len;
        const bool in_path = s.active && s.rel != skip;
        const T pw = ExtendWarp<T>(z, o, s.seg, rl, ln, in_path, s.max_len, skip);
        const T total = UnwoundSumWarp<T>(pw, z, o, s.seg, ln, s.max_len, skip);
        const bool emit = work && is_element && s.rel != cond;
        const double t = emit ? static_cast<double>(total * (o - z) * scale) : 0.0;
        for (int w = 0; w < s.max_width; ++w) {  // warp-uniform loop (segment sums shuffle)
          const long long fixed = (emit && w < s.width) ? Fixed(t * ValueScale(a, s, w)) : 0;
          const int64_t row_base = static_cast<int64_t>(s.group + w) * block + static_cast<int64_t>(fc) * f1;
          if (fixed != 0) acc.Add(rr, row_base + s.e.feature, fixed);
          // M[c][c] -= sum over the path's lanes, added once by the root lane.
          const long long sum = SegmentSum(fixed, s.rel, s.len);
          if (s.active && s.rel == 0 && w < s.width && has_cond) acc.Add(rr, row_base + fc, -sum);
        }
      }
    }
  }
  if (a.use_shared) FlushShared(shared_acc, shared_n, acc.global);
}

// out[r][c] = acc[r][c] / scale[k] (+ bias[k] on the bias entry), as float.
__global__ void FinishKernel(const unsigned long long* d_acc, int64_t num_rows, int64_t width,
                             int64_t block, int64_t bias_col, int num_outputs,
                             const double* d_scale, const double* d_bias, float* d_out) {
  const int64_t n = num_rows * width;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % width;
    const int k = static_cast<int>(c / block);
    double v = static_cast<double>(static_cast<long long>(d_acc[i])) / d_scale[k];
    if (c % block == bias_col) v += d_bias[k];
    d_out[i] = static_cast<float>(v);
  }
}

}  // namespace treeshap_kernels
}  // namespace grove
