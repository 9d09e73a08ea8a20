// Warp-level TreeSHAP kernels (included only from treeshap_gpu.cu).
//
// One warp explains one bin (kWarpLanes path elements of whole paths, one element per lane) for
// rows_per_warp rows, kRowsInFlight rows at a time (their shuffles interleave, hiding latency).
// A path occupies the lanes [seg, seg + len) of its bin; lane seg holds the root element. The path
// arithmetic is treeshap_arith.h's (w basis): per row one ballot gives every lane the one
// fractions o of its path's elements; EXTEND leaves the coefficient W_k of
// prod_u (z_u + o_u t) in lane seg + k (one shuffle and one FMA per element); every lane then
// UNWINDs its own element, fetching the W_k it needs by shuffle, and phi = unwound sum * (o - z) *
// leaf value is added in 64-bit fixed point (integer atomics: deterministic). U is the UNWIND:
// treeshap_arith::Unwinder (composite synthetic division, a per-lane state machine) or
// TopDownUnwinder (where its error bound allows), which runs straight-line: per row and step one
// shuffle, one multiply and two FMAs, the Shapley weight loaded once per step for all rows in
// flight (UnwindRowsTopDown). Per-row selects are folded into per-row constants computed once,
// so the steps are the same instructions on every lane (ncu: 8.9 G instructions for adult-med's
// 10,000 rows in double, GPUTreeShap's float kernel 11.5 G; docs/benchmarks/shap-gpu.md).
// Interactions condition on each path element c in turn: the path without c is EXTENDed and
// UNWOUND, contributions scaled by (o_c - z_c) / 2 go to M[c][j], their negation to M[c][c];
// the unconditioned phi_i goes to M[i][i].
// SHAP values of bins whose paths are all short enough for pattern tables can instead read each
// lane's contribution factor from the table (ShapTableKernel; the engine launches it over those
// bins and the arithmetic kernel over the rest).
// All shuffles are executed by all 32 lanes (loops run to the bin's longest path); lanes whose
// path is shorter ignore the results.
#pragma once

#include <cstdint>

#include "core/explain/paths.h"
#include "core/explain/treeshap/treeshap_arith.h"

