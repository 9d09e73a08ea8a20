// Shared pieces of the interventional SHAP tests (CPU paths strategy, engine, GPU kernel): the
// seeded forests they all run, the CPU reference as the oracle, and the comparison.
//
// Thread-safe (pure functions).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/explain/interventional/interventional.h"
#include "core/explain/interventional/interventional_paths.h"
#include "core/explain/interventional_engine.h"
#include "core/explain/paths.h"
#include "tests/testing/corpus.h"
#include "core/model/forest.h"
#include "tests/testing/random_forest.h"

namespace grove::testing {

// Seeded forests covering numeric and categorical splits, LightGBM rules (missing types, NaN as
// zero, truncated categories), repeated features on a path, multi-output scalar trees, vector
// leaves, dart-like tree weights and deep trees (paths of up to 31 distinct features).
std::vector<RandomForestOptions> InterventionalForestOptions();

// The links a seeded forest is explained with in a probability space: sigmoid and exp (each
// output its own), and for the exact space softmax instead on multi-output forests.
std::vector<Link> ProbabilityLinks(const RandomForestOptions& options, OutputSpace space);

// The links a seeded forest is explained with in some space: the identity, then those of
// ProbabilityLinks of either probability space, each once.
std::vector<Link> AllLinks(const RandomForestOptions& options);

// An output space and whether interaction values are asked.
struct SpaceCase {
  OutputSpace space;
  bool interactions;
};
// What the path forms serve for a forest of `link`: values and interaction values of the margin
// and probability spaces, and the linearized space's values (not under softmax, which it does
// not add up under).
std::vector<SpaceCase> PathFormSpaceCases(Link link);

// An InterventionalEngine of `forest` and `background` (row-major) with `strategy` forced (or
// "auto"), on the GPU where `use_gpu`; creation errors fail the test (null).
std::unique_ptr<InterventionalEngine> MakeInterventionalEngine(ForestPtr forest,
                                                               const std::vector<float>& background,
                                                               const std::string& strategy,
                                                               bool use_gpu, ThreadPool* pool);

// `engine`'s explanation of `rows` (row-major; its output poisoned with NaNs first), or its error.
absl::StatusOr<std::vector<float>> ExplainWithEngine(const InterventionalEngine& engine,
                                                     const Forest& forest,
                                                     const std::vector<float>& rows,
                                                     const InterventionalOptions& options,
                                                     RunInfo* info);

// The singleton grouping of `forest`'s features, explained by `engine` in each of
// PathFormSpaceCases(link), is the features' explanation bit for bit (the same layout, no group
// members), on a second call too, served by `strategy` (RunInfo's); the features' values are the
// same after it.
void ExpectSingletonsAreTheFeatures(const InterventionalEngine& engine, const Forest& forest,
                                    const std::vector<float>& rows, Link link,
                                    const std::string& strategy);

// A corpus case split for interventional tests: the model, `background` = the first rows of X.csv
// and `rows` = the next ones (GroveRows: doubles routed as the library routes them).
struct InterventionalCorpusCase {
  CorpusCase c;
  ForestPtr forest;
  std::vector<float> background;
  std::vector<float> rows;
};

// Every corpus case that can be explained (no linear leaves), has background_rows + explained_rows
// rows and, when max_features > 0, at most that many features. Load errors fail the test.
std::vector<InterventionalCorpusCase> InterventionalCorpus(int64_t background_rows,
                                                           int64_t explained_rows,
                                                           int max_features = 0);

// The layouts of the path forms for `forest` and `background` (row-major, forest.num_features
// columns), over `pool` (may be null); build errors fail the test (null layouts).
struct InterventionalLayouts {
  PathLayoutPtr layout;
  InterventionalLayoutPtr il;
};
InterventionalLayouts BuildInterventionalLayouts(const Forest& forest,
                                                 const std::vector<float>& background,
                                                 ThreadPool* pool);

// The probability spaces' LinearizedLayout of `layouts` (built from `forest` and `background`);
// build errors fail the test (null).
LinearizedLayoutPtr BuildLinearized(const Forest& forest, const InterventionalLayouts& layouts,
                                    const std::vector<float>& background);

// The interaction calls the path forms (CPU twin, GPU kernel) are checked with: Shapley and
// Banzhaf, over every round and over rounds [1, 3); Describe names one in failures.
std::vector<InterventionalOptions> InteractionCases();
std::string Describe(const InterventionalOptions& options);

// ExplainInterventionalCpu of `rows` against `background` (both row-major, forest.num_features
// columns), or its error.
absl::StatusOr<std::vector<float>> InterventionalReferenceOrStatus(
    const Forest& forest, const std::vector<float>& rows, const std::vector<float>& background,
    const InterventionalOptions& options = {});

// The same; the test fails (and the result is empty) when it does not succeed.
std::vector<float> InterventionalReference(const Forest& forest, const std::vector<float>& rows,
                                           const std::vector<float>& background,
                                           const InterventionalOptions& options = {});

// Another engine's result `got` against the reference's: the same error, or values within `tol`
// (ExpectNearReference). Returns whether values were compared.
bool ExpectLikeTheReference(const absl::StatusOr<std::vector<float>>& got, const Forest& forest,
                            const std::vector<float>& rows, const std::vector<float>& background,
                            const InterventionalOptions& options, double tol,
                            const std::string& what);

// Expects |got - want| <= tol * max(1, |want|) entry by entry (and equal sizes); `what` names the
// case in failures.
void ExpectNearReference(const std::vector<float>& got, const std::vector<float>& want, double tol,
                         const std::string& what);

}  // namespace grove::testing
