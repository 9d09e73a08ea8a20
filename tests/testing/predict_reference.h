// The CPU reference prediction (PredictCpu) of test rows, and the error measure the prediction
// tests use against it. Thread-safe.
#pragma once

#include <vector>

#include "core/model/forest.h"
#include "core/predict/predict.h"

namespace grove {
class ThreadPool;
}

namespace grove::testing {

// PredictOptions for `kind` over boosting rounds [begin, end) (end <= 0: to the last round).
PredictOptions Kind(OutputKind kind, int begin = 0, int end = 0);

// PredictCpu of `rows` (dense, forest.num_features per row). The output is poisoned before the
// call so that an entry the predictor does not write shows up; a failed call is a test failure
// (EXPECT) and returns the poisoned output.
std::vector<float> ReferencePrediction(const Forest& forest, const std::vector<float>& rows,
                                       const PredictOptions& options, ThreadPool* pool = nullptr);

// max over entries of |got - want| / max(1, |want|); NaN must match NaN; a size or NaN mismatch is
// infinite.
double MaxRelativeError(const std::vector<float>& got, const std::vector<float>& want);

}  // namespace grove::testing

namespace grove {
using testing::Kind;
using testing::MaxRelativeError;
using testing::ReferencePrediction;
}  // namespace grove
