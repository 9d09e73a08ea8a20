// Launchers of the Tahoe inference kernels (contract in tahoe_kernels.h).
#include "core/predict/tahoe/tahoe_kernels.h"

#include <algorithm>
#include <type_traits>

#include "core/predict/tahoe/perf_model.h"
#include "core/predict/tahoe/tahoe_kernels.cuh"

namespace grove {

using tahoe_kernels::DirectKernel;
using tahoe_kernels::ForestSmemKernel;
using tahoe_kernels::LaneForestKernel;
using tahoe_kernels::ReduceKernel;
using tahoe_kernels::RowChunkKernel;
using tahoe_kernels::SharedDataKernel;

namespace {

bool Multi(const TahoeDeviceForest& f) { return f.view.num_outputs > 1; }

// Row ranges per part for the persistent shared-forest kernels: about 32 work items per resident
// block, so that the last wave is a small fraction of the launch.
int ItemsPerPart(int parts, int64_t resident, int64_t tiles) {
  return static_cast<int>(std::clamp<int64_t>((32 * resident + parts - 1) / parts, 1, tiles));
}

int Log2(int groups) {
  int i = 0;
  while ((1 << i) < groups) ++i;
  return i;
}

// The row-chunk shape of `code` made valid for the forest (RowChunkLaunchShape), except that a pair
// is kept whatever the output kind.
RowChunkShape ValidRowChunkShape(const TahoeDeviceForest& f, int code) {
  RowChunkShape s = RowChunkShape::FromCode(code);
  s.chunk = 1 << Log2(std::clamp(s.chunk, 1, s.threads));
  const bool classed = TahoeRowChunkClassed(f.class_mask, f.view.num_outputs, Log2(s.threads),
                                            Log2(s.chunk));
  if (f.view.num_outputs > 1 && !classed) s.chunk = std::min(s.chunk, kMaxWarpRowChunk);
  s.BoundGroups();
  if (s.threads != kRowChunkMinThreads || s.chunk > kMaxWarpRowChunk) s.per_thread = 1;
  return s;
}

// The RowChunkKernel instantiation for the shape: several rows per thread (fixed-walk forests
// only; the caller checked) in blocks of 256 threads, single rows in blocks of 256 or more
// (`big`).
template <typename Node, bool kMulti, int kWalk>
void LaunchRowChunk(int per_thread, bool big, dim3 grid, int threads, size_t smem,
                    cudaStream_t stream, const TahoeDeviceForest& f, const TahoeLaunchArgs& a,
                    int log2_chunk, double* d_ws) {
  if constexpr (TahoeWalkIsFixed(kWalk) && std::is_same_v<Node, TahoeNode8>) {
    // Several rows per thread: 256 threads (ValidRowChunkShape).
    if (per_thread == 2) {
      RowChunkKernel<Node, kMulti, kWalk, 2, false><<<grid, threads, smem, stream>>>(f, a, log2_chunk, d_ws);
      return;
    }
    if (per_thread == 4) {
      RowChunkKernel<Node, kMulti, kWalk, 4, false><<<grid, threads, smem, stream>>>(f, a, log2_chunk, d_ws);
      return;
    }
  }
  if (big) {
    RowChunkKernel<Node, kMulti, kWalk, 1, true><<<grid, threads, smem, stream>>>(f, a, log2_chunk, d_ws);
  } else {
    RowChunkKernel<Node, kMulti, kWalk, 1, false><<<grid, threads, smem, stream>>>(f, a, log2_chunk, d_ws);
  }
}

// Raises the dynamic shared-memory limit of the RowChunkKernel instantiations of a walk.
template <typename Node, bool kMulti, int kWalk>
cudaError_t ConfigureRowChunk(int max_smem) {
  cudaError_t e = cudaFuncSetAttribute(RowChunkKernel<Node, kMulti, kWalk, 1, false>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem);
  if (e == cudaSuccess) {
    e = cudaFuncSetAttribute(RowChunkKernel<Node, kMulti, kWalk, 1, true>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem);
  }
  if constexpr (TahoeWalkIsFixed(kWalk) && std::is_same_v<Node, TahoeNode8>) {
    if (e == cudaSuccess) {
      e = cudaFuncSetAttribute(RowChunkKernel<Node, kMulti, kWalk, 2, false>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem);
    }
    if (e == cudaSuccess) {
      e = cudaFuncSetAttribute(RowChunkKernel<Node, kMulti, kWalk, 4, false>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem);
    }
  }
  return e;
}

// kWalk: the cheapest TahoeWalk the forest allows; kernels that read unpadded rows (direct, and
// shared forest / splitting without staged rows) use kTahoeWalkSimple instead of kTahoeWalkFixed
// and kTahoeWalkGeneric instead of kTahoeWalkFixedCat(Pairs).
template <typename Node, bool kMulti, int kWalk>
cudaError_t LaunchTyped(const TahoeDeviceForest& f, const TahoeLaunchArgs& a, double* d_ws,
                        cudaStream_t stream) {
  constexpr int kUnpadded = kWalk == kTahoeWalkFixed                ? kTahoeWalkSimple
                            : TahoeWalkCat(kWalk) != kTahoeCatNone ? kTahoeWalkGeneric
                                                          : kWalk;
  switch (a.strategy) {
    case StrategyId::kCpu:
      return cudaErrorInvalidValue;  // not a kernel
    case StrategyId::kDirect: {
      const unsigned grid = static_cast<unsigned>((a.rows + kDirectThreads - 1) / kDirectThreads);
      DirectKernel<Node, kMulti, kUnpadded><<<grid, kDirectThreads, 0, stream>>>(f, a, d_ws);
      break;
    }
    case StrategyId::kSharedData: {
      const int groups = std::clamp(a.groups, 1, 32);
      TahoeLaunchArgs b = a;
      b.groups = 1 << Log2(groups);
      const unsigned grid =
          static_cast<unsigned>((a.rows + kSharedDataRows - 1) / kSharedDataRows);
      const size_t smem = static_cast<size_t>(TahoeSharedBytes(f, a.strategy, b.groups));
      SharedDataKernel<Node, kMulti, kWalk><<<grid, b.groups * kSharedDataRows, smem, stream>>>(
          f, b, Log2(b.groups));
      break;
    }
    case StrategyId::kRowChunk: {
      const RowChunkShape shape = RowChunkLaunchShape(f, a);
      const int log2_rows = Log2(shape.chunk) + Log2(shape.per_thread);
      const dim3 grid(static_cast<unsigned>(((a.rows - 1) >> log2_rows) + 1),
                      static_cast<unsigned>(shape.parts));
      const size_t smem = static_cast<size_t>(TahoeSharedBytes(f, a.strategy, shape.Code()));
      const int log2_chunk = Log2(shape.chunk);
      const bool big = shape.threads > kRowChunkMinThreads;
      LaunchRowChunk<Node, kMulti, kWalk>(shape.per_thread, big, grid, shape.threads, smem, stream, f,
                                          a, log2_chunk, d_ws);
      if (shape.parts > 1) {  // the parts' sums, added in part order, finalized
        if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
        const unsigned rgrid = static_cast<unsigned>((a.rows + 255) / 256);
        ReduceKernel<kMulti><<<rgrid, 256, 0, stream>>>(f, a, d_ws, shape.parts);
      }
      break;
    }
    case StrategyId::kSharedForest:
    case StrategyId::kSplittingSharedForest: {
      const bool split = a.strategy == StrategyId::kSplittingSharedForest;
      if (split && TahoeUsesLanes(f, a)) {
        const int parts = f.lane_num_parts;
        const int64_t tiles = (a.rows + kLaneBlockRows - 1) / kLaneBlockRows;
        const int64_t resident = static_cast<int64_t>(std::max(1, a.sm_count));
        TahoeLaunchArgs b = a;
        b.items_per_part = ItemsPerPart(parts, resident, tiles);
        const unsigned grid =
            static_cast<unsigned>(std::min<int64_t>(resident, int64_t{b.items_per_part} * parts));
        const size_t smem = static_cast<size_t>(TahoeLaneSharedBytes(f));
        LaneForestKernel<<<grid, kForestSmemThreads, smem, stream>>>(f, b, d_ws);
        if (parts > 1) {
          if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
          const unsigned rgrid = static_cast<unsigned>((a.rows + 255) / 256);
          ReduceKernel<false><<<rgrid, 256, 0, stream>>>(f, a, d_ws, parts);
        }
        break;
      }
      const int parts = split ? std::max(1, f.num_parts) : 1;
      const size_t smem = static_cast<size_t>(TahoeSharedBytes(f, a.strategy, 1));
      const int64_t row_blocks = (a.rows + kForestSmemThreads - 1) / kForestSmemThreads;
      const int64_t resident = static_cast<int64_t>(std::max(1, a.sm_count)) *
                               std::max(1, a.blocks_per_sm);
      TahoeLaunchArgs b = a;
      b.items_per_part = ItemsPerPart(parts, resident, row_blocks);
      const unsigned grid =
          static_cast<unsigned>(std::min<int64_t>(resident, int64_t{b.items_per_part} * parts));
      if (f.staged_row_bytes > 0) {
        ForestSmemKernel<Node, kMulti, kWalk><<<grid, kForestSmemThreads, smem, stream>>>(f, b, d_ws);
      } else {
        ForestSmemKernel<Node, kMulti, kUnpadded><<<grid, kForestSmemThreads, smem, stream>>>(f, b,
                                                                                        d_ws);
      }
      if (parts > 1 && a.kind != OutputKind::kLeaf) {
        if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
        const unsigned rgrid = static_cast<unsigned>((a.rows + 255) / 256);
        ReduceKernel<kMulti><<<rgrid, 256, 0, stream>>>(f, a, d_ws, parts);
      }
      break;
    }
  }
  return cudaGetLastError();
}

template <typename Node, bool kMulti, int kWalk>
cudaError_t ConfigureOne(int max_smem) {
  cudaError_t e = cudaFuncSetAttribute(SharedDataKernel<Node, kMulti, kWalk>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem);
  if (e == cudaSuccess) {
    e = ConfigureRowChunk<Node, kMulti, kWalk>(max_smem);
  }
  if (e != cudaSuccess) return e;
  return cudaFuncSetAttribute(ForestSmemKernel<Node, kMulti, kWalk>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem);
}

template <typename Node, bool kMulti>
cudaError_t ConfigureTyped(int max_smem) {
  cudaError_t e = ConfigureOne<Node, kMulti, kTahoeWalkGeneric>(max_smem);
  if (e == cudaSuccess) e = ConfigureOne<Node, kMulti, kTahoeWalkSimple>(max_smem);
  if constexpr (std::is_same_v<Node, TahoeNode8>) {
    if (e == cudaSuccess) e = ConfigureOne<Node, kMulti, kTahoeWalkFixed>(max_smem);
    if (e == cudaSuccess) e = ConfigureOne<Node, kMulti, kTahoeWalkFixedCat>(max_smem);
    if (e == cudaSuccess) e = ConfigureOne<Node, kMulti, kTahoeWalkFixedCatPairs>(max_smem);
  }
  return e;
}

template <typename Node, bool kMulti>
cudaError_t LaunchWalk(const TahoeDeviceForest& f, const TahoeLaunchArgs& a, double* d_ws,
                       cudaStream_t stream) {
  if constexpr (std::is_same_v<Node, TahoeNode8>) {
    if (f.fixed && f.cat_pairs) {
      return LaunchTyped<Node, kMulti, kTahoeWalkFixedCatPairs>(f, a, d_ws, stream);
    }
    if (f.fixed && f.categorical) {
      return LaunchTyped<Node, kMulti, kTahoeWalkFixedCat>(f, a, d_ws, stream);
    }
    if (f.fixed) return LaunchTyped<Node, kMulti, kTahoeWalkFixed>(f, a, d_ws, stream);
  }
  return f.simple ? LaunchTyped<Node, kMulti, kTahoeWalkSimple>(f, a, d_ws, stream)
                  : LaunchTyped<Node, kMulti, kTahoeWalkGeneric>(f, a, d_ws, stream);
}

template <typename Node, bool kMulti>
int BlocksPerSm(int64_t smem_bytes) {
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, ForestSmemKernel<Node, kMulti, kTahoeWalkSimple>,
                                                    kForestSmemThreads, smem_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

// Resident blocks per SM of the RowChunkKernel instantiation LaunchRowChunk runs for the shape.
template <typename Node, bool kMulti, int kWalk>
int RowChunkOccupancy(const RowChunkShape& shape, size_t smem) {
  int n = 0;
  cudaError_t e = cudaSuccess;
  const bool big = shape.threads > kRowChunkMinThreads;
  if constexpr (TahoeWalkIsFixed(kWalk) && std::is_same_v<Node, TahoeNode8>) {
    if (shape.per_thread == 2) {
      e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &n, RowChunkKernel<Node, kMulti, kWalk, 2, false>, shape.threads, smem);
    } else if (shape.per_thread == 4) {
      e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &n, RowChunkKernel<Node, kMulti, kWalk, 4, false>, shape.threads, smem);
    }
    if (shape.per_thread > 1) return e == cudaSuccess ? n : ((void)cudaGetLastError(), 0);
  }
  e = big ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &n, RowChunkKernel<Node, kMulti, kWalk, 1, true>, shape.threads, smem)
          : cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &n, RowChunkKernel<Node, kMulti, kWalk, 1, false>, shape.threads, smem);
  return e == cudaSuccess ? n : ((void)cudaGetLastError(), 0);
}

