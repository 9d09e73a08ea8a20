// Interventional SHAP values: the expectation over a background data set the caller chooses
// (shap's TreeExplainer(model, data=background, feature_perturbation="interventional"),
// GPUTreeShap's GPUTreeShapInterventional), instead of the training covers of path-dependent
// TreeSHAP (explain.h).
//
// Definitions. For a row x, a background set B of N rows and a feature subset S, x_S z_S̄ is the
// hybrid row taking S's values from x and the others from z. The value function of output k is
//   v_k(S) = 1/N sum_{z in B} out_k(x_S z_S̄)
// where out is the margin (OutputSpace::kMargin) or the link of the margin (kProbability). The SHAP
// values are the Shapley values of v; the bias column is v_k({}) = mean over B of out_k(z), so that
// every output block sums to out_k(x) (additivity). Layout as ExplainWidth(forest, false): per
// output, F values then the bias (XGBoost pred_contribs order).
//
// kProbabilityLinearized is shap's model_output="probability" (shap/cext/tree_shap.h,
// dense_independent): for each pair (x, z) the margin Shapley values are multiplied by
// (g(f_k(x)) - g(f_k(z))) / (f_k(x) - f_k(z)) (1 when the margins are equal) and then averaged.
// It is additive and linear in cost, but it is not the Shapley value of the probability game;
// kProbability is (exact, exponential in the features where x and z differ, see below).
//
// Trees: the same routing as every engine (core/model/decision.h: numeric and categorical splits,
// missing values), dart weights, vector leaves, iteration ranges. LightGBM average_output divides
// the margin by the iterations used before the link, as PredictCpu does; the margin space is the
// raw (summed) score, as LightGBM's pred_contrib.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/common/hd.h"
#include "core/common/rows.h"
#include "core/explain/attribution.h"
#include "core/model/feature_groups.h"
#include "core/model/forest.h"
#include "core/model/outputs.h"
#include "core/model/transform.h"

namespace grove {

class ThreadPool;

struct InterventionalOptions {
  OutputSpace output_space = OutputSpace::kMargin;
  // Shapley interaction values instead of SHAP values (reference, CPU path form and GPU; the
  // linearized probability space: reference only), laid out as
  // ExplainWidth(forest, true) (XGBoost pred_interactions): per output M[i][j] (i != j) is half
  // the Shapley interaction index of the value function below (M[i][j] + M[j][i] is the index),
  // M[i][i] = phi_i - sum_{j != i} M[i][j], M[F][F] = the bias, M[i][F] = M[F][i] = 0; so rows
  // of M sum to the SHAP values and each block to the output. Every output space (linearized:
  // each pair's margin interactions times its factor).
  bool interactions = false;
  int iteration_begin = 0;  // boosting rounds [begin, end); end <= 0 means to the last round
  int iteration_end = 0;
  // Banzhaf values (and interaction values) of the same value function instead of Shapley's
  // (attribution.h): the same layout and bias; not additive. Every output space (linearized:
  // each pair's margin values times its factor); the CPU strategies only.
  Attribution attribution = Attribution::kShapley;
  // The players (core/model/feature_groups.h): null, the model's features; otherwise its groups:
  // v(S) takes the members of S's groups from x, G + 1 columns per output (ExplainWidth with
  // them). Not owned; resolved for this forest. Every strategy: the path forms explain them on
  // the grouping's grouped layout (interventional_paths.h).
  const FeatureGroups* groups = nullptr;
};

// kProbability enumerates, per (row, background row) pair, every subset of the features on which
// the trees send x and z different ways; pairs differing in more features than this are refused
// (INVALID_ARGUMENT naming the pair), since 2^d hybrid margins are needed for them.
inline constexpr int kMaxExactDifferingFeatures = 16;

// The refusal of a pair over that limit (every strategy's words): INVALID_ARGUMENT naming the row,
// the background row and d.
absl::Status ExactPairTooWideError(int64_t row, int64_t background_row, int d);

// Weight of a reachable leaf's value in the SHAP value of a feature the hybrid takes from x (the
// leaf needs a >= 1 features from x and b from z): (a-1)! b! / (a+b)!. The weight of a feature
// taken from z is -InterventionalWeight(b, a). Exact to rounding for any a, b (no factorials).
GROVE_HD double InterventionalWeight(int a, int b) {
  return AttributionWeight(Attribution::kShapley, a, b);
}

// shap's factor of the linearized output space for one pair and output: (g(m_x) - g(m_z)) /
// (m_x - m_z) with g the link of p (margins divided by p.average_divisor first), and 1 where the
// margins tie (shap's rule). A tie is within 1e-12 relative: the GPU sums margins in fixed point and
// the CPU in double, which may differ in the last bits, and the factor of two margins a few bits
// apart is (almost) all rounding in either.
GROVE_HD double LinearizedFactor(const TransformParams& p, double mx, double mz) {
  const double d = mx - mz;
  const double size = fmax(1.0, fmax(fabs(mx), fabs(mz)));
  if (fabs(d) <= 1e-12 * size) return 1.0;
  return (TransformScalar(p, mx / p.average_divisor) - TransformScalar(p, mz / p.average_divisor)) /
         d;
}

// A background data set for `forest`: >= 1 row of forest.num_features columns, a well-formed
// view (NaN = missing, as in rows). INVALID_ARGUMENT naming what is wrong.
absl::Status CheckBackground(const Forest& forest, RowsView background);

// Validates a call before any work: an explainable model, `rows` of forest.num_features columns,
// `out` of rows.rows x ExplainWidth(forest, options.interactions, options.groups), a valid
// iteration range, and
// CheckOutputSpace. INVALID_ARGUMENT naming what is wrong.
absl::Status CheckInterventionalCall(const Forest& forest, RowsView rows,
                                     const InterventionalOptions& options, MatrixView<float> out);


// Whether `space` is the exact probability space proper for this model: kProbability with a
// link other than the identity (an identity link's probability is the margin over the average
// divisor, which the margin's forms compute).
bool IsExactSpace(const Forest& forest, OutputSpace space);


// Adds to margin[0..num_outputs) the base margin and the weighted leaf values `row` reaches in
// `trees`, in that order, in double (the margins of the reference and of the linearized space).
void AddInterventionalMargin(const Forest& forest, const std::vector<int32_t>& trees,
                             const float* row, double* margin);

// CPU reference in double: for every (row, background row, tree) the recursion of Laberge &
// Pequignot ("Understanding interventional TreeSHAP", 2022): walk the tree; where x and z go the
// same way follow it, where they part branch on whether the split's feature comes from x or z
// (each feature keeps one side along a path); a reached leaf with a features from x and b from z
// adds value * InterventionalWeight to each. With options.groups the same walk over players: a
// split's feature stands for its group, which keeps one side along a path whichever member is
// split on (the game over groups). Cost per (row, background row, tree): the nodes the
// hybrids reach. Multi-threaded over rows on `pool` (null: the calling thread). Deterministic.
// Thread-safe.
absl::Status ExplainInterventionalCpu(const Forest& forest, RowsView background, RowsView rows,
                                      const InterventionalOptions& options, MatrixView<float> out,
                                      ThreadPool* pool);

}  // namespace grove
