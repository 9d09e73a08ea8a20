// Kernels of the four Tahoe inference strategies (see tahoe_kernels.h for the contract). Included
// only from tahoe_kernels.cu. The per-row logic is tahoe_forest.h's GROVE_HD code; these kernels only
// decide where rows and nodes live (global or shared memory) and how partial sums are combined.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/predict/tahoe/tahoe_forest.h"
#include "core/predict/tahoe/tahoe_kernels.h"

namespace grove {
namespace tahoe_kernels {

// A row read through the read-only data path.
struct LdgRow {
  const float* p;
  GROVE_HD float operator[](uint32_t feature) const {
#if defined(__CUDA_ARCH__)
    return __ldg(p + feature);
#else
    return p[feature];
#endif
  }
};

// Work items of the persistent shared-forest kernels: (part, row range) pairs, part-major, the
// ranges whole tiles of `tile` rows, strided over the grid so that a block reloads its part only when
// its next item's part differs.
struct WorkItems {
  int parts, per_part;
  int64_t rows, item_rows;
  __device__ WorkItems(int num_parts, int items_per_part, int64_t num_rows, int tile)
      : parts(num_parts), per_part(items_per_part), rows(num_rows) {
    const int64_t tiles = (num_rows + tile - 1) / tile;
    item_rows = ((tiles + per_part - 1) / per_part) * tile;
  }
  __device__ int count() const { return parts * per_part; }
  // False when the item has no rows (uniform over the block).
  __device__ bool Get(int item, int* part, int64_t* begin, int64_t* end) const {
    *part = item / per_part;
    *begin = static_cast<int64_t>(item % per_part) * item_rows;
    *end = *begin + item_rows < rows ? *begin + item_rows : rows;
    return *begin < *end;
  }
};

// Walks trees [begin, end) (through `order` when not null) for one row and writes its output:
// leaf ids straight to `out`; margins either finalized into `out` (final) or left as partial sums
// (scalar: returned; multi-output: in m[0..K)). `m` is K doubles owned by this thread.
template <bool kMulti, int kWalk, typename Node, typename Row>
__device__ __forceinline__ double WalkRow(const TahoeForestView& v, const Node* nodes,
                                          uint32_t node_offset, const TahoeTree* trees,
                                          const uint32_t* order, uint32_t begin, uint32_t end,
                                          const TahoeLaunchArgs& a, const Row& row, double* m,
                                          float* out, bool final) {
  if (a.kind == OutputKind::kLeaf) {
    TahoeScalarAcc acc;
    TahoeAccumulateTrees<kWalk>(v, nodes, node_offset, trees, order, begin, end, a.row_params, row, acc,
                         out);
    return 0;
  }
  const bool prediction = a.kind == OutputKind::kPrediction;
  if constexpr (!kMulti) {
    TahoeScalarAcc acc;
    TahoeAccumulateTrees<kWalk>(v, nodes, node_offset, trees, order, begin, end, a.row_params, row, acc,
                         static_cast<float*>(nullptr));
    if (final) TahoeFinalizeScalar(v, a.transform, prediction, acc.sum, out);
    return acc.sum;
  } else {
    for (int k = 0; k < v.num_outputs; ++k) m[k] = 0;
    TahoeGroupAcc acc(m);
    TahoeAccumulateTrees<kWalk>(v, nodes, node_offset, trees, order, begin, end, a.row_params, row, acc,
                         static_cast<float*>(nullptr));
    if (final) TahoeFinalizeRow(v, a.transform, prediction, m, out);
    return 0;
  }
}

// Direct: one thread per row, everything from global memory. Workspace (multi-output only): K
// doubles per row.
template <typename Node, bool kMulti, int kWalk>
__global__ void __launch_bounds__(kDirectThreads)
    DirectKernel(TahoeDeviceForest f, TahoeLaunchArgs a, double* d_ws) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= a.rows) return;
  const LdgRow row{a.d_rows + r * a.row_stride};
  double* m = kMulti ? d_ws + r * f.view.num_outputs : nullptr;
  static_assert(!TahoeWalkIsFixed(kWalk), "direct reads unpadded rows");
  WalkRow<kMulti, kWalk>(f.view, static_cast<const Node*>(f.view.nodes), 0, f.view.trees, nullptr, 0,
                  static_cast<uint32_t>(f.view.num_trees), a, row, m, a.d_out + r * a.out_stride,
                  true);
}