template <typename Node, bool kMulti>
int RowChunkOccupancyWalk(const TahoeDeviceForest& f, const RowChunkShape& shape, size_t smem) {
  if constexpr (std::is_same_v<Node, TahoeNode8>) {
    if (f.fixed && f.cat_pairs) {
      return RowChunkOccupancy<Node, kMulti, kTahoeWalkFixedCatPairs>(shape, smem);
    }
    if (f.fixed && f.categorical) {
      return RowChunkOccupancy<Node, kMulti, kTahoeWalkFixedCat>(shape, smem);
    }
    if (f.fixed) return RowChunkOccupancy<Node, kMulti, kTahoeWalkFixed>(shape, smem);
  }
  return f.simple ? RowChunkOccupancy<Node, kMulti, kTahoeWalkSimple>(shape, smem)
                  : RowChunkOccupancy<Node, kMulti, kTahoeWalkGeneric>(shape, smem);
}

}  // namespace

int TahoeRowChunkBlocksPerSm(const TahoeDeviceForest& f, const TahoeLaunchArgs& a) {
  const RowChunkShape shape = RowChunkLaunchShape(f, a);
  const size_t smem = static_cast<size_t>(TahoeSharedBytes(f, StrategyId::kRowChunk, shape.Code()));
  if (f.wide) {
    return Multi(f) ? RowChunkOccupancyWalk<TahoeNode16, true>(f, shape, smem)
                    : RowChunkOccupancyWalk<TahoeNode16, false>(f, shape, smem);
  }
  return Multi(f) ? RowChunkOccupancyWalk<TahoeNode8, true>(f, shape, smem)
                  : RowChunkOccupancyWalk<TahoeNode8, false>(f, shape, smem);
}

