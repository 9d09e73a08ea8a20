// Shared by the CUDA benchmark programs (bench/*_bench.cu): CUDA-event timing and, when built with
// GPUTreeShap (GROVE_WITH_GPUTREESHAP: bench/CMakeLists.txt found its header), the dense row view
// and element type its kernels read. Header-only; include from .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

#if defined(GROVE_WITH_GPUTREESHAP)
#include "gpu_treeshap.h"
#endif

namespace grove::bench {

// Median seconds of `reps` runs of `fn` (after one warm-up) on the default stream, timed with CUDA
// events.
inline double TimeDevice(int reps, const std::function<void()>& fn) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  fn();
  cudaDeviceSynchronize();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(start);
    fn();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    t.push_back(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

#if defined(GROVE_WITH_GPUTREESHAP)
// Dense row-major float rows on the device, as GPUTreeShap's DatasetT.
struct DenseDataset {
  const float* data;
  size_t rows, cols;
  __host__ __device__ size_t NumRows() const { return rows; }
  __host__ __device__ size_t NumCols() const { return cols; }
  __device__ float GetElement(size_t r, size_t c) const { return data[r * cols + c]; }
};

using GtsElement = gpu_treeshap::PathElement<gpu_treeshap::XgboostSplitCondition>;
#endif

}  // namespace grove::bench
