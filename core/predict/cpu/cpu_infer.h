// The CPU prediction engine: blocks of rows walked level by level through groups of trees over a
// CpuForest (cpu_walk.h), margins accumulated per row in double in the model's tree order and
// rounded to float once -- the reference's arithmetic (PredictCpu), so the results are the same
// leaves and the same sums, bit for bit.
//
// Thread safety: every function is thread-safe; the CpuForest is read only.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "core/common/rows.h"
#include "core/predict/cpu/cpu_forest.h"
#include "core/predict/predict.h"

namespace grove {
class ThreadPool;
}

namespace grove::cpu {

// Outputs of a model up to which PredictRow keeps its margins on the stack.
inline constexpr int kRowStackOutputs = 64;

// `rows` through the engine on `pool` (nullptr: the calling thread), `out` rows.rows x
// PredictWidth(forest, options). Blocks of rows are split between threads; each row is computed by
// one thread in a fixed order: deterministic. (The split follows a timing taken at load, and so
// can differ between loads; every block shape gives the same bits, so the results do not.) Same
// errors as PredictCpu. Each thread keeps its block workspace between calls (thread_local,
// growing to the largest model it has served), so a call allocates nothing after a thread's
// first.
absl::Status Predict(const CpuForest& forest, RowsView rows, const PredictOptions& options,
                     MatrixView<float> out, ThreadPool* pool);

// One row on the calling thread, for callers that embed the engine and answer a row at a time:
// no thread-pool hop, and no allocation when the model has at most kRowStackOutputs outputs and
// its trees are in boosting-round order (every loader writes them so). `row` holds the model's
// num_features values; `out` PredictWidth values. Same errors as PredictCpu.
absl::Status PredictRow(const CpuForest& forest, const float* row, const PredictOptions& options,
                        float* out);

// Rows per chunk Predict hands the pool at least (a multiple of the vector walk's 16 rows): a
// batch of 1,000 rows of a large model is then split between up to 31 chunks, which keeps every
// thread of a 16-thread pool busy to the end of the call.
inline constexpr int64_t kPredictGrain = 32;
// Single-threaded seconds of work per chunk at least (CpuForest::row_seconds x rows): a smaller
// model's small batch takes fewer, larger chunks.
inline constexpr double kMinChunkSeconds = 5e-6;

}  // namespace grove::cpu
