// Explanation API shared by every explanation engine (CPU reference, GPU TreeShap, quadrature).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/rows.h"
#include "core/model/feature_groups.h"
#include "core/model/forest.h"
#include "core/model/outputs.h"
#include "core/model/traverse.h"

namespace grove {

class ThreadPool;

struct ExplainOptions {
  bool interactions = false;  // SHAP interaction values instead of SHAP values
  int iteration_begin = 0;    // boosting rounds [begin, end); end <= 0 means to the last round
  int iteration_end = 0;
  // The players (core/model/feature_groups.h): null, the model's features; otherwise the values
  // of its groups, G + 1 columns per output instead of F + 1 (not owned; resolved for this
  // forest; outlives the call). Served by the reference strategy (NeedsReference).
  const FeatureGroups* groups = nullptr;
  // Banzhaf values (attribution.h) of the path-dependent game instead of Shapley's: the reference
  // strategy serves them for groups; the model's features are the BanzhafEngine's.
  Attribution attribution = Attribution::kShapley;
};

// Whether a call asks for groups or Banzhaf values: the reference computes every such request;
// of the others only the path strategies serve Shapley values of groups (grouped layouts) and
// the quadrature Banzhaf engine Banzhaf values of the features. A forced strategy that does not
// support such a request hands it to the reference.
inline bool NeedsReference(const ExplainOptions& o) {
  return o.groups != nullptr || o.attribution != Attribution::kShapley;
}

// Columns per row: num_outputs * (F + 1) for SHAP values, num_outputs * (F + 1)^2 for interactions,
// laid out exactly like XGBoost's pred_contribs / pred_interactions (bias last). With `groups`,
// G (their number) in place of F.
int64_t ExplainWidth(const Forest& forest, bool interactions,
                     const FeatureGroups* groups = nullptr);

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
// With `groups`, they must be resolved for this forest (a group per feature) and `out` is as wide
// as ExplainWidth says with them.
absl::Status CheckExplainCall(const Forest& forest, RowsView rows, bool interactions,
                              MatrixView<float> out, const FeatureGroups* groups = nullptr);
// The same, then the call's rounds [iteration_begin, iteration_end) resolved (0, 0: every round;
// INVALID_ARGUMENT outside the model's rounds): the one check every CPU explainer starts with.
absl::StatusOr<IterationRange> CheckExplainCall(const Forest& forest, RowsView rows,
                                                bool interactions, int iteration_begin,
                                                int iteration_end, MatrixView<float> out,
                                                const FeatureGroups* groups = nullptr);

// CPU reference: the recursive TreeSHAP of the GPUTreeShap paper's Algorithm 1 in double precision
// (interactions by conditioning on each feature present/absent), multi-threaded over rows on `pool`.
// options.groups: the players are the groups, every split's feature relabelled by its group (a
// group met twice on a path is a repeated player, which the recursion's unwinding merges).
// options.attribution kBanzhaf: each leaf's game is a product over its path's players, whose
// Banzhaf values are closed forms (explain_cpu.cc).
// `out` must be rows.rows x ExplainWidth(). Deterministic. Thread-safe.
absl::Status ExplainCpuReference(const Forest& forest, RowsView rows, const ExplainOptions& options,
                                 MatrixView<float> out, ThreadPool* pool);

}  // namespace grove
