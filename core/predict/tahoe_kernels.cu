// Launchers of the Tahoe inference kernels (contract in tahoe_kernels.h).
#include "core/predict/tahoe_kernels.h"

#include <algorithm>

#include "core/predict/tahoe_kernels.cuh"

namespace grove {

using tahoe_kernels::DirectKernel;
using tahoe_kernels::ForestSmemKernel;
using tahoe_kernels::ReduceKernel;
using tahoe_kernels::SharedDataKernel;

const char* TahoeStrategyName(TahoeStrategy s) {
  switch (s) {
    case TahoeStrategy::kDirect:
      return "direct";
    case TahoeStrategy::kSharedData:
      return "shared_data";
    case TahoeStrategy::kSharedForest:
      return "shared_forest";
    case TahoeStrategy::kSplittingSharedForest:
      return "splitting_shared_forest";
  }
  return "?";
}

namespace {

bool Multi(const TahoeDeviceForest& f) { return f.view.num_outputs > 1; }

int Log2(int groups) {
  int i = 0;
  while ((1 << i) < groups) ++i;
  return i;
}

template <typename Node, bool kMulti, bool kSimple>
cudaError_t LaunchTyped(const TahoeDeviceForest& f, const TahoeLaunchArgs& a, double* d_ws,
                        cudaStream_t stream) {
  switch (a.strategy) {
    case TahoeStrategy::kDirect: {
      const unsigned grid = static_cast<unsigned>((a.rows + kDirectThreads - 1) / kDirectThreads);
      DirectKernel<Node, kMulti, kSimple><<<grid, kDirectThreads, 0, stream>>>(f, a, d_ws);
      break;
    }
    case TahoeStrategy::kSharedData: {
      const int groups = std::clamp(a.groups, 1, 32);
      TahoeLaunchArgs b = a;
      b.groups = 1 << Log2(groups);
      const unsigned grid =
          static_cast<unsigned>((a.rows + kSharedDataRows - 1) / kSharedDataRows);
      const size_t smem = static_cast<size_t>(TahoeSharedBytes(f, a.strategy, b.groups));
      SharedDataKernel<Node, kMulti, kSimple><<<grid, b.groups * kSharedDataRows, smem, stream>>>(
          f, b, Log2(b.groups));
      break;
    }
    case TahoeStrategy::kSharedForest:
    case TahoeStrategy::kSplittingSharedForest: {
      const bool split = a.strategy == TahoeStrategy::kSplittingSharedForest;
      const int parts = split ? std::max(1, f.num_parts) : 1;
      const size_t smem = static_cast<size_t>(TahoeSharedBytes(f, a.strategy, 1));
      const int64_t row_blocks = (a.rows + kForestSmemThreads - 1) / kForestSmemThreads;
      const int64_t resident = static_cast<int64_t>(std::max(1, a.sm_count)) *
                               std::max(1, a.blocks_per_sm);
      // About 16 work items per resident block (the last wave is then a small fraction).
      const int64_t per_part =
          std::clamp<int64_t>((16 * resident + parts - 1) / parts, 1, row_blocks);
      TahoeLaunchArgs b = a;
      b.items_per_part = static_cast<int>(per_part);
      const unsigned grid = static_cast<unsigned>(std::min<int64_t>(resident, per_part * parts));
      ForestSmemKernel<Node, kMulti, kSimple><<<grid, kForestSmemThreads, smem, stream>>>(f, b, d_ws);
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

template <typename Node, bool kMulti, bool kSimple>
cudaError_t ConfigureOne(int max_smem) {
  cudaError_t e = cudaFuncSetAttribute(SharedDataKernel<Node, kMulti, kSimple>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem);
  if (e != cudaSuccess) return e;
  return cudaFuncSetAttribute(ForestSmemKernel<Node, kMulti, kSimple>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem);
}

template <typename Node, bool kMulti>
cudaError_t ConfigureTyped(int max_smem) {
  cudaError_t e = ConfigureOne<Node, kMulti, false>(max_smem);
  return e == cudaSuccess ? ConfigureOne<Node, kMulti, true>(max_smem) : e;
}

template <typename Node, bool kMulti>
cudaError_t LaunchSimple(const TahoeDeviceForest& f, const TahoeLaunchArgs& a, double* d_ws,
                         cudaStream_t stream) {
  return f.simple ? LaunchTyped<Node, kMulti, true>(f, a, d_ws, stream)
                  : LaunchTyped<Node, kMulti, false>(f, a, d_ws, stream);
}

template <typename Node, bool kMulti>
int BlocksPerSm(int64_t smem_bytes) {
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, ForestSmemKernel<Node, kMulti, true>,
                                                    kForestSmemThreads, smem_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace

int64_t TahoeWorkspaceDoubles(const TahoeDeviceForest& f, TahoeStrategy s, OutputKind kind,
                              int64_t rows) {
  if (kind == OutputKind::kLeaf) return 0;
  const int64_t k = f.view.num_outputs;
  const bool multi = k > 1;
  switch (s) {
    case TahoeStrategy::kDirect:
    case TahoeStrategy::kSharedForest:
      return multi ? rows * k : 0;
    case TahoeStrategy::kSharedData:
      return 0;
    case TahoeStrategy::kSplittingSharedForest:
      return (f.num_parts > 1 || multi) ? std::max(1, f.num_parts) * rows * k : 0;
  }
  return 0;
}

int64_t TahoeSharedBytes(const TahoeDeviceForest& f, TahoeStrategy s, int groups) {
  switch (s) {
    case TahoeStrategy::kDirect:
      return 0;
    case TahoeStrategy::kSharedData: {
      const int64_t k = Multi(f) ? f.view.num_outputs : 1;
      return static_cast<int64_t>(groups) * kSharedDataRows * k * 8 +
             static_cast<int64_t>(f.view.num_features) * (kSharedDataRows + 1) * 4;
    }
    case TahoeStrategy::kSharedForest:
      return ((f.forest_smem_bytes + 15) & ~int64_t{15}) + f.staged_row_bytes + 16;
    case TahoeStrategy::kSplittingSharedForest:
      return ((f.part_smem_bytes + 15) & ~int64_t{15}) + f.staged_row_bytes + 16;
  }
  return 0;
}

int TahoeMaxSharedDataGroups(const TahoeDeviceForest& f, int64_t max_smem) {
  for (int g = 32; g >= 1; g /= 2) {
    if (TahoeSharedBytes(f, TahoeStrategy::kSharedData, g) <= max_smem) return g;
  }
  return 0;
}

cudaError_t TahoeConfigureKernels(int64_t max_smem) {
  const int m = static_cast<int>(max_smem);
  cudaError_t e = ConfigureTyped<TahoeNode8, false>(m);
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
    return Multi(f) ? LaunchSimple<TahoeNode16, true>(f, a, d_ws, stream)
                    : LaunchSimple<TahoeNode16, false>(f, a, d_ws, stream);
  }
  return Multi(f) ? LaunchSimple<TahoeNode8, true>(f, a, d_ws, stream)
                  : LaunchSimple<TahoeNode8, false>(f, a, d_ws, stream);
}

}  // namespace grove
