// InterventionalEngine: one model's interventional SHAP engine with its background data set, built
// once at model load (or when the background changes) and shared by every request.
//
// ## Strategies (the seam)
// A strategy is one way to explain a batch (interventional.h for the definitions):
//   reference   ExplainInterventionalCpu: every output space, interactions, every model (the
//               oracle);
//   paths_cpu   ExplainInterventionalPathsCpu: the bitmask form over deduplicated background
//               masks, SHAP values of every output space, models without long paths; interaction
//               values of the margin space (ExplainInterventionalInteractionsPathsCpu) and of the
//               exact probability space;
//   gpu         InterventionalGpu: the same form on the GPU.
// Shapley and Banzhaf values alike. Feature groups (InterventionalOptions::groups) run on the
// fast forms too: each grouping gets its grouped path layout (PathLayoutOptions::groups), the
// background's masks on it and, for the GPU, their device copy, built on its first request and
// kept for the next (a model's groups.json and a few groupings of requests).
// InterventionalStrategyId is the one table of them (InterventionalStrategyName); each has a
// factory in kInterventionalFactories (interventional_engine.cc), which returns nullptr when the
// strategy cannot serve the model (no GPU, long paths). At Explain time a forced strategy runs or
// answers FAILED_PRECONDITION (a request with feature groups that it does not serve, such as the
// linearized space's interaction values, goes to the reference instead); "auto" takes the first strategy in table order (gpu, paths_cpu,
// reference) whose Supports(options) is true: the fast forms for SHAP values and for interaction
// values but the linearized space's, which the reference computes. (The GPU
// first: a request pays a launch and copies there, tens of microseconds, while one row on the
// CPU form walks every path's masks: about a millisecond for the paper's medium models.) One
// exception (PrefersCpuForExact): the exact probability space with few rows per call goes to the
// CPU path form, since the GPU gives each row one warp that walks the background rows in turn.
//
// Preprocessing kept for the engine's life: the model's PathLayout and the background's
// InterventionalLayout (per-path masks), uploaded once by the GPU strategy; the same per grouping
// of features asked for (kGroupedFormsCached of them, least recently used out; a grouping's
// first request pays the background's preprocessing, and in the probability spaces its own
// LinearizedLayout, as large as the features').
// Thread-safe: Explain may be called concurrently; it blocks until `out` is filled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/common/keyed_cache.h"
#include "core/common/rows.h"
#include "core/common/run_info.h"
#include "core/explain/interventional/interventional.h"
#include "core/explain/interventional/interventional_paths.h"
#include "core/explain/paths.h"
#include "core/model/forest.h"