// Shared data: block = kSharedDataRows rows x a.groups thread groups. Shared memory: partial sums
// [groups][rows][K] doubles, then the rows feature-major, one column per lane (a lane's reads stay
// in its bank), then the NaN padding column (TahoeStagedRowBytes).
template <typename Node, bool kMulti, int kWalk>
__global__ void __launch_bounds__(1024)
    SharedDataKernel(TahoeDeviceForest f, TahoeLaunchArgs a, int assignment) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int R = kSharedDataRows;
  constexpr int kStride = R;
  const int G = a.groups;
  const int K = kMulti ? f.view.num_outputs : 1;
  double* s_part = reinterpret_cast<double*>(smem);
  float* s_rows = reinterpret_cast<float*>(s_part + static_cast<int64_t>(G) * R * K);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * R;
  const int nr = static_cast<int>(a.rows - row0 < R ? a.rows - row0 : R);
  const int nf = f.view.num_features;
  // Column by column: the shared-memory writes of a warp hit 32 banks; the strided global reads of
  // a column are L1 hits after the first (this kernel leaves L1 most of the SM's memory).
  for (int i = threadIdx.x; i < R * nf; i += blockDim.x) {
    const int c = i / R, r = i - c * R;
    s_rows[c * kStride + r] = r < nr ? a.d_rows[(row0 + r) * a.row_stride + c] : 0.0f;
  }
  if (threadIdx.x < R) s_rows[nf * kStride + threadIdx.x] = TahoeNan();
  __syncthreads();
  const int r = threadIdx.x % R, g = threadIdx.x / R;
  const uint32_t* order = f.d_assign_order + f.order_begin[assignment];
  const uint32_t* offsets = f.d_assign_offsets + f.offsets_begin[assignment];
  if (r < nr) {
    const TahoeStridedRow row{s_rows + r, static_cast<uint32_t>(kStride)};
    double* m = s_part + (static_cast<int64_t>(g) * R + r) * K;
    const double s = WalkRow<kMulti, kWalk>(f.view, static_cast<const Node*>(f.view.nodes), 0,
                                     f.view.trees, order, offsets[g], offsets[g + 1], a, row, m,
                                     a.d_out + (row0 + r) * a.out_stride, false);
    if (!kMulti) *m = s;
  }
  if (a.kind == OutputKind::kLeaf) return;  // uniform over the block
  __syncthreads();
  // Block-wise reduction: one thread per row adds the group sums in group order.
  if (threadIdx.x < nr) {
    const int rr = threadIdx.x;
    float* out = a.d_out + (row0 + rr) * a.out_stride;
    const bool prediction = a.kind == OutputKind::kPrediction;
    if constexpr (!kMulti) {
      double s = 0;
      for (int gg = 0; gg < G; ++gg) s += s_part[gg * R + rr];
      TahoeFinalizeScalar(f.view, a.transform, prediction, s, out);
    } else {
      double* m = s_part + static_cast<int64_t>(rr) * K;
      for (int gg = 1; gg < G; ++gg) {
        const double* p = s_part + (static_cast<int64_t>(gg) * R + rr) * K;
        for (int k = 0; k < K; ++k) m[k] += p[k];
      }
      TahoeFinalizeRow(f.view, a.transform, prediction, m, out);
    }
  }
}

