// Saabas attributions by their definition, the independent oracle of the Saabas tests: each
// node's expected value summed over the leaves below it (the product of the cover fractions down
// to each, 0 under a node of cover 0), the row's path walked node by node over the Forest with
// the shared decision (core/model/decision.h). Exponential in nothing, but recomputes every
// expected value on every step: for small forests only.
//
// Thread-safe (pure functions).
#pragma once

#include <vector>

#include "core/model/feature_groups.h"
#include "core/model/forest.h"

namespace grove::testing {

// One row's attributions, laid out as SHAP values: per output, a value per player (the features,
// or `groups` when not null) then the bias (base margin plus the weighted root expected values),
// over the trees of rounds [iteration_begin, iteration_end) (end <= 0: to the last).
std::vector<double> SaabasByDefinition(const Forest& forest, const float* row,
                                       int iteration_begin, int iteration_end,
                                       const FeatureGroups* groups = nullptr);

}  // namespace grove::testing
