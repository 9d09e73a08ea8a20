// Servable: one model version with its engines, the one object that every caller (the registry
// and serving core of groved, the CLI, groveml) asks for predictions and explanations. Callers
// never assemble engines: BuildServable makes them from a forest, an optional background data set
// and EngineOptions, and Run dispatches an Operation to the engine that serves it (prediction:
// PredictEngine; path-dependent SHAP values and interaction values: ExplainEngine; interventional
// SHAP values and interaction values over the background: InterventionalEngine; path-dependent
// Banzhaf values: BanzhafEngine, built on the first call that asks; interventional Banzhaf values:
// InterventionalEngine with Banzhaf's weights; Saabas attributions: SaabasEngine, also built on
// the first call that asks). The engines share what they can: the merged path layout is built
// once for the explanation and interventional engines.
//
// Layering: this header names no engine type, so callers above core/servable/ depend on the
// operations, not on how the engines are built (a change to an engine recompiles core/ only).
//
// Ownership: a Servable owns its engines and shares the forest (ForestPtr). `pool` (BuildServable)
// is not owned and must outlive the Servable. Callers hold a shared_ptr<const Servable> for as
// long as they use it (the registry swaps versions by swapping the pointer).
//
// Thread-safe: every method may be called concurrently. With EngineBuild::kOnFirstUse an engine is
// built by the first call that needs it, once, the others waiting for it; a failed build is
// remembered and reported by every later call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/keyed_cache.h"
#include "core/common/rows.h"
#include "core/common/run_info.h"
#include "core/model/feature_groups.h"
#include "core/model/forest.h"
#include "core/model/input_schema.h"
#include "core/servable/background.h"
#include "core/servable/engine_options.h"
#include "core/servable/operation.h"
#include "core/servable/run_params.h"

namespace grove {

class ThreadPool;
struct ServableEngines;  // servable.cc

class Servable {
 public:
  ~Servable();
  Servable(const Servable&) = delete;
  Servable& operator=(const Servable&) = delete;

  const Forest& forest() const { return *forest_; }
  const ForestPtr& forest_ptr() const { return forest_; }
  const EngineOptions& options() const { return options_; }
  // The model's feature names, their index and category coders, for converting named columns.
  const InputSchema& input_schema() const;
  // The background data set of the interventional operations: its rows (0 without one) and the
  // file it was read from ("" without one, or when given as rows).
  int64_t background_rows() const;
  const std::string& background_path() const;

  // OK when the model's trees can be explained at all (not, for example, with linear leaves),
  // without building an engine; otherwise FAILED_PRECONDITION saying why.
  absl::Status Explainable() const;
  // OK when `op` can run on this model; otherwise why not: FAILED_PRECONDITION for a model that
  // cannot be explained (linear leaves), for the interventional operations without a background,
  // or the error of the engine's build. Builds the engine when it is built on first use.
  absl::Status Available(Operation op) const;
  // Values per row of `op`'s result with `params` (PredictWidth / ExplainWidth).
  int64_t Width(Operation op, const RunParams& params) const;
  // Host rows (rows.cols == forest().num_features) in, host results out (rows.rows x Width).
  // Blocks until `out` is filled; `info` (may be null) gets where and how it ran. Available's
  // errors, or the engine's (INVALID_ARGUMENT for shapes and iteration ranges).
  absl::Status Run(Operation op, const RunParams& params, RowsView rows, MatrixView<float> out,
                   RunInfo* info) const;
  // One row of a prediction on the calling thread (PredictEngine::PredictRow): no pool hop, no
  // device round trip, no allocation for models of up to 64 outputs.
  absl::Status PredictRow(const float* row, const RunParams& params, float* out) const;

  // The engine that serves `op` ("unavailable: <why>" when none can), for logs, metadata and
  // `grove inspect`. Builds the engine when it is built on first use.
  std::string Describe(Operation op) const;
  // The merged path layout's statistics ("" when the model cannot be explained).
  std::string PathLayoutStats() const;
  // Bytes of derived layouts resident on devices, over the engines built so far (a layout the
  // engines share counted once).
  int64_t DeviceBytes() const;

  // Prepares the path-dependent explanation of `groups` now (the grouped path layout; its device
  // copy when a GPU explains the model) and keeps it while the returned pin lives: a model's
  // declared grouping (groups.json) is pinned at load, so no request builds it and requests naming
  // other groupings never evict it. Builds the explanation engine when it is built on first use.
  // A null pin when the model cannot be explained or its explanation engine failed (the
  // operations answer why); the grouped layout's error otherwise.
  absl::StatusOr<CachePin> PinGroups(const FeatureGroups& groups) const;
  // The grouped path layouts the explanation engine holds, and how many it built (zeros before
  // the engine is built).
  KeyedCacheStats GroupedLayouts() const;

  // The same model and engines with another background data set (null: none): the prediction and
  // path-dependent engines and the path layout are shared, the interventional engine is new.
  // The background's errors name `background->path` when it has one.
  absl::StatusOr<std::shared_ptr<const Servable>> WithBackground(
      std::shared_ptr<const Background> background) const;

 private:
  friend absl::StatusOr<std::shared_ptr<const Servable>> BuildServable(
      ForestPtr forest, std::shared_ptr<const Background> background,
      const EngineOptions& options, ThreadPool* pool);
  Servable(ForestPtr forest, std::shared_ptr<const Background> background, EngineOptions options,
           std::shared_ptr<ServableEngines> engines);
  // Builds the interventional engine now (kAtLoad).
  absl::Status BuildInterventional() const;

  ForestPtr forest_;
  std::shared_ptr<const Background> background_;  // null: none
  EngineOptions options_;
  // The engines (built now or on first use); shared with the servables WithBackground makes,
  // except the interventional engine, which is per background.
  std::shared_ptr<ServableEngines> engines_;
  struct Interventional;
  std::unique_ptr<Interventional> interventional_;
};

using ServablePtr = std::shared_ptr<const Servable>;

// Builds the servable of `forest`: checks `options` (INVALID_ARGUMENT for an unknown strategy
// name, FAILED_PRECONDITION for Device::kGpu in a build without CUDA engines) and, with
// EngineBuild::kAtLoad, builds every engine now. Then an engine that cannot serve the model
// leaves its operations unavailable (Available says why) when the model still serves others: a
// model that cannot be explained still predicts. A prediction engine that cannot be built, or a
// background the model cannot be explained over, fails the build.
absl::StatusOr<ServablePtr> BuildServable(ForestPtr forest,
                                          std::shared_ptr<const Background> background,
                                          const EngineOptions& options, ThreadPool* pool);

}  // namespace grove