// Shared forest (gridDim.y == 1, whole forest) and splitting shared forest (gridDim.y parts): the
// block copies its part's nodes and tree records to shared memory once, then walks rows in a
// grid-stride loop. With one part the rows are finalized here; with several, partial sums go to
// d_ws[part][row] (x K) for ReduceKernel.
template <typename Node, bool kMulti, int kWalk>
__global__ void __launch_bounds__(kForestSmemThreads)
    ForestSmemKernel(TahoeDeviceForest f, TahoeLaunchArgs a, double* d_ws) {
  extern __shared__ __align__(16) unsigned char smem[];
  const bool whole = a.strategy == StrategyId::kSharedForest;
  const int parts = whole ? 1 : f.num_parts;
  const int per_part = a.items_per_part;
  const bool final = parts == 1;
  const int K = f.view.num_outputs;
  const bool stage = f.staged_row_bytes > 0;
  const int nf = f.view.num_features;
  constexpr int kStride = kForestSmemThreads;  // TahoeStagedRowBytes' layout
  const int64_t part_bytes = whole ? f.forest_smem_bytes : f.part_smem_bytes;
  Node* s_nodes = reinterpret_cast<Node*>(smem);
  float* s_rows = reinterpret_cast<float*>(smem + ((part_bytes + 15) & ~int64_t{15}));
  const WorkItems items(parts, per_part, a.rows, blockDim.x);
  if (stage) s_rows[nf * kStride + threadIdx.x] = TahoeNan();  // padding column
  int loaded = -1;
  TahoePart part{};
  TahoeTree* s_trees = nullptr;
  uint32_t num_trees = 0;
  for (int item = blockIdx.x; item < items.count(); item += gridDim.x) {
    int p;
    int64_t r_begin, r_end;
    if (!items.Get(item, &p, &r_begin, &r_end)) continue;
    if (p != loaded) {
      __syncthreads();  // every thread is done with the previous part
      part = whole ? TahoePart{0, static_cast<uint32_t>(f.view.num_trees), 0,
                               static_cast<uint32_t>(f.view.num_nodes)}
                   : f.d_parts[p];
      const uint32_t num_nodes = part.node_end - part.node_begin;
      num_trees = part.tree_end - part.tree_begin;
      const uint32_t tree_offset = (num_nodes * static_cast<uint32_t>(sizeof(Node)) + 15u) & ~15u;
      s_trees = reinterpret_cast<TahoeTree*>(smem + tree_offset);
      const Node* g_nodes = static_cast<const Node*>(f.view.nodes) + part.node_begin;
      for (uint32_t i = threadIdx.x; i < num_nodes; i += blockDim.x) s_nodes[i] = TahoeLoad(g_nodes + i);
      const uint4* g_trees = reinterpret_cast<const uint4*>(f.view.trees + part.tree_begin);
      uint4* st = reinterpret_cast<uint4*>(s_trees);
      for (uint32_t i = threadIdx.x; i < num_trees; i += blockDim.x) st[i] = g_trees[i];
      loaded = p;
    }
    for (int64_t base = r_begin; base < r_end; base += blockDim.x) {
      const int64_t r = base + threadIdx.x;
      if (stage) {
        __syncthreads();  // the previous tile is no longer read
        const int nr = static_cast<int>(r_end - base < blockDim.x ? r_end - base : blockDim.x);
        for (int i = threadIdx.x; i < nr * nf; i += blockDim.x) {
          const int rr = i / nf, c = i - rr * nf;
          s_rows[c * kStride + rr] = a.d_rows[(base + rr) * a.row_stride + c];
        }
      }
      __syncthreads();  // part (and staged rows) visible
      if (r >= r_end) continue;
      double* m = kMulti ? d_ws + (static_cast<int64_t>(p) * a.rows + r) * K : nullptr;
      double s = 0;
      if (stage) {
        const TahoeStridedRow row{s_rows + threadIdx.x, static_cast<uint32_t>(kStride)};
        s = WalkRow<kMulti, kWalk>(f.view, s_nodes, part.node_begin, s_trees, nullptr, 0,
                                   num_trees, a, row, m, a.d_out + r * a.out_stride, final);
      } else if constexpr (!TahoeWalkIsFixed(kWalk)) {  // the launcher never pairs these
        const LdgRow row{a.d_rows + r * a.row_stride};
        s = WalkRow<kMulti, kWalk>(f.view, s_nodes, part.node_begin, s_trees, nullptr, 0,
                                   num_trees, a, row, m, a.d_out + r * a.out_stride, final);
      }
      if (!kMulti && !final && a.kind != OutputKind::kLeaf) {
        d_ws[static_cast<int64_t>(p) * a.rows + r] = s;
      }
    }
  }
}

// Row chunk (rows of any width, any number of outputs): a block of T = 256, 512 or 1024 threads
// takes one chunk of C = 1 << log2_chunk rows (kR x C with kR rows per thread), staged row-major
// (TahoeRowChunkStride floats a row, the last one the NaN padding feature), so a block's shared
// memory grows with C x F instead of 32 x F and wide rows leave room for several blocks per SM.
// Thread t walks row t % C (and, kR > 1, rows t % C + j C through the same trees, TahoeWalkFixedN)
// over the trees of group t / C of the T / C groups: small chunks spread one row over many tree
// groups (latency); large ones let the lanes of a warp, and for C > 32 several warps, share a
// tree's nodes in L1 (fewer node lines fetched from L2 per row).
// Partial sums, added in a fixed order (deterministic):
//  * one output: a register per thread and row, then a butterfly over the lanes of one row (C < 32)
//    and a sum over the warps (or, C >= 32, over the groups);
//  * several outputs with a class-aware assignment (each group walks trees of one output): a
//    register per thread and row, then per (row, output) a sum over that output's groups;
//  * otherwise (vector leaves, or fewer groups than outputs; kR = 1; C <= 32): K doubles of
//    shared memory per thread, reduced like one output, output by output.
// Leaf ids go straight out (kR = 1).
// The staged value of feature `c` whose value is `x`: x, or its category code (TahoeCategoryCode)
// when `cats` (TahoeForestView::cat_features of a cat_pairs forest, or null) marks c categorical.
__device__ __forceinline__ float StagedValue(float x, int c, const uint32_t* cats, float cat_low) {
  return cats != nullptr && TahoeIsCatFeature(cats, static_cast<uint32_t>(c))
             ? TahoeCategoryCode(x, cat_low)
             : x;
}