bool TahoeRowChunkPairable(const TahoeDeviceForest& f, OutputKind kind, int chunk, int threads) {
  return f.fixed && !f.wide && kind != OutputKind::kLeaf && threads == kRowChunkMinThreads &&
         chunk <= kMaxWarpRowChunk &&
         (f.view.num_outputs == 1 ||
          TahoeRowChunkClassed(f.class_mask, f.view.num_outputs, Log2(threads), Log2(chunk)));
}

bool TahoeRowChunkSplittable(const TahoeDeviceForest& f, const TahoeLaunchArgs& a, int chunk,
                             int threads) {
  return f.fixed && !f.wide && a.kind != OutputKind::kLeaf && a.row_params.it_begin <= 0 &&
         a.row_params.it_end >= f.num_iterations &&
         (f.view.num_outputs == 1 ||
          TahoeRowChunkClassed(f.class_mask, f.view.num_outputs, Log2(threads), Log2(chunk)));
}

RowChunkShape RowChunkLaunchShape(const TahoeDeviceForest& f, const TahoeLaunchArgs& a) {
  RowChunkShape s = ValidRowChunkShape(f, a.groups);
  if (!TahoeRowChunkPairable(f, a.kind, s.chunk, s.threads)) s.per_thread = 1;
  if (!TahoeRowChunkSplittable(f, a, s.chunk, s.threads)) s.parts = 1;
  return s;
}

