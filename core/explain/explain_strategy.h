// ExplainStrategy: one way to compute the explanation of a batch, the interface every
// path-dependent explanation engine implements (treeshap/, quadrature/) and ExplainEngine
// (explain_engine.h) selects through. Engines include this header, never the engine's: the seam's
// factory table names the engines, not the other way round.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/keyed_cache.h"
#include "core/common/rows.h"
#include "core/explain/explain.h"
#include "core/explain/paths.h"
#include "core/explain/treeshap/treeshap_arith.h"
#include "core/model/forest.h"

namespace grove {

class ThreadPool;

struct ExplainEngineOptions {
  bool use_gpu = true;
  // "auto", "cpu" (cheapest CPU strategy), or a strategy name: "reference" (alias
  // "cpu_reference"), "treeshap_cpu", "treeshap_gpu", or any registered one.
  std::string strategy = "auto";
  BinPacking packing = BinPacking::kBestFitDecreasing;
  TreeShapPrecision gpu_precision = TreeShapPrecision::kAuto;  // TreeShapGpuOptions::precision
  bool measure_costs = true;         // time each strategy at creation (false: static estimates)
};

// One explanation strategy for one model. Thread-safe once created.
class ExplainStrategy {
 public:
  virtual ~ExplainStrategy() = default;
  virtual std::string name() const = 0;    // e.g. "treeshap_gpu"
  virtual std::string device() const = 0;  // "cpu" or "cuda:0", "cuda:0+1", ...
  virtual bool is_cpu() const { return device() == "cpu"; }
  // Can this strategy explain requests with these options (interactions, iteration range)?
  virtual bool Supports(const ExplainOptions& options) const = 0;
  // Predicted seconds for a batch of `rows` rows (from costs measured at creation).
  virtual double EstimateSeconds(int64_t rows, bool interactions) const = 0;
  // Host rows in, host results out (rows x ExplainWidth). Deterministic.
  virtual absl::Status Run(RowsView rows, const ExplainOptions& options,
                           MatrixView<float> out) const = 0;
  virtual int64_t DeviceBytes() const { return 0; }
  virtual std::string Describe() const = 0;
  // Prepares what this strategy needs to serve `groups` (whose path layout is `layout`) and keeps
  // it while the returned pin lives; null when it keeps nothing per grouping. Called at load for
  // a model's declared grouping (ExplainEngine::PinGroups), never under a request.
  virtual absl::StatusOr<CachePin> PinGroups(const FeatureGroups& groups,
                                             const PathLayoutPtr& layout) const {
    return CachePin();
  }
};

// What a factory gets: the model, its merged path layout (built once, shared by the strategies),
// the CPU pool and the engine options.
struct StrategyContext {
  ForestPtr forest;
  PathLayoutPtr layout;
  // `layout` was built by the engine (no caller shares it): its GPU copies count in the engine's
  // DeviceBytes; a caller's layout is the caller's to count (ResidentPathLayout::ResidentBytes).
  bool owns_layout = false;
  ThreadPool* pool = nullptr;
  ExplainEngineOptions options;
  // The path layouts of groupings (PathLayoutOptions::groups), by FeatureGroups::Key, shared by
  // the path strategies; null when `layout` is. The model's declared grouping is pinned at load
  // (ExplainEngine::PinGroups); a request's grouping is built by its first request, once however
  // many ask for it together, and kept among the kGroupedLayoutsCached most recently used.
  std::shared_ptr<KeyedCache<const PathLayout>> grouped_layouts;
};

// Unpinned grouped host layouts an engine keeps (each is about the size of the model's layout).
inline constexpr size_t kGroupedLayoutsCached = 8;

// The path layout of `options`' players: the context's own for the model's features, the cached
// grouped layout for options.groups (built on first use, single flight).
absl::StatusOr<PathLayoutPtr> LayoutFor(const StrategyContext& context,
                                        const ExplainOptions& options);

using ExplainStrategyFactory =
    absl::StatusOr<std::unique_ptr<ExplainStrategy>> (*)(const StrategyContext& context);

}  // namespace grove