// Stages rows [0, nr) of `g_rows` (`stride` floats apart) into `s_rows`, TahoeRowChunkStride(nf)
// floats a row, with 16-byte loads where alignment allows, and the NaN padding feature of `padded`
// rows; with `cats`, categorical features as category codes (StagedValue). Returns whether this
// thread staged a NaN. The caller synchronizes.
__device__ __forceinline__ bool StageChunkRows(const float* g_rows, int64_t stride, int nr, int nf,
                                               int padded, float* s_rows, const uint32_t* cats,
                                               float cat_low) {
  const int S = TahoeRowChunkStride(nf);
  bool nan = false;
  if ((nf & 3) == 0 && (stride & 3) == 0 && (reinterpret_cast<uintptr_t>(g_rows) & 15) == 0) {
    const int q = nf >> 2;
    for (int i = threadIdx.x; i < nr * q; i += blockDim.x) {
      const int rr = i / q, c = (i - rr * q) << 2;
      const float4 v = __ldg(reinterpret_cast<const float4*>(g_rows + rr * stride + c));
      float* d = s_rows + rr * S + c;
      d[0] = StagedValue(v.x, c, cats, cat_low), d[1] = StagedValue(v.y, c + 1, cats, cat_low);
      d[2] = StagedValue(v.z, c + 2, cats, cat_low), d[3] = StagedValue(v.w, c + 3, cats, cat_low);
      nan |= IsNan(v.x) | IsNan(v.y) | IsNan(v.z) | IsNan(v.w);
    }
  } else {
    for (int i = threadIdx.x; i < nr * nf; i += blockDim.x) {
      const int rr = i / nf, c = i - rr * nf;
      const float x = __ldg(g_rows + rr * stride + c);
      s_rows[rr * S + c] = StagedValue(x, c, cats, cat_low);
      nan |= IsNan(x);
    }
  }
  if (threadIdx.x < padded) s_rows[threadIdx.x * S + nf] = TahoeNan();
  return nan;
}

// Stages rows [0, nr) of `g_rows` feature-major: feature c of row i at s_rows[c * rs + i], then the
// NaN padding feature of rows [0, padded). A warp writes one feature of consecutive rows (distinct
// banks); the global reads are strided, but staging is a small part of a chunk's work (every row
// is walked through all trees). `cats`, `cat_low`: StageChunkRows'. Returns whether this thread
// staged a NaN. The caller synchronizes.
__device__ __forceinline__ bool StageChunkColumns(const float* g_rows, int64_t stride, int nr,
                                                  int nf, int rs, int padded, float* s_rows,
                                                  const uint32_t* cats, float cat_low) {
  bool nan = false;
  for (int i = threadIdx.x; i < nr * nf; i += blockDim.x) {
    const int c = i / nr, rr = i - c * nr;
    const float x = __ldg(g_rows + rr * stride + c);
    s_rows[c * rs + rr] = StagedValue(x, c, cats, cat_low);
    nan |= IsNan(x);
  }
  for (int i = threadIdx.x; i < padded; i += blockDim.x) s_rows[nf * rs + i] = TahoeNan();
  return nan;
}

// TahoeSumFixedRoots with or without the NaN test, over the depth-first or the level layout
// (nan_free, level: uniform over the block); kCat: the categorical test (TahoeCatTest). With
// `record_roots` (numeric forests), TahoeSumRecords over the record layout instead.
template <int R, int kCat, typename Row>
__device__ __forceinline__ void SumFromRoots(const TahoeForestView& v, const TahoeNode8* nodes,
                                             const uint32_t* roots, uint32_t begin, uint32_t end,
                                             bool nan_free, bool level, const Row (&rows)[R],
                                             double (&sum)[R], const TahoeRecord* records,
                                             const double* record_leaves,
                                             const uint32_t* record_roots) {
  if constexpr (kCat == kTahoeCatNone) {
    if (record_roots != nullptr) {
      if (nan_free) {
        TahoeSumRecords<true, R>(records, record_leaves, record_roots, begin, end, rows, sum);
      } else {
        TahoeSumRecords<false, R>(records, record_leaves, record_roots, begin, end, rows, sum);
      }
      return;
    }
  }
  if (level) {
    if (nan_free) {
      TahoeSumFixedRoots<true, R, true, kCat>(v, nodes, roots, begin, end, rows, sum);
    } else {
      TahoeSumFixedRoots<false, R, true, kCat>(v, nodes, roots, begin, end, rows, sum);
    }
  } else if (nan_free) {
    TahoeSumFixedRoots<true, R, false, kCat>(v, nodes, roots, begin, end, rows, sum);
  } else {
    TahoeSumFixedRoots<false, R, false, kCat>(v, nodes, roots, begin, end, rows, sum);
  }
}

