// Explanation API shared by every explanation engine (CPU reference, GPU TreeShap, quadrature).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/rows.h"
#include "core/model/forest.h"
#include "core/model/traverse.h"

namespace grove {

class ThreadPool;

struct ExplainOptions {
  bool interactions = false;  // SHAP interaction values instead of SHAP values
  int iteration_begin = 0;    // boosting rounds [begin, end); end <= 0 means to the last round
  int iteration_end = 0;
};

// Columns per row: num_outputs * (F + 1) for SHAP values, num_outputs * (F + 1)^2 for interactions,
// laid out exactly like XGBoost's pred_contribs / pred_interactions (bias last).
int64_t ExplainWidth(const Forest& forest, bool interactions);

// Rounds one row's double accumulators to float into `out` (shared by the CPU explainers): the
// SHAP values `phi` (num_outputs x f1) with each output's bias column set to bias[k]; or, with
// `interactions` (num_outputs x f1 x f1, off-diagonal entries filled), the interaction matrices
// completed: M[i][i] = phi_i - sum_{j != i} M[i][j], M[F][F] = bias[k]. Modifies the buffers.
void StoreExplainedRow(const std::vector<double>& bias, int64_t f1, double* phi,
                       double* interactions, float* out);

// Refuses what no engine can explain (LightGBM linear trees: FAILED_PRECONDITION, as LightGBM does).
absl::Status CheckExplainable(const Forest& forest);

// Validates the shapes of an explanation call before any work: an explainable model (as above),
// rows of forest.num_features columns, `out` of rows.rows x ExplainWidth(forest, interactions),
// well-formed views. INVALID_ARGUMENT naming what is wrong.
absl::Status CheckExplainCall(const Forest& forest, RowsView rows, bool interactions,
                              MatrixView<float> out);
// The same, then the call's rounds [iteration_begin, iteration_end) resolved (0, 0: every round;
// INVALID_ARGUMENT outside the model's rounds): the one check every CPU explainer starts with.
absl::StatusOr<IterationRange> CheckExplainCall(const Forest& forest, RowsView rows,
                                                bool interactions, int iteration_begin,
                                                int iteration_end, MatrixView<float> out);

// CPU reference: the recursive TreeSHAP of the GPUTreeShap paper's Algorithm 1 in double precision
// (interactions by conditioning on each feature present/absent), multi-threaded over rows on `pool`.
// `out` must be rows.rows x ExplainWidth(). Deterministic. Thread-safe.
absl::Status ExplainCpuReference(const Forest& forest, RowsView rows, const ExplainOptions& options,
                                 MatrixView<float> out, ThreadPool* pool);

}  // namespace grove