namespace grove {
namespace treeshap_kernels {

inline constexpr int kWarpsPerBlock = 4;
inline constexpr int kBlockThreads = kWarpsPerBlock * 32;
inline constexpr unsigned kFullMask = 0xffffffffu;
inline constexpr int kNoSkip = 1 << 20;
inline constexpr int kRowsInFlight = 2;  // rows whose EXTEND / UNWIND steps interleave

struct KernelArgs {
  DevicePathArrays d_layout;  // the merged path layout
  const double* d_scale = nullptr;  // per output: fixed-point scale
  const void* d_weights = nullptr;  // Shapley-weight table in the kernel's T (treeshap_arith.h)
  int64_t num_bins = 0;
  const float* d_rows = nullptr;
  int64_t num_rows = 0;
  int num_features = 0;
  // The players (output columns per output: num_players + 1): the features, or for a grouped
  // layout (PathLayout::player_of, uploaded as d_player_of) the groups.
  int num_players = 0;
  const int32_t* d_player_of = nullptr;
  int rows_per_warp = 1;
  unsigned long long* d_acc = nullptr;  // num_rows x acc_width, fixed point
  int64_t acc_width = 0;
  // Compact interactions: the accumulator column of each output column (-1: no path touches it);
  // null: acc_width is the output's width and columns are their own.
  const int32_t* d_slot = nullptr;
  int bins_per_warp = 1;    // bins each warp explains (consecutive blocks of kWarpsPerBlock bins)
  bool use_shared = false;  // accumulate the block's rows in shared memory, then flush
  // The launch's bins: d_bins[0..num_bins) (one kind of bin: the table's or the others); null:
  // bins 0..num_bins.
  const uint32_t* d_bins = nullptr;
  // Pattern tables (treeshap_arith::ShapTable): factors and each path's first factor.
  const double* d_table = nullptr;
  const uint32_t* d_table_offset = nullptr;
};

// The i-th bin of the launch.
__device__ __forceinline__ int64_t BinAt(const KernelArgs& a, int64_t i) {
  return a.d_bins != nullptr ? static_cast<int64_t>(a.d_bins[i]) : i;
}

// Per-lane state loaded once per bin: the element, its path, and the path arithmetic's constants
// (z and 1/z in T; z_of[l] = z of the element in lane l of the warp, in shared memory: in
// registers, 32 of them per lane, they cost occupancy).
template <typename T>
struct LaneState {
  PathElement e;
  int seg = 0, rel = 0, len = 1;
  int group = 0, width = 0;
  uint32_t value_begin = 0;
  double value_scale0 = 0;  // first value x its output's fixed-point scale
  bool active = false;
  int max_len = 1;
  int min_len = 1;    // over the warp's active lanes (kWarpLanes when none is active)
  int max_width = 0;  // over the warp
  T z = T(1), inv_z = T(1);
  T* z_of = nullptr;  // this warp's kWarpLanes entries of shared memory
};

template <typename T>
__device__ __forceinline__ void LoadLane(const KernelArgs& a, int64_t bin, T* z_of, LaneState<T>* s) {
  const int lane = threadIdx.x % 32;
  const uint32_t begin = a.d_layout.bin_offsets[bin];
  const uint32_t end = a.d_layout.bin_offsets[bin + 1];
  s->active = static_cast<uint32_t>(lane) < end - begin;
  s->seg = lane;
  s->rel = 0;
  s->len = 1;
  s->width = 0;
  if (s->active) {
    s->e = a.d_layout.elements[begin + lane];
    const PathInfo p = a.d_layout.paths[s->e.path];
    s->rel = static_cast<int>(begin + lane - p.element_begin);
    s->len = p.length;
    s->seg = lane - s->rel;
    s->group = p.group;
    s->width = p.width;
    s->value_begin = p.value_begin;
    s->value_scale0 = a.d_layout.values[p.value_begin] * a.d_scale[p.group];
  } else {
    s->e.flags = kElemRoot;
    s->e.feature = -1;
    s->e.zero_fraction = 1.0;
  }
  int m = s->len;
  for (int off = 16; off > 0; off /= 2) m = max(m, __shfl_xor_sync(kFullMask, m, off));
  s->max_len = m;
  int n = s->active ? s->len : kWarpLanes;
  for (int off = 16; off > 0; off /= 2) n = min(n, __shfl_xor_sync(kFullMask, n, off));
  s->min_len = n;
  int mw = s->width;
  for (int off = 16; off > 0; off /= 2) mw = max(mw, __shfl_xor_sync(kFullMask, mw, off));
  s->max_width = mw;
  s->z = static_cast<T>(s->e.zero_fraction);
  s->inv_z = treeshap_arith::InverseZero(s->z);  // hoisted: once per bin, not per row
  __syncwarp();  // the previous bin's reads of z_of are done
  z_of[lane] = s->z;
  s->z_of = z_of;
  __syncwarp();
}

// The output column of the lane's element: its feature, or its group in a grouped layout
// (kGrouped: the kernels are instantiated both ways, so that the features' kernels carry no code
// of the groups': the top-down kernel's registers are spoken for). Read where a result is
// written rather than kept in LaneState; -1 or unused for the root and idle lanes.
template <bool kGrouped, typename T>
__device__ __forceinline__ int PlayerOf(const KernelArgs& a, const LaneState<T>& s) {
  if constexpr (kGrouped) {
    return s.e.feature >= 0 ? a.d_player_of[s.e.feature] : -1;
  } else {
    return s.e.feature;
  }
}

// The block's copy of the Shapley-weight table (kWeightEntries entries of T).
template <typename T>
__device__ __forceinline__ const T* LoadWeights(const KernelArgs& a, T* shared_weights) {
  const T* w = static_cast<const T*>(a.d_weights);
  for (int i = threadIdx.x; i < treeshap_arith::kWeightEntries; i += blockDim.x) {
    shared_weights[i] = w[i];
  }
  __syncthreads();
  return shared_weights;
}

// One row in flight: its one-fraction bits (bit u: element u of this lane's path), this lane's
// own o, and whether the row exists.
struct RowBits {
  unsigned o_bits = 0;
  bool own = true;
  bool live = false;
};

// Row `row` (live when < row_end) for this lane.
template <bool kGrouped, typename T>
__device__ __forceinline__ RowBits LoadRow(const KernelArgs& a, const LaneState<T>& s,
                                           int64_t row, int64_t row_end) {
  RowBits b;
  b.live = row < row_end;
  const bool is_element = s.active && s.rel > 0;
  const float x = (is_element && b.live) ? a.d_rows[row * a.num_features + s.e.feature] : 0.0f;
  b.own = !is_element || PathElementMatches(s.e, a.d_layout.category_bits, x);
  if constexpr (kGrouped) {
    // A grouped layout: a player's first lane matches iff every lane of its run (the member
    // lanes right above it) does; member lanes are null players (o = 1, z = 1).
    const int lane = threadIdx.x % 32;
    const bool member = is_element && (s.e.flags & kElemGroupMember) != 0;
    const unsigned members = __ballot_sync(kFullMask, member);
    const unsigned fails = __ballot_sync(kFullMask, !b.own);
    const unsigned above = lane == 31 ? 0u : ~members & (~0u << (lane + 1));
    const int stop = above != 0 ? __ffs(above) - 1 : 32;
    const unsigned below_stop = stop >= 32 ? ~0u : (1u << stop) - 1u;
    const unsigned run = below_stop & (lane == 31 ? 0u : ~0u << (lane + 1));
    b.own = member || (b.own && (fails & run) == 0);
  }
  b.o_bits = __ballot_sync(kFullMask, b.own) >> s.seg;
  return b;
}

// Bits u of this lane's path that EXTEND multiplies in: elements [1, len) without `skip`.
template <typename T>
__device__ __forceinline__ unsigned ExtendBits(const LaneState<T>& s, int skip) {
  const unsigned in_path = (s.len >= 32 ? ~0u : (1u << s.len) - 1u) & ~1u;
  return skip < 32 ? in_path & ~(1u << skip) : in_path;
}

// EXTEND of this lane's path (element `skip` left out; kNoSkip: none) for the rows in flight;
// w[q] ends as coefficient W_rel of row q. Straight-line on every lane: an element outside the
// path (or the skipped one) is multiplied in as z = 1, o = 0, i.e. fma(1, w, 0) = w exactly, so
// the result is bit-identical to treeshap_arith::EmulatePath without a per-row select of w.
template <typename T>
__device__ __forceinline__ void ExtendRows(const LaneState<T>& s, const RowBits (&rows)[kRowsInFlight],
                                           int skip, T (&w)[kRowsInFlight]) {
  const unsigned valid = ExtendBits(s, skip);
  const T* path_z = s.z_of + s.seg;  // z_of is padded: path_z[u] exists for every u < kWarpLanes
  unsigned shift[kRowsInFlight];  // bit u: W_k <- z_u W_k + W_{k-1} (o_u = 1, not the root lane)
#pragma unroll
  for (int q = 0; q < kRowsInFlight; ++q) {
    w[q] = s.rel == 0 ? T(1) : T(0);
    shift[q] = s.rel == 0 ? 0u : rows[q].o_bits & valid;
  }
#pragma unroll
  for (int u = 1; u < kWarpLanes; ++u) {
    if (u >= s.max_len) break;  // warp-uniform
    const T zu = ((valid >> u) & 1u) != 0 ? path_z[u] : T(1);
#pragma unroll
    for (int q = 0; q < kRowsInFlight; ++q) {
      const T up = __shfl_up_sync(kFullMask, w[q], 1);
      w[q] = treeshap_arith::Fma(zu, w[q], ((shift[q] >> u) & 1u) != 0 ? up : T(0));
    }
  }
}

// UNWIND of this lane's element for the rows in flight by the composite Unwinder: total[q] is its
// unwound sum in row q (0 where take[q] is false). `degree`: non-root elements of the (reduced)
// path.
template <typename T, typename U>
__device__ __forceinline__ void UnwindRowsComposite(const LaneState<T>& s,
                                                    const RowBits (&rows)[kRowsInFlight],
                                                    const T (&w)[kRowsInFlight], int degree,
                                                    const bool (&take)[kRowsInFlight],
                                                    const T* weights, T (&total)[kRowsInFlight]) {
  U un[kRowsInFlight];
#pragma unroll
  for (int q = 0; q < kRowsInFlight; ++q) {
    un[q].Begin(take[q] ? degree : 0, s.z, s.inv_z, rows[q].own);
  }
  // A lane needs degree + kExtraSteps <= max_len - 1 + kExtraSteps steps.
  for (int t = 0; t < s.max_len - 1 + U::kExtraSteps; ++t) {
#pragma unroll
    for (int q = 0; q < kRowsInFlight; ++q) {
      un[q].Step(__shfl_sync(kFullMask, w[q], s.seg + un[q].Source()), weights);
    }
  }
#pragma unroll
  for (int q = 0; q < kRowsInFlight; ++q) total[q] = un[q].Total();
}

// The same by TopDownUnwinder's arithmetic, straight-line: every lane runs the warp's longest
// degree of steps; step t fetches W[degree - 1 - t + o] and, while t < degree, adds
// weight(degree, degree - 1 - t) x r_(degree-1-t). next = fma(a, r, W x b) with (a, b) = (-z, 1)
// for o = 1 and (0, 1/z) for o = 0 is TopDownUnwinder's fma(-z, r, W) or W x (1/z) exactly (W x 1
// and 0 x r are exact for finite r, which every model given top-down by `auto` keeps: z <= 1 and
// 1/z bounded), so the result is bit-identical to it without a per-row select. The
// weight is loaded once per step for all rows in flight; the first `sure` steps, where every
// lane whose result is used is live, need no check. total[q] is meaningful only where take[q].
template <typename T>
__device__ __forceinline__ void UnwindRowsTopDown(const LaneState<T>& s,
                                                  const RowBits (&rows)[kRowsInFlight],
                                                  const T (&w)[kRowsInFlight], int degree, int sure,
                                                  const T* weights, T (&total)[kRowsInFlight]) {
  T r[kRowsInFlight], a[kRowsInFlight], b[kRowsInFlight];
  int src[kRowsInFlight];
#pragma unroll
  for (int q = 0; q < kRowsInFlight; ++q) {
    r[q] = T(0);
    total[q] = T(0);
    a[q] = rows[q].own ? -s.z : T(0);
    b[q] = rows[q].own ? T(1) : s.inv_z;
    src[q] = s.seg + degree - 1 + (rows[q].own ? 1 : 0);
  }
  // Walks down row `degree` of the table from k = degree - 1; past k = 0 it reads the row
  // before (never used: not live). Lanes of degree < 1 are never used: the longest row keeps
  // their pointer inside the table.
  const int row = degree >= 1 ? degree : kWarpLanes - 1;
  const T* weight = weights + treeshap_arith::WeightIndex(row, row - 1);
  const int steps = s.max_len - 1;
  int t = 0;
  for (; t < sure; ++t, --weight) {  // warp-uniform
#pragma unroll
    for (int q = 0; q < kRowsInFlight; ++q) {
      const T v = __shfl_sync(kFullMask, w[q], src[q] - t);
      r[q] = treeshap_arith::Fma(a[q], r[q], v * b[q]);
      total[q] = treeshap_arith::Fma(*weight, r[q], total[q]);
    }
  }
  for (; t < steps; ++t, --weight) {  // warp-uniform
    const bool live = t < degree;
#pragma unroll
    for (int q = 0; q < kRowsInFlight; ++q) {
      const T v = __shfl_sync(kFullMask, w[q], src[q] - t);
      r[q] = treeshap_arith::Fma(a[q], r[q], v * b[q]);
      const T next = treeshap_arith::Fma(*weight, r[q], total[q]);
      total[q] = live ? next : total[q];  // a dead lane's r may be anything, even NaN
    }
  }
}

// `sure`: steps every lane whose result is used is live for (at most its degree).
template <typename T, typename U>
__device__ __forceinline__ void UnwindRows(const LaneState<T>& s, const RowBits (&rows)[kRowsInFlight],
                                           const T (&w)[kRowsInFlight], int degree, int sure,
                                           const bool (&take)[kRowsInFlight], const T* weights,
                                           T (&total)[kRowsInFlight]) {
  if constexpr (U::kStraightLine) {
    UnwindRowsTopDown(s, rows, w, degree, sure, weights, total);
  } else {
    UnwindRowsComposite<T, U>(s, rows, w, degree, take, weights, total);
  }
}

// Value w of the lane's path times its output's scale.
template <typename T>
__device__ __forceinline__ double ValueScale(const KernelArgs& a, const LaneState<T>& s, int w) {
  return w == 0 ? s.value_scale0
                : a.d_layout.values[s.value_begin + w] * a.d_scale[s.group + w];
}

// Accumulator of row r (relative to the block's first row): shared memory when the block's rows
// fit there, else global.
struct Acc {
  unsigned long long* shared;  // nullptr: global
  unsigned long long* global;  // row 0 of the block
  int64_t width;
  const int32_t* slot;  // output column -> accumulator column, or null (KernelArgs::d_slot)
  __device__ __forceinline__ void Add(int64_t r, int64_t col, long long v) const {
    if (v == 0) return;
    if (slot != nullptr) col = slot[col];
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

// Zeroes the shared accumulator when used; the block's first row and accumulator view.
struct BlockRows {
  int64_t row_begin, row_end, shared_n;
  Acc acc;
};

__device__ __forceinline__ BlockRows BeginBlock(const KernelArgs& a, unsigned long long* shared_acc) {
  BlockRows b;
  b.row_begin = static_cast<int64_t>(blockIdx.y) * a.rows_per_warp;
  b.row_end = min(b.row_begin + a.rows_per_warp, a.num_rows);
  b.acc = Acc{a.use_shared ? shared_acc : nullptr, a.d_acc + b.row_begin * a.acc_width, a.acc_width,
              a.d_slot};
  b.shared_n = a.use_shared ? (b.row_end - b.row_begin) * a.acc_width : 0;
  if (a.use_shared) ZeroShared(shared_acc, b.shared_n);
  return b;
}

// phi of this lane's element for the rows in flight, added at column `col(k)` of output k.
template <typename T, typename Col>
__device__ __forceinline__ void EmitPhi(const KernelArgs& a, const LaneState<T>& s, const BlockRows& b,
                                        int64_t r0, const RowBits (&rows)[kRowsInFlight],
                                        const bool (&take)[kRowsInFlight],
                                        const T (&total)[kRowsInFlight], Col col) {
#pragma unroll
  for (int q = 0; q < kRowsInFlight; ++q) {
    if (!take[q]) continue;
    const double c = static_cast<double>(total[q]) * ((rows[q].own ? 1.0 : 0.0) - s.e.zero_fraction);
    for (int w = 0; w < s.width; ++w) {
      b.acc.Add(r0 + q - b.row_begin, col(s.group + w), Fixed(c * ValueScale(a, s, w)));
    }
  }
}

// body(s) for each of the block's bins (bins_per_warp per warp), s its lane state.
template <typename T, typename Body>
__device__ __forceinline__ void ForEachBin(const KernelArgs& a, T* shared_z, Body body) {
  const int warp = threadIdx.x / 32;
  const int64_t first_bin = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock * a.bins_per_warp;
  for (int j = 0; j < a.bins_per_warp; ++j) {
    const int64_t bin = first_bin + j * kWarpsPerBlock + warp;
    if (bin >= a.num_bins) break;  // warp-uniform
    LaneState<T> s;
    LoadLane(a, BinAt(a, bin), shared_z + warp * kWarpLanes, &s);
    body(s);
  }
}

// The block's bins and rows, kRowsInFlight rows at a time: per step, `emit(s, r0, rows, take,
// total)` gets every lane's unconditioned unwound sums (take[q]: the lane holds a non-root
// element and row r0 + q exists).
template <typename T, typename U, bool kGrouped, typename Emit>
__device__ __forceinline__ void RunBlock(const KernelArgs& a, const BlockRows& b, const T* weights,
                                         T* shared_z, Emit emit) {
  ForEachBin(a, shared_z, [&](const LaneState<T>& s) {
    const bool is_element = s.active && s.rel > 0;
    for (int64_t r0 = b.row_begin; r0 < b.row_end; r0 += kRowsInFlight) {
      RowBits rows[kRowsInFlight];
      bool take[kRowsInFlight];
#pragma unroll
      for (int q = 0; q < kRowsInFlight; ++q) {
        rows[q] = LoadRow<kGrouped>(a, s, r0 + q, b.row_end);
        take[q] = is_element && rows[q].live;
      }
      T w[kRowsInFlight], total[kRowsInFlight];
      ExtendRows(s, rows, kNoSkip, w);
      UnwindRows<T, U>(s, rows, w, s.len - 1, s.min_len - 1, take, weights, total);
      emit(s, r0, rows, take, total);
    }
  });
}

// The straight-line (top-down) kernel runs at 8 blocks per SM (64 registers, 36 bytes spilled):
// measured 2-5% faster than at 72 registers and 43% occupancy (docs/benchmarks/shap-gpu.md).
// The composite one keeps the compiler's choice (0: no hint; 68 registers, no spills).
template <typename T, typename U, bool kGrouped>
__global__ void __launch_bounds__(kBlockThreads, U::kStraightLine ? 8 : 0) ShapKernel(KernelArgs a) {
  extern __shared__ unsigned long long shared_acc[];
  __shared__ T shared_weights[treeshap_arith::kWeightEntries];
  const T* weights = LoadWeights<T>(a, shared_weights);
  const BlockRows b = BeginBlock(a, shared_acc);
  const int64_t f1 = a.num_players + 1;
  __shared__ T shared_z[kBlockThreads + kWarpLanes];  // padded: see ExtendRows
  RunBlock<T, U, kGrouped>(a, b, weights, shared_z,
              [&](const LaneState<T>& s, int64_t r0, const RowBits(&rows)[kRowsInFlight],
                  const bool(&take)[kRowsInFlight], const T(&total)[kRowsInFlight]) {
                const int64_t feature = PlayerOf<kGrouped>(a, s);
                EmitPhi(a, s, b, r0, rows, take, total,
                        [&](int64_t k) { return k * f1 + feature; });
              });
  if (a.use_shared) FlushShared(shared_acc, b.shared_n, b.acc.global);
}

// Rows whose table loads are in flight at once in ShapTableKernel (each waits on its own ballot).
inline constexpr int kTableRowsInFlight = 4;

// SHAP values of bins whose paths all have pattern tables (treeshap_arith::ShapTable): per row
// the ballot that EXTEND would use gives the path's pattern, and each element lane reads its
// factor total x (o - z), the double composite arithmetic's value computed at load, and adds
// factor x value in fixed point exactly as EmitPhi does (so the results are bit-identical to the
// double composite kernel's). No EXTEND, UNWIND, weight table or per-row floating-point work
// beyond the fixed-point conversion.
template <bool kGrouped>
__global__ void __launch_bounds__(kBlockThreads) ShapTableKernel(KernelArgs a) {
  extern __shared__ unsigned long long shared_acc[];
  const BlockRows b = BeginBlock(a, shared_acc);
  const int64_t f1 = a.num_players + 1;
  __shared__ double shared_z[kBlockThreads + kWarpLanes];  // LoadLane's (unused here)
  ForEachBin(a, shared_z, [&](const LaneState<double>& s) {
    const bool is_element = s.active && s.rel > 0;
    const int n = s.len - 1;
    const double* factor =
        a.d_table + (is_element ? a.d_table_offset[s.e.path] + (s.rel - 1) : 0u);
    const int64_t feature = PlayerOf<kGrouped>(a, s);
    for (int64_t r0 = b.row_begin; r0 < b.row_end; r0 += kTableRowsInFlight) {
      double c[kTableRowsInFlight];
#pragma unroll
      for (int q = 0; q < kTableRowsInFlight; ++q) {
        const RowBits row = LoadRow<kGrouped>(a, s, r0 + q, b.row_end);
        const unsigned pattern = treeshap_arith::TablePattern(row.o_bits, n);
        c[q] = (is_element && row.live) ? __ldg(factor + static_cast<int64_t>(pattern) * n) : 0.0;
      }
#pragma unroll
      for (int q = 0; q < kTableRowsInFlight; ++q) {
        for (int w = 0; w < s.width; ++w) {
          b.acc.Add(r0 + q - b.row_begin, (s.group + w) * f1 + feature,
                    Fixed(c[q] * ValueScale(a, s, w)));
        }
      }
    }
  });
  if (a.use_shared) FlushShared(shared_acc, b.shared_n, b.acc.global);
}

// Interactions of the rows in flight conditioned on element `cond` of each path: M[c][j] for the
// path's other elements j, and -sum_j M[c][j] on M[c][c] (added by the root lane).
template <typename T, typename U, bool kGrouped>
__device__ __forceinline__ void ConditionOn(const KernelArgs& a, const LaneState<T>& s,
                                            const BlockRows& b, int64_t r0,
                                            const RowBits (&rows)[kRowsInFlight], int cond,
                                            const T* weights) {
  const int64_t f1 = a.num_players + 1;
  const int64_t block = f1 * f1;
  const bool has_cond = cond < s.len;
  const int src = s.seg + (has_cond ? cond : 0);
  const double zc = __shfl_sync(kFullMask, s.e.zero_fraction, src);
  const int fc = __shfl_sync(kFullMask, PlayerOf<kGrouped>(a, s), src);
  double scale[kRowsInFlight];
  bool take[kRowsInFlight];
  bool any = false;
#pragma unroll
  for (int q = 0; q < kRowsInFlight; ++q) {
    const double oc = ((rows[q].o_bits >> cond) & 1u) ? 1.0 : 0.0;
    scale[q] = 0.5 * (oc - zc);
    const bool work = has_cond && rows[q].live && scale[q] != 0.0;
    any = any || work;
    take[q] = work && s.active && s.rel > 0 && s.rel != cond;
  }
  if (!__any_sync(kFullMask, any)) return;
  T w[kRowsInFlight], total[kRowsInFlight];
  ExtendRows(s, rows, has_cond ? cond : kNoSkip, w);
  // Lanes used are those of paths with cond < len: degree len - 2 >= min_len - 2.
  UnwindRows<T, U>(s, rows, w, has_cond ? s.len - 2 : s.len - 1, max(s.min_len - 2, 0), take,
                   weights, total);
#pragma unroll
  for (int q = 0; q < kRowsInFlight; ++q) {
    const double t = take[q] ? static_cast<double>(total[q]) *
                                   ((rows[q].own ? 1.0 : 0.0) - s.e.zero_fraction) * scale[q]
                             : 0.0;
    const int64_t rr = r0 + q - b.row_begin;
    for (int v = 0; v < s.max_width; ++v) {  // warp-uniform loop (segment sums shuffle)
      const long long fixed = (take[q] && v < s.width) ? Fixed(t * ValueScale(a, s, v)) : 0;
      const int64_t row_base = static_cast<int64_t>(s.group + v) * block + static_cast<int64_t>(fc) * f1;
      if (fixed != 0) b.acc.Add(rr, row_base + PlayerOf<kGrouped>(a, s), fixed);
      const long long sum = SegmentSum(fixed, s.rel, s.len);
      if (s.active && s.rel == 0 && v < s.width && has_cond) b.acc.Add(rr, row_base + fc, -sum);
    }
  }
}

template <typename T, typename U, bool kGrouped>
__global__ void __launch_bounds__(kBlockThreads) InteractionsKernel(KernelArgs a) {
  extern __shared__ unsigned long long shared_acc[];
  __shared__ T shared_weights[treeshap_arith::kWeightEntries];
  const T* weights = LoadWeights<T>(a, shared_weights);
  const BlockRows b = BeginBlock(a, shared_acc);
  const int64_t f1 = a.num_players + 1;
  const int64_t block = f1 * f1;
  __shared__ T shared_z[kBlockThreads + kWarpLanes];  // padded: see ExtendRows
  RunBlock<T, U, kGrouped>(a, b, weights, shared_z,
              [&](const LaneState<T>& s, int64_t r0, const RowBits(&rows)[kRowsInFlight],
                  const bool(&take)[kRowsInFlight], const T(&total)[kRowsInFlight]) {
                // phi_i on the diagonal, then the conditioned values.
                const int64_t player = PlayerOf<kGrouped>(a, s);
                const int64_t diag = player * f1 + player;
                EmitPhi(a, s, b, r0, rows, take, total,
                        [&](int64_t k) { return k * block + diag; });
                for (int cond = 1; cond < s.max_len; ++cond) {
                  ConditionOn<T, U, kGrouped>(a, s, b, r0, rows, cond, weights);
                }
              });
  if (a.use_shared) FlushShared(shared_acc, b.shared_n, b.acc.global);
}

// out[r][col] = acc[r][c] / scale[k] (+ bias[k] on the bias entry), as float, k the output of
// col; col = cols[c] for compact accumulators (acc_width of them per row: every column a path can
// touch, and the biases; the caller zeroes the others), col = c when cols is null (acc_width is
// then the output's width).
__global__ void FinishKernel(const unsigned long long* d_acc, int64_t num_rows, int64_t acc_width,
                             const int64_t* d_cols, int64_t width, int64_t block, int64_t bias_col,
                             const double* d_scale, const double* d_bias, float* d_out) {
  const int64_t n = num_rows * acc_width;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / acc_width;
    const int64_t col = d_cols != nullptr ? d_cols[i % acc_width] : i % acc_width;
    const int k = static_cast<int>(col / block);
    double v = static_cast<double>(static_cast<long long>(d_acc[i])) / d_scale[k];
    if (col % block == bias_col) v += d_bias[k];
    d_out[r * width + col] = static_cast<float>(v);
  }
}

}  // namespace treeshap_kernels
}  // namespace grove