// One output: `sum[j]` of every thread (row t % C + j C) added over the tree groups. C < 32: lanes
// l and l ^ o (o >= C) walk the same rows; after the butterfly, lane r < C holds its warp's sums
// for rows r (+ C); then the warps' sums in warp order. C >= 32: the groups' sums in group order.
// Writes the finalized rows.
// d_part (tree parts): the row sums go to d_part[row] for ReduceKernel instead of the output.
template <int R>
__device__ __forceinline__ void FinishOneOutput(const TahoeDeviceForest& f, const TahoeLaunchArgs& a,
                                                const double (&sum)[R], int log2_chunk, int64_t row0,
                                                int nr, double* s_acc, double* d_part) {
  const int C = 1 << log2_chunk, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int j = 0; j < R; ++j) {
    double v = sum[j];
    for (int o = 16; o >= C; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane < C) s_acc[j * blockDim.x + warp * 32 + lane] = v;
  }
  __syncthreads();
  if (threadIdx.x < nr) {
    const int j = threadIdx.x >> log2_chunk, rr = threadIdx.x & (C - 1);
    const int stride = C > 32 ? C : 32;  // a warp's (C < 32) or a group's (C >= 32) sums
    double s = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x) / stride; ++w) {
      s += s_acc[j * blockDim.x + w * stride + rr];
    }
    if (d_part != nullptr) {
      d_part[row0 + threadIdx.x] = s;
    } else {
      TahoeFinalizeScalar(f.view, a.transform, a.kind == OutputKind::kPrediction, s,
                          a.d_out + (row0 + threadIdx.x) * a.out_stride);
    }
  }
}

// Several outputs, class-aware assignment: per (row, output) the sums of that output's tree groups
// (g = k, k + K, ...) in group order, into s_sums (K per row). The caller synchronizes.
template <int R>
__device__ __forceinline__ void SumClassedOutputs(const double (&sum)[R], int log2_chunk, int K,
                                                  int nr, double* s_acc, double* s_sums) {
#pragma unroll
  for (int j = 0; j < R; ++j) s_acc[j * blockDim.x + threadIdx.x] = sum[j];
  __syncthreads();
  const int C = 1 << log2_chunk, G = blockDim.x >> log2_chunk;
  for (int i = threadIdx.x; i < nr * K; i += blockDim.x) {
    const int rr = i / K, k = i - rr * K;
    const double* p = s_acc + (rr >> log2_chunk) * blockDim.x + (rr & (C - 1));
    double s = 0;
    for (int gg = k; gg < G; gg += K) s += p[gg << log2_chunk];
    s_sums[i] = s;
  }
}

// Several outputs without a class-aware assignment: each thread's K sums `m` (shared memory) added
// over the lanes of its row by a butterfly, output by output, then over the warps in warp order,
// into warp 0's slot of each (row, output) (which only the adding thread reads). The caller
// synchronizes; the sums are then at s_acc[row * K + k].
__device__ __forceinline__ void SumSharedOutputs(double* m, int log2_chunk, int K, int nr,
                                                 double* s_acc) {
  const int C = 1 << log2_chunk, lane = threadIdx.x & 31;
  for (int k = 0; k < K; ++k) {
    double v = m[k];
    for (int o = 16; o >= C; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane < C) m[k] = v;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < nr * K; i += blockDim.x) {
    const int rr = i / K, k = i - rr * K;
    double s = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) s += s_acc[(w * 32 + rr) * K + k];
    s_acc[rr * K + k] = s;
  }
}

// Row chunk's reduction of the threads' sums (`sum`, or several outputs without a class-aware
// assignment: `m`) and the finalized rows, or with d_part (tree parts) the rows' K sums at
// d_part[row * K + k] for ReduceKernel.
template <bool kMulti, int R>
__device__ __forceinline__ void FinishRowChunk(const TahoeDeviceForest& f, const TahoeLaunchArgs& a,
                                               const double (&sum)[R], int log2_chunk, int K,
                                               int64_t row0, int nr, bool classed, double* s_acc,
                                               double* m, double* d_part = nullptr) {
  if (!kMulti) {
    FinishOneOutput(f, a, sum, log2_chunk, row0, nr, s_acc, d_part);
    return;
  }
  double* s_sums = s_acc;  // the chunk's K sums per row, row-major
  if (classed) {
    s_sums = s_acc + R * blockDim.x;
    SumClassedOutputs(sum, log2_chunk, K, nr, s_acc, s_sums);
  } else if (m != nullptr) {
    SumSharedOutputs(m, log2_chunk, K, nr, s_acc);
  }
  __syncthreads();
  if (threadIdx.x < nr && d_part != nullptr) {
    for (int k = 0; k < K; ++k) d_part[(row0 + threadIdx.x) * K + k] = s_sums[threadIdx.x * K + k];
  } else if (threadIdx.x < nr) {
    TahoeFinalizeRow(f.view, a.transform, a.kind == OutputKind::kPrediction,
                     s_sums + threadIdx.x * K, a.d_out + (row0 + threadIdx.x) * a.out_stride);
  }
}

