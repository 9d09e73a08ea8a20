// The checks a loader's tests run on each of its golden cases: the CPU reference's margins,
// predictions and leaves against the library's, and its SHAP values and interaction values against
// the library's (or shap's), within the corpus tolerance. Failures are gtest EXPECTs naming the
// output and the worst entry. Thread-safe.
#pragma once

#include <vector>

#include "core/model/forest.h"
#include "tests/testing/corpus.h"

namespace grove {
class ThreadPool;
}

namespace grove::testing {

// The corpus tolerance (predict_corpus_test, explain_corpus_test): |got - want| <= 1e-5 x
// max(1, |want|) for predictions, x max(1, |margin|) for explanations.
inline constexpr double kCorpusTolerance = 1e-5;

// Checks every reference the case holds (margin.csv, pred.csv, leaf.csv, contribs.csv,
// interactions.csv) against the CPU reference engines on `forest`, the case's model, fed `rows`
// (GroveRows).
void ExpectCaseMatchesLibrary(const CorpusCase& c, const Forest& forest,
                              const std::vector<float>& rows, ThreadPool* pool);

}  // namespace grove::testing
