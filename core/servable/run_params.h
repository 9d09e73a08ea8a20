// RunParams: the per-call choices of an operation beyond its rows (Servable::Run).
#pragma once

#include "core/model/feature_groups.h"
#include "core/model/outputs.h"

namespace grove {

struct RunParams {
  OutputKind kind = OutputKind::kPrediction;        // Operation::kPredict
  OutputSpace output_space = OutputSpace::kMargin;  // Operation::kInterventional
  // Boosting rounds [iteration_begin, iteration_end); iteration_end <= 0 means to the last round.
  int iteration_begin = 0;
  int iteration_end = 0;
  // The explanation operations' players (core/model/feature_groups.h): null, the model's
  // features; otherwise its groups, resolved for this model (the request's, or the model's
  // groups.json). Prediction ignores it.
  FeatureGroupsPtr groups;
};

}  // namespace grove