// kBig: blocks of more than 256 threads (a separate instantiation, so that 256-thread blocks keep
// their own code). Registers are capped where ptxas chose them for 256-thread blocks before blocks
// grew (32 for one row and one output: two 1,024-thread blocks per SM; 40 otherwise); left to
// itself, ptxas spills the 1,024-thread multi-output walks at 32 or takes 64.
template <typename Node, bool kMulti, int kWalk, int kR, bool kBig>
__global__ void __launch_bounds__(kBig ? kRowChunkMaxThreads : kRowChunkMinThreads)
    __maxnreg__(kR == 4 ? 64 : kMulti || kR == 2 ? 40 : 32)
    RowChunkKernel(TahoeDeviceForest f, TahoeLaunchArgs a, int log2_chunk, double* d_ws) {
  static_assert(kR == 1 || (TahoeWalkIsFixed(kWalk) && std::is_same_v<Node, TahoeNode8> && !kBig),
                "several rows per thread walk with TahoeWalkFixedN in blocks of 256");
  constexpr bool kPair = kR > 1;
  constexpr int R = kR;  // rows per thread
  extern __shared__ __align__(16) unsigned char smem[];
  const int C = 1 << log2_chunk;
  const int log2_threads = 31 - __clz(static_cast<int>(blockDim.x));
  const int K = kMulti ? f.view.num_outputs : 1;
  const int S = TahoeRowChunkStride(f.view.num_features);
  const int assignment = TahoeRowChunkAssignment(log2_threads, log2_chunk);
  const bool classed = kMulti && TahoeRowChunkClassed(f.class_mask, K, log2_threads, log2_chunk);
  double* s_acc = reinterpret_cast<double*>(smem);
  float* s_rows = reinterpret_cast<float*>(
      smem + TahoeRowChunkAccBytes(f.class_mask, f.view.num_outputs, log2_threads, log2_chunk, R));
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * R) << log2_chunk;
  const int nr = static_cast<int>(a.rows - row0 < R * C ? a.rows - row0 : R * C);
  const int r = threadIdx.x & (C - 1), g = threadIdx.x >> log2_chunk;
  double* m = kMulti && !kPair && !classed ? s_acc + threadIdx.x * K : nullptr;
  // Fixed walks of scalar sums over every round run from the roots (TahoeSumFixedRoots).
  const bool all_rounds = a.row_params.it_begin <= 0 && a.row_params.it_end >= f.num_iterations;
  const bool from_roots = TahoeWalkIsFixed(kWalk) && std::is_same_v<Node, TahoeNode8> &&
                          all_rounds && m == nullptr && a.kind != OutputKind::kLeaf;
  // Groups of 32 rows or more stage their rows feature-major (feature c of row i at
  // s_rows[c * R C + i]): the lanes of a warp then walk rows r, r + 1, ... of one tree group and
  // read their features from distinct banks whatever the features (row-major rows conflict ~2-way).
  const bool feature_major = from_roots && C >= 32;
  // The walks from the roots of cat_pairs forests read categorical features as category codes
  // (kTahoeCatCodes: one shift per categorical step instead of a range test, a conversion and a
  // word select, and no branch: TahoeFixedStep::CodeLeftMask); the other walks read values.
  constexpr bool kCodes = TahoeWalkCat(kWalk) == kTahoeCatPairs;
  const uint32_t* cats = kCodes && from_roots ? f.view.cat_features : nullptr;
  // Rows without NaN (but the padding feature) take the walk without the NaN test.
  const bool nan_free = !__syncthreads_or(
      feature_major ? StageChunkColumns(a.d_rows + row0 * a.row_stride, a.row_stride, nr,
                                        f.view.num_features, R * C, R * C, s_rows, cats,
                                        f.view.cat_low)
                    : StageChunkRows(a.d_rows + row0 * a.row_stride, a.row_stride, nr,
                                     f.view.num_features, R * C, s_rows, cats, f.view.cat_low));
  const uint32_t order_begin =
      classed ? f.class_order_begin[assignment] : f.order_begin[assignment];
  const uint32_t* order = (classed ? f.d_class_order : f.d_assign_order) + order_begin;
  const uint32_t* offsets = classed ? f.d_class_offsets + f.class_offsets_begin[assignment]
                                    : f.d_assign_offsets + f.offsets_begin[assignment];
  const Node* nodes = static_cast<const Node*>(f.view.nodes);
  double sum[R] = {};
  const uint32_t* level_roots = classed ? f.d_class_level_roots : f.d_assign_level_roots;
  const bool level = a.level_walk && level_roots != nullptr;
  const uint32_t* roots =
      (level ? level_roots : classed ? f.d_class_roots : f.d_assign_roots) + order_begin;
  const uint32_t* record_roots = classed ? f.d_class_record_roots : f.d_assign_record_roots;
  if (!a.record_walk || record_roots == nullptr) {
    record_roots = nullptr;
  } else {
    record_roots += order_begin;
  }
  if constexpr (TahoeWalkIsFixed(kWalk) && std::is_same_v<Node, TahoeNode8>) {
    if (from_roots) {  // uniform over the block
      if (r < nr) {
        // A row past the end walks the first one again; its sum is never read. Both layouts
        // through one accessor (one copy of the walk: a second one spills).
        const uint32_t feature_stride = feature_major ? R * C : 1;
        const int row_stride = feature_major ? 1 : S;
        TahoeByteStridedRow rows[R];
#pragma unroll
        for (int j = 0; j < R; ++j) {
          rows[j] = TahoeByteStridedRow{s_rows + (r + j * C < nr ? r + j * C : r) * row_stride,
                                        feature_stride * 4};
        }
        // Tree parts (gridDim.y > 1, RowChunkLaunchShape): this block walks part blockIdx.y of
        // the group's trees, in tree order.
        const uint32_t b = offsets[g], n = offsets[g + 1] - b, parts = gridDim.y;
        constexpr int kRootsCat = kCodes ? kTahoeCatCodes : TahoeWalkCat(kWalk);
        SumFromRoots<R, kRootsCat>(f.view, nodes, roots, b + n * blockIdx.y / parts,
                                   b + n * (blockIdx.y + 1) / parts, nan_free, level, rows, sum,
                                   f.d_records, f.d_record_leaves, record_roots);
      }
      double* d_part = gridDim.y > 1 ? d_ws + static_cast<int64_t>(blockIdx.y) * a.rows * K : nullptr;
      FinishRowChunk<kMulti>(f, a, sum, log2_chunk, K, row0, nr, classed, s_acc, m, d_part);
      return;
    }
  }
  if constexpr (kPair) {
    if (r < nr) {
      // A row past the end walks the first one again; its sum is never read.
      TahoePlainRow rows[R];
#pragma unroll
      for (int j = 0; j < R; ++j) rows[j] = TahoePlainRow{s_rows + (r + j * C < nr ? r + j * C : r) * S};
      TahoeAccumulateFixedN<R, TahoeWalkCat(kWalk)>(f.view, nodes, f.view.trees, order, offsets[g], offsets[g + 1],
                               a.row_params, rows, sum);
    }
  } else {
    const TahoePlainRow row{s_rows + r * S};
    float* out = a.d_out + (row0 + r) * a.out_stride;
    if (r < nr) {
      if (m == nullptr) {
        sum[0] = WalkRow<false, kWalk>(f.view, nodes, 0, f.view.trees, order, offsets[g],
                                       offsets[g + 1], a, row, nullptr, out, false);
      } else {
        WalkRow<true, kWalk>(f.view, nodes, 0, f.view.trees, order, offsets[g], offsets[g + 1], a,
                             row, m, out, false);
      }
    } else if (m != nullptr) {
      for (int k = 0; k < K; ++k) m[k] = 0;
    }
    if (a.kind == OutputKind::kLeaf) return;  // uniform over the block
  }
  FinishRowChunk<kMulti>(f, a, sum, log2_chunk, K, row0, nr, classed, s_acc, m);
}

