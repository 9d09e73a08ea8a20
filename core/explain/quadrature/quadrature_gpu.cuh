// Quadrature SHAP kernels (included only from quadrature_gpu.cu and GPU tests).
//
// Mapping: one thread per row, a block is 128 consecutive rows x one chunk of paths of one bucket
// (capacity N: the path's arrays are N registers each). Every thread of a warp reads the same
// path (broadcast loads), so there is no divergence. Rows are read transposed ([feature][row]) so
// that a warp's reads of one feature are coalesced. Contributions are accumulated as 64-bit
// fixed-point integers (value * 2^e, rounded): integer addition is associative, so the sums are
// bit-identical whatever the order of the atomics (deterministic results).
//  * SHAP values of narrow models (width * 128 * 8 bytes <= 48 KB): each thread owns its row's
//    accumulators in shared memory (no atomics), flushed to global memory with one atomic per
//    (row, column) per block.
//  * otherwise: global 64-bit atomics, [column][row] layout so a warp's atomics are coalesced.
// The finalize kernel converts to float, adds the bias and transposes to [row][column].
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/explain/paths.h"
#include "core/explain/quadrature/quadrature.h"

namespace grove {
namespace quadrature_gpu {

inline constexpr int kRowsPerBlock = 128;
inline constexpr int kSharedAccBytes = 48 * 1024;

struct DeviceView {
  const QuadraturePath* paths = nullptr;
  const PathElement* elements = nullptr;
  const double* values = nullptr;
  const uint32_t* category_bits = nullptr;
  const double* rule_nodes = nullptr;   // double rules
  const double* rule_weights = nullptr;
  const float* rule_nodes_f = nullptr;  // the same rules rounded to float
  const float* rule_weights_f = nullptr;
  int num_features = 0;
  int num_outputs = 1;
  double scale = 1;  // fixed-point scale
};

struct LaunchArgs {
  uint32_t path_begin = 0;     // bucket's paths
  uint32_t path_end = 0;
  uint32_t paths_per_chunk = 1;
  int iteration_begin = 0;
  int iteration_end = 0;
  const float* d_xt = nullptr;  // [feature][row], leading dimension rows_ld
  int64_t rows = 0;
  int64_t rows_ld = 0;
  unsigned long long* d_acc = nullptr;  // [column][row], leading dimension rows_ld
  int64_t width = 0;           // columns
  int64_t block_size = 0;      // columns per output (F + 1 or (F + 1)^2)
};

// The quadrature rule's nodes and weights in the kernel's precision (double or float).
template <typename Real>
__device__ __forceinline__ const Real* RuleNodes(const DeviceView& m) {
  if constexpr (std::is_same_v<Real, double>) {
    return m.rule_nodes;
  } else {
    return m.rule_nodes_f;
  }
}
template <typename Real>
__device__ __forceinline__ const Real* RuleWeights(const DeviceView& m) {
  if constexpr (std::is_same_v<Real, double>) {
    return m.rule_weights;
  } else {
    return m.rule_weights_f;
  }
}

__device__ __forceinline__ unsigned long long ToFixed(double v, double scale) {
  return static_cast<unsigned long long>(__double2ll_rn(v * scale));
}

// Loads one path's elements for `row` into registers (padding: z = 1, d = 0).
template <int N, typename Real>
__device__ __forceinline__ void LoadPath(const DeviceView& m, const QuadraturePath& path,
                                         const float* d_xt, int64_t rows_ld, int64_t row,
                                         Real* z, Real* d, int32_t* feature) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (i < path.n) {
      const PathElement e = m.elements[path.element_begin + i];
      const float x = d_xt[static_cast<int64_t>(e.feature) * rows_ld + row];
      const Real zf = static_cast<Real>(e.zero_fraction);
      const Real o = PathElementMatches(e, m.category_bits, x) ? Real(1) : Real(0);
      z[i] = zf;
      d[i] = o - zf;
      feature[i] = e.feature;
    } else {
      z[i] = Real(1);
      d[i] = Real(0);
      feature[i] = 0;
    }
  }
}

// This block's chunk of its bucket's paths: [*p0, *p1). Apart from ForEachPath so that a kernel
// computes it where it chooses: the SHAP kernel before its row test, where nvcc makes of it the
// code it made of the loop written out.
__device__ __forceinline__ void ChunkPaths(const LaunchArgs& a, uint32_t* p0, uint32_t* p1) {
  *p0 = a.path_begin + blockIdx.x * a.paths_per_chunk;
  *p1 = min(a.path_end, *p0 + a.paths_per_chunk);
}

// Calls visit(path, z, d, feature, scratch) for each path of [p0, p1) whose iteration is in
// range, with its elements loaded for `row` (see LoadPath) and kScratch values of scratch space.
// Force-inlined, as `visit` is, so that a kernel compiles as one loop over its paths.
template <int N, int kScratch, typename Real, typename Visit>
__device__ __forceinline__ void ForEachPath(const DeviceView& m, const LaunchArgs& a,
                                            uint32_t p0, uint32_t p1, int64_t row,
                                            Visit&& visit) {
  for (uint32_t p = p0; p < p1; ++p) {
    const QuadraturePath path = m.paths[p];
    if (path.iteration < a.iteration_begin || path.iteration >= a.iteration_end) continue;
    Real z[N], d[N], scratch[kScratch];
    int32_t feature[N];
    LoadPath<N, Real>(m, path, a.d_xt, a.rows_ld, row, z, d, feature);
    visit(path, z, d, feature, scratch);
  }
}