bool TahoeUsesLanes(const TahoeDeviceForest& f, const TahoeLaunchArgs& a) {
  return a.strategy == StrategyId::kSplittingSharedForest && f.lane_num_parts > 0 &&
         f.view.num_outputs == 1 && a.kind != OutputKind::kLeaf &&
         a.row_params.it_begin <= 0 && a.row_params.it_end >= f.num_iterations;
}

int64_t TahoeWorkspaceDoubles(const TahoeDeviceForest& f, StrategyId s, OutputKind kind,
                              int64_t rows, int row_chunk_parts) {
  if (kind == OutputKind::kLeaf) return 0;
  const int64_t k = f.view.num_outputs;
  const bool multi = k > 1;
  switch (s) {
    case StrategyId::kCpu:
      return 0;
    case StrategyId::kDirect:
    case StrategyId::kSharedForest:
      return multi ? rows * k : 0;
    case StrategyId::kSharedData:
      return 0;
    case StrategyId::kRowChunk:
      return row_chunk_parts > 1 ? row_chunk_parts * rows * k : 0;
    case StrategyId::kSplittingSharedForest: {
      const int parts = std::max({1, f.num_parts, f.lane_num_parts});
      return (parts > 1 || multi) ? parts * rows * k : 0;
    }
  }
  return 0;
}