// TahoeLaneWalk's reads on 32-bit shared-memory addresses (a generic pointer costs the walk an
// extra add per step).
struct SharedLaneMemory {
  using Addr = uint32_t;
  __device__ static TahoeLaneNode Node(uint32_t a) {
    TahoeLaneNode n;
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(n.value), "=r"(n.word) : "r"(a));
    return n;
  }
  __device__ static float Feature(uint32_t row, uint32_t column) {
    float x;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(x) : "r"(row + (column << 2)));
    return x;
  }
};

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Splitting shared forest on the lane layout (TahoeLaneLayout; scalar forests, every round, margin
// or prediction): the block copies a part's bundle records and slots to shared memory; each
// half-warp takes one row at a time and stages it in its own row buffer (each feature twice, then
// NaN), lane l staging feature l and walking tree l % 16 of every bundle of the part; the 16 lane
// sums are added by a butterfly of shuffles (a fixed order: deterministic). A lane loads its feature
// of the half-warp's next row while the current one is walked, and no block barrier is needed
// between rows. One part: finalized here; several: partial sums to d_ws[part][row] for
// ReduceKernel.
__global__ void __launch_bounds__(kForestSmemThreads)
    LaneForestKernel(TahoeDeviceForest f, TahoeLaunchArgs a, double* d_ws) {
  static_assert(kMaxStagedFeatures <= kTahoeLaneTrees, "a lane stages at most one feature");
  extern __shared__ __align__(16) unsigned char smem[];
  const int S = f.lane_columns;
  const int nf = f.view.num_features;
  const int parts = f.lane_num_parts;
  const bool final = parts == 1;
  const bool prediction = a.kind == OutputKind::kPrediction;
  const int lane = threadIdx.x & 31, l = lane & 15;
  const int half = threadIdx.x >> 4, halves = blockDim.x >> 4;
  // Layout: TahoeLaneSharedBytes.
  float* row = reinterpret_cast<float*>(smem) + half * S;
  TahoeLaneNode* s_slots = reinterpret_cast<TahoeLaneNode*>(smem + TahoeLaneRowBytes(S));
  TahoeLaneBundle* s_bundles = nullptr;  // right after the loaded part's slots
  if (l == 0) row[2 * nf] = TahoeNan();
  const TahoeLaneAdvance adv = TahoeLaneAdvanceFor(f.lane_paired, l);
  const uint32_t row_addr = SharedAddress(row), slots_addr = SharedAddress(s_slots);
  const WorkItems items(parts, a.items_per_part, a.rows, halves);
  int loaded = -1;
  TahoeLanePart part{};
  uint32_t num_bundles = 0;
  for (int item = blockIdx.x; item < items.count(); item += gridDim.x) {
    int p;
    int64_t r_begin, r_end;
    if (!items.Get(item, &p, &r_begin, &r_end)) continue;
    if (p != loaded) {
      __syncthreads();  // every warp is done with the previous part
      part = f.d_lane_parts[p];
      num_bundles = part.bundle_end - part.bundle_begin;
      s_bundles = reinterpret_cast<TahoeLaneBundle*>(s_slots + (part.slot_end - part.slot_begin));
      for (uint32_t i = threadIdx.x; i < num_bundles * kTahoeLaneTrees; i += blockDim.x) {
        TahoeLaneBundle b = f.d_lane_bundles[part.bundle_begin * kTahoeLaneTrees + i];
        b.slot_begin -= part.slot_begin;
        s_bundles[i] = b;
      }
      const uint2* g = reinterpret_cast<const uint2*>(f.d_lane_slots + part.slot_begin);
      uint2* d = reinterpret_cast<uint2*>(s_slots);
      for (uint32_t i = threadIdx.x; i < part.slot_end - part.slot_begin; i += blockDim.x) d[i] = g[i];
      loaded = p;
      __syncthreads();  // part visible
    }
    // Rows r_begin + half, + halves, ...; every lane runs the loop (the shuffles need all 32): a
    // half past the end walks a stale row and writes nothing.
    const int64_t first = r_begin + (half & ~1);
    float x = 0;
    if (l < nf && first + (lane >> 4) < r_end) x = a.d_rows[(first + (lane >> 4)) * a.row_stride + l];
    for (int64_t base = first; base < r_end; base += halves) {
      const int64_t r = base + (lane >> 4);
      __syncwarp();  // the previous row is no longer read
      if (l < nf) TahoeLaneStage(x, row + 2 * l);
      __syncwarp();
      if (l < nf && r + halves < r_end) x = a.d_rows[(r + halves) * a.row_stride + l];
      double sum = 0;
      for (uint32_t b = 0; b < num_bundles; ++b) {
        const TahoeLaneBundle tree = s_bundles[b * kTahoeLaneTrees + l];
        sum += static_cast<double>(TahoeLaneWalk<SharedLaneMemory>(
            slots_addr + tree.slot_begin * uint32_t{sizeof(TahoeLaneNode)}, tree.steps, row_addr,
            f.lane_column_bits, adv));
      }
#pragma unroll
      for (int o = kTahoeLaneTrees / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      if (r < r_end && l == 0) {
        if (final) {
          TahoeFinalizeScalar(f.view, a.transform, prediction, sum, a.d_out + r * a.out_stride);
        } else {
          d_ws[static_cast<int64_t>(p) * a.rows + r] = sum;
        }
      }
    }
  }
}

// Global reduction of splitting shared forest: adds the parts' partial sums in part order and
// finalizes each row (one thread per row).
template <bool kMulti>
__global__ void __launch_bounds__(256)
    ReduceKernel(TahoeDeviceForest f, TahoeLaunchArgs a, double* d_ws, int parts) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= a.rows) return;
  float* out = a.d_out + r * a.out_stride;
  const bool prediction = a.kind == OutputKind::kPrediction;
  if constexpr (!kMulti) {
    double s = 0;
    for (int p = 0; p < parts; ++p) s += d_ws[static_cast<int64_t>(p) * a.rows + r];
    TahoeFinalizeScalar(f.view, a.transform, prediction, s, out);
  } else {
    const int K = f.view.num_outputs;
    double* m = d_ws + r * K;
    for (int p = 1; p < parts; ++p) {
      const double* q = d_ws + (static_cast<int64_t>(p) * a.rows + r) * K;
      for (int k = 0; k < K; ++k) m[k] += q[k];
    }
    TahoeFinalizeRow(f.view, a.transform, prediction, m, out);
  }
}

}  // namespace tahoe_kernels
}  // namespace grove