// SHAP values. kShared: accumulators in shared memory ([column][kRowsPerBlock], int64).
template <int N, typename Real, bool kShared>
__global__ void __launch_bounds__(kRowsPerBlock)
    ShapKernel(DeviceView m, LaunchArgs a) {
  extern __shared__ unsigned long long shared_acc[];
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kRowsPerBlock + threadIdx.x;
  const bool active = row < a.rows;
  if (kShared) {
    for (int64_t c = 0; c < a.width; ++c) shared_acc[c * kRowsPerBlock + threadIdx.x] = 0;
  }
  uint32_t p0, p1;
  ChunkPaths(a, &p0, &p1);
  if (active) {
    const Real* rule_t = RuleNodes<Real>(m);
    const Real* rule_w = RuleWeights<Real>(m);
    ForEachPath<N, 2 * N, Real>(m, a, p0, p1, row, [&](const QuadraturePath& path, const Real* z,
                                                       const Real* d, const int32_t* feature,
                                                       Real* scratch) {
      const double* values = m.values + path.value_begin;
      const int64_t base = static_cast<int64_t>(path.group) * a.block_size;
      auto sink = [&](int k, int32_t fi, double value) {
        const int64_t col = base + k * a.block_size + fi;
        const unsigned long long v = ToFixed(value, m.scale);
        if (kShared) {
          shared_acc[col * kRowsPerBlock + threadIdx.x] += v;
        } else {
          atomicAdd(a.d_acc + col * a.rows_ld + row, v);
        }
      };
      QuadraturePathShap<N, Real>(z, d, feature, path.n, rule_t + path.rule_begin,
                                  rule_w + path.rule_begin, path.q, values, path.width, scratch,
                                  sink);
    });
  }
  if (kShared && active) {
    for (int64_t c = 0; c < a.width; ++c) {
      const unsigned long long v = shared_acc[c * kRowsPerBlock + threadIdx.x];
      if (v != 0) atomicAdd(a.d_acc + c * a.rows_ld + row, v);
    }
  }
}

// SHAP interaction values (global atomics).
template <int N, typename Real>
__global__ void __launch_bounds__(kRowsPerBlock)
    InteractionsKernel(DeviceView m, LaunchArgs a) {
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kRowsPerBlock + threadIdx.x;
  if (row >= a.rows) return;
  uint32_t p0, p1;
  ChunkPaths(a, &p0, &p1);
  const Real* rule_t = RuleNodes<Real>(m);
  const Real* rule_w = RuleWeights<Real>(m);
  const int64_t f1 = m.num_features + 1;
  ForEachPath<N, 3 * N, Real>(m, a, p0, p1, row, [&](const QuadraturePath& path, const Real* z,
                                                     const Real* d, const int32_t* feature,
                                                     Real* scratch) {
    const double* values = m.values + path.value_begin;
    const int64_t base = static_cast<int64_t>(path.group) * a.block_size;
    auto sink = [&](int k, int32_t fi, int32_t fj, double value) {
      const int64_t col = base + k * a.block_size + fi * f1 + fj;
      atomicAdd(a.d_acc + col * a.rows_ld + row, ToFixed(value, m.scale));
    };
    QuadraturePathInteractions<N, Real>(z, d, feature, path.n, rule_t + path.rule_begin,
                                        rule_w + path.rule_begin, path.q, values, path.width,
                                        scratch, sink);
  });
}

// rows x features (row stride `stride`) -> [feature][row] (leading dimension rows_ld).
__global__ void TransposeRowsKernel(const float* d_rows, int64_t rows, int64_t stride,
                                    int features, float* d_xt, int64_t rows_ld) {
  __shared__ float tile[32][33];
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * 32;
  const int f0 = blockIdx.y * 32;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t r = r0 + i;
    const int f = f0 + threadIdx.x;
    if (r < rows && f < features) tile[i][threadIdx.x] = d_rows[r * stride + f];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int f = f0 + i;
    const int64_t r = r0 + threadIdx.x;
    if (r < rows && f < features) d_xt[static_cast<int64_t>(f) * rows_ld + r] = tile[threadIdx.x][i];
  }
}

// acc [column][row] (fixed point) -> out [row][column] float, bias entries from d_bias.
__global__ void FinalizeKernel(const unsigned long long* d_acc, int64_t rows, int64_t rows_ld,
                               int64_t width, int64_t block_size, int64_t bias_offset,
                               const double* d_bias, double inverse_scale, float* d_out,
                               int64_t out_stride) {
  __shared__ float tile[32][33];
  // Columns on grid x (interaction widths exceed grid y's 65535 tiles), rows on grid y.
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * 32;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * 32;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t c = c0 + i;
    const int64_t r = r0 + threadIdx.x;
    if (c < width && r < rows) {
      const int64_t k = c / block_size;
      double v;
      if (c - k * block_size == bias_offset) {
        v = d_bias[k];
      } else {
        v = static_cast<double>(static_cast<long long>(d_acc[c * rows_ld + r])) * inverse_scale;
      }
      tile[i][threadIdx.x] = static_cast<float>(v);
    }
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t r = r0 + i;
    const int64_t c = c0 + threadIdx.x;
    if (c < width && r < rows) d_out[r * out_stride + c] = tile[threadIdx.x][i];
  }
}

}  // namespace quadrature_gpu
}  // namespace grove
