// Additivity residuals of explanation results: how far each row's values and bias are from the
// model's output for the row, so that a caller need not trust that they add up. Every protocol
// that offers them computes them here, from the float32 results it returns.
#pragma once

#include <cstdint>

namespace grove {

// A residual counts as exceeded above this times max(1, |output|): the tolerance every exact
// engine is held to.
inline constexpr double kResidualBound = 1e-5;

// How residuals are computed (the response's arithmetic field).
inline constexpr const char* kResidualArithmetic =
    "sum in double of the float32 values and bias (every entry of the interaction matrix for "
    "interaction values), minus the float32 output of the model's prediction engine (margin, or "
    "the transformed output in the probability spaces)";

// values: n rows of num_outputs blocks of (num_features + 1) floats (SHAP values layout, bias
// last); outputs: n x num_outputs. Writes residuals (n x num_outputs, float32 of the double
// difference) and returns the rows where some output's residual exceeds kResidualBound x
// max(1, |output|) (a non-finite residual counts as exceeded).
int64_t AdditivityResiduals(const float* values, int64_t n, int num_outputs, int num_features,
                            const float* outputs, float* residuals);

// The same for interaction matrices (n rows of num_outputs blocks of (num_features + 1)^2 floats,
// XGBoost pred_interactions layout): a block's entries sum to its values and bias, since its rows
// sum to the values and M[F][F] is the bias, so every entry is summed.
int64_t InteractionResiduals(const float* interactions, int64_t n, int num_outputs,
                             int num_features, const float* outputs, float* residuals);

}  // namespace grove