int64_t TahoeSharedBytes(const TahoeDeviceForest& f, StrategyId s, int groups) {
  switch (s) {
    case StrategyId::kCpu:
    case StrategyId::kDirect:
      return 0;
    case StrategyId::kSharedData: {
      const int64_t k = Multi(f) ? f.view.num_outputs : 1;
      return static_cast<int64_t>(groups) * kSharedDataRows * k * 8 +
             (static_cast<int64_t>(f.view.num_features) + 1) * kSharedDataRows * 4;
    }
    case StrategyId::kSharedForest:
      return ((f.forest_smem_bytes + 15) & ~int64_t{15}) + f.staged_row_bytes + 16;
    case StrategyId::kSplittingSharedForest:
      return ((f.part_smem_bytes + 15) & ~int64_t{15}) + f.staged_row_bytes + 16;
    case StrategyId::kRowChunk: {
      const RowChunkShape shape = ValidRowChunkShape(f, groups);
      const int64_t rows = int64_t{shape.chunk} * shape.per_thread;
      return TahoeRowChunkAccBytes(f.class_mask, f.view.num_outputs, Log2(shape.threads),
                                   Log2(shape.chunk), shape.per_thread) +
             ((rows * TahoeRowChunkStride(f.view.num_features) * 4 + 15) & ~int64_t{15});
    }
  }
  return 0;
}

int TahoeMaxRowChunk(const TahoeDeviceForest& f, int64_t max_smem) {
  for (int c = kRowChunkMinThreads; c >= 1; c /= 2) {
    if (TahoeSharedBytes(f, StrategyId::kRowChunk, c) <= max_smem) return c;
  }
  return 0;
}

int TahoeMaxSharedDataGroups(const TahoeDeviceForest& f, int64_t max_smem) {
  for (int g = 32; g >= 1; g /= 2) {
    if (TahoeSharedBytes(f, StrategyId::kSharedData, g) <= max_smem) return g;
  }
  return 0;
}

cudaError_t TahoeConfigureKernels(int64_t max_smem) {
  const int m = static_cast<int>(max_smem);
  cudaError_t e = cudaFuncSetAttribute(LaneForestKernel,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, m);
  if (e == cudaSuccess) e = ConfigureTyped<TahoeNode8, false>(m);
  if (e == cudaSuccess) e = ConfigureTyped<TahoeNode8, true>(m);
  if (e == cudaSuccess) e = ConfigureTyped<TahoeNode16, false>(m);
  if (e == cudaSuccess) e = ConfigureTyped<TahoeNode16, true>(m);
  return e;
}

int TahoeForestBlocksPerSm(const TahoeDeviceForest& f, int64_t smem_bytes, bool multi) {
  if (f.wide) return multi ? BlocksPerSm<TahoeNode16, true>(smem_bytes) : BlocksPerSm<TahoeNode16, false>(smem_bytes);
  return multi ? BlocksPerSm<TahoeNode8, true>(smem_bytes) : BlocksPerSm<TahoeNode8, false>(smem_bytes);
}

cudaError_t TahoeLaunch(const TahoeDeviceForest& f, const TahoeLaunchArgs& a, double* d_ws,
                        cudaStream_t stream) {
  if (a.rows <= 0) return cudaSuccess;
  (void)cudaGetLastError();  // a stale error of other code on this thread is not ours to report
  if (f.wide) {
    return Multi(f) ? LaunchWalk<TahoeNode16, true>(f, a, d_ws, stream)
                    : LaunchWalk<TahoeNode16, false>(f, a, d_ws, stream);
  }
  return Multi(f) ? LaunchWalk<TahoeNode8, true>(f, a, d_ws, stream)
                  : LaunchWalk<TahoeNode8, false>(f, a, d_ws, stream);
}

}  // namespace grove