namespace grove {

class ThreadPool;

enum class InterventionalStrategyId : int { kGpu = 0, kPathsCpu = 1, kReference = 2 };
inline constexpr int kNumInterventionalStrategies = 3;
// "gpu", "paths_cpu", "reference".
const char* InterventionalStrategyName(InterventionalStrategyId id);
// A name above; INVALID_ARGUMENT naming the accepted ones otherwise.
absl::StatusOr<InterventionalStrategyId> ParseInterventionalStrategy(absl::string_view name);

// Whether "auto" sends a call of `rows` rows in the exact probability space to the CPU path form
// (run over `threads` threads) rather than the GPU: below kExactCpuRowsPerThread rows per thread.
// Both engines' costs scale with the work per (row, background row) pair, so the crossover is a
// rows count per CPU thread (the timings: docs/benchmarks/interventional.md).
inline constexpr int64_t kExactCpuRowsPerThread = 16;
bool PrefersCpuForExact(int64_t rows, int threads);

// Groupings of features whose forms (and device copies) an engine keeps: a model's groups.json
// and a few groupings of requests.
inline constexpr size_t kGroupedFormsCached = 4;

struct InterventionalEngineOptions {
  bool use_gpu = true;
  std::string strategy = "auto";  // "auto" or a strategy name
  // The fast forms serve the probability spaces while their layout (LinearizedLayout: paths x
  // background rows x 2 bytes) stays within this; beyond, the reference does (a large model with
  // a 10,000-row background would need gigabytes).
  int64_t max_linearized_layout_bytes = int64_t{1} << 30;
};

// The probability spaces' LinearizedLayout of one engine, built on the first request that
// needs it (paths x background rows x 2 bytes; most servers never ask) and shared by its
// strategies. Thread-safe.
class LazyLinearizedLayout;

// The bitmask form of one set of players: the path layout (the model's, or the grouped layout of
// a grouping of features), the background's masks on it, and its linearized layout (built on the
// first request that needs it). Immutable but for that; shared by the strategies.
struct PlayerForms {
  PathLayoutPtr layout;
  InterventionalLayoutPtr background_layout;
  std::shared_ptr<LazyLinearizedLayout> linearized;
};

// What a factory gets. The background rows are the engine's own copy.
struct InterventionalContext {
  ForestPtr forest;
  PathLayoutPtr layout;  // null when the model cannot be explained (linear leaves)
  // `layout` was built by the engine (no caller shares it): its GPU copies count in the engine's
  // DeviceBytes; a caller's layout is the caller's to count (ResidentPathLayout::ResidentBytes).
  bool owns_layout = false;
  InterventionalLayoutPtr background_layout;  // null with layout
  std::shared_ptr<const std::vector<float>> background;  // rows x num_features
  int64_t background_rows = 0;
  ThreadPool* pool = nullptr;
  int64_t max_linearized_layout_bytes = 0;  // InterventionalEngineOptions'
  // The features' forms (layout, background_layout and their linearized layout); with layout.
  std::shared_ptr<const PlayerForms> features;
  // The forms of the groupings explained so far, by FeatureGroups::Key; with layout.
  std::shared_ptr<KeyedCache<const PlayerForms>> grouped_forms;
};

// The forms of `options`' players: the context's own for the model's features, the grouping's
// (built on first use, then cached) for options.groups. Errors of the grouped layout's build.
absl::StatusOr<std::shared_ptr<const PlayerForms>> FormsFor(const InterventionalContext& c,
                                                           const InterventionalOptions& options);

// One strategy for one model and background. Thread-safe once created.
class InterventionalStrategy {
 public:
  virtual ~InterventionalStrategy() = default;
  virtual InterventionalStrategyId id() const = 0;
  const char* name() const { return InterventionalStrategyName(id()); }
  virtual std::string device() const { return "cpu"; }
  virtual bool Supports(const InterventionalOptions& options) const = 0;
  // Host rows in, host results out (rows x ExplainWidth(forest, false)). Deterministic.
  virtual absl::Status Run(RowsView rows, const InterventionalOptions& options,
                           MatrixView<float> out) const = 0;
  virtual int64_t DeviceBytes() const { return 0; }
};

class InterventionalEngine {
 public:
  // Copies and preprocesses `background` (CheckBackground) for `forest`. `layout` may be null
  // (built here). INVALID_ARGUMENT for a bad background or an unknown strategy name;
  // FAILED_PRECONDITION when a forced strategy cannot serve the model.
  static absl::StatusOr<std::unique_ptr<InterventionalEngine>> Create(
      ForestPtr forest, PathLayoutPtr layout, RowsView background,
      const InterventionalEngineOptions& options, ThreadPool* pool);

  // `out` is rows.rows x ExplainWidth(forest, false). CheckInterventionalCall's errors, or
  // FAILED_PRECONDITION when the forced strategy does not support `options`.
  absl::Status Explain(RowsView rows, const InterventionalOptions& options, MatrixView<float> out,
                       RunInfo* info) const;

  int64_t background_rows() const { return context_.background_rows; }
  int64_t DeviceBytes() const;
  // Strategies, background size and preprocessing, e.g. for `grove inspect` and logs.
  std::string Describe() const;
  std::vector<std::string> StrategyNames() const;

 private:
  InterventionalEngine(InterventionalContext context,
                       std::vector<std::unique_ptr<InterventionalStrategy>> strategies,
                       bool forced,
                       std::unique_ptr<InterventionalStrategy> reference);

  InterventionalContext context_;
  std::vector<std::unique_ptr<InterventionalStrategy>> strategies_;  // table order
  bool forced_ = false;
  // With a forced strategy other than the reference: the reference, which serves the requests
  // with feature groups that the forced strategy does not; null otherwise.
  std::unique_ptr<InterventionalStrategy> reference_;
};

}  // namespace grove
