// CPU path-based TreeSHAP: the GPUTreeShap algorithm (paper section 3, EXTEND / UNWOUNDSUM over the
// merged paths of a PathLayout, interactions by conditioning on path features, section 3.5) in
// double precision, multi-threaded over rows. It is the CPU twin of the GPU kernels
// (core/explain/treeshap/treeshap_gpu.h) -- same layout, same per-path arithmetic -- serves when there is no
// GPU, and explains the GPU engine's long paths (more than kWarpLanes elements).
//
// Output conventions: exactly those of ExplainCpuReference (core/explain/explain.h).
// Deterministic (each row is computed by one thread, paths in layout order). Thread-safe.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "core/common/rows.h"
#include "core/explain/explain.h"
#include "core/explain/paths.h"

namespace grove {

class ThreadPool;

// Checks rows / out shapes and the iteration range against the layout; fills `use_path` (size
// layout.paths) with the paths whose tree is in range and `bias` (per output) with the base margin
// plus the expected value of the trees in range.
absl::Status PreparePathExplain(const PathLayout& layout, RowsView rows,
                                const ExplainOptions& options, MatrixView<float> out,
                                std::vector<uint8_t>* use_path, std::vector<double>* bias);

// Adds the contributions of paths `path_ids[0..n)` for one row to `acc`, in double:
//  * SHAP values: acc is num_outputs x (F + 1) (bias column untouched);
//  * interactions: acc is num_outputs x (F + 1)^2; off-diagonal M[i][j] and the matching
//    -M[i][j] on M[i][i], plus phi_i on M[i][i] (so the diagonal ends as in the reference); the bias
//    entry is untouched.
// Only entries of outputs [group, group + width) of each path and of its players (PlayerOf of its
// elements after the root) are written: ExplainPathsCpu zeroes and copies no others.
void AddPathContributions(const PathLayout& layout, const uint32_t* path_ids, int64_t n,
                          const float* row, bool interactions, double* acc);

// Full explanation of `rows` into `out` (rows x ExplainWidth) from the layout. Interaction values
// keep, per thread that ran a call (the pool's and the caller), an accumulator of the largest
// num_outputs x (F + 1)^2 doubles it has served, up to 64 MiB (a larger one lives for its call
// only), all zeros between calls (only the pages of cells a call touched are resident);
// RESOURCE_EXHAUSTED where it cannot be had.
absl::Status ExplainPathsCpu(const PathLayout& layout, RowsView rows, const ExplainOptions& options,
                             MatrixView<float> out, ThreadPool* pool);

}  // namespace grove
