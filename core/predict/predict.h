// Prediction API shared by every prediction engine (CPU reference, Tahoe GPU engine).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "core/common/rows.h"
#include "core/model/forest.h"
#include "core/model/outputs.h"

namespace grove {

class ThreadPool;

struct PredictOptions {
  OutputKind kind = OutputKind::kPrediction;
  // Boosting rounds [iteration_begin, iteration_end); iteration_end <= 0 means to the last round.
  int iteration_begin = 0;
  int iteration_end = 0;
};

// Columns per row of the output of `options` for `forest`.
int64_t PredictWidth(const Forest& forest, const PredictOptions& options);

// Checks a call's shapes (rows.cols == num_features, out rows.rows x PredictWidth) and resolves its
// iteration range; INVALID_ARGUMENT saying which. Every CPU engine's first step.
struct IterationRange;
absl::Status CheckPredictCall(const Forest& forest, RowsView rows, const PredictOptions& options,
                              MatrixView<float> out, IterationRange* range);

// CPU reference predictor: accumulates in double, multi-threaded over rows on `pool` (nullptr: the
// calling thread only). `out` must be rows.rows x PredictWidth(). Deterministic. Thread-safe.
absl::Status PredictCpu(const Forest& forest, RowsView rows, const PredictOptions& options,
                        MatrixView<float> out, ThreadPool* pool);

// Rows per chunk PredictCpu hands the pool at least (ThreadPool::ParallelFor's grain): a batch of
// fewer than twice this runs on the calling thread.
int64_t PredictCpuGrain(const Forest& forest);

}  // namespace grove
