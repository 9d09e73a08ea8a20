// The exact CPU explanation (ExplainCpuReference, double arithmetic) of test rows, and the error
// measure every explanation test uses against it. Thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "core/explain/explain.h"
#include "core/model/forest.h"

namespace grove {
class ThreadPool;
}

namespace grove::testing {

// ExplainCpuReference of the first `num_rows` rows of `rows` (dense, forest.num_features per row;
// num_rows < 0: all of them). The output is poisoned before the call so that an entry the engine
// does not write shows up; a failed call is a test failure (EXPECT) and returns the poisoned output.
std::vector<float> ReferenceExplanation(const Forest& forest, const std::vector<float>& rows,
                                        const ExplainOptions& options, ThreadPool* pool = nullptr,
                                        int64_t num_rows = -1);
std::vector<float> ReferenceExplanation(const Forest& forest, const std::vector<float>& rows,
                                        bool interactions, ThreadPool* pool = nullptr,
                                        int iteration_begin = 0, int iteration_end = 0,
                                        int64_t num_rows = -1);

// The accuracy measure: max over entries of |got - want| / max(1, |margin|), the margin
// being the sum of `want`'s block of that row and output (SHAP values: the row's margin;
// interactions: the interaction matrix's total). Non-finite `got` entries count as infinite; a
// size mismatch is infinite.
double MaxMarginError(const std::vector<float>& got, const std::vector<float>& want, int64_t rows,
                      int num_outputs);

}  // namespace grove::testing

namespace grove {
using testing::MaxMarginError;
using testing::ReferenceExplanation;
}  // namespace grove
