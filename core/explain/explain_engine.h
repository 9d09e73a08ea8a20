// ExplainEngine: one model's explanation engine, built once at model load.
//
// Owns the model's derived layouts (merged path layout; GPU copies of it when a GPU is there) and
// picks, per call, which explanation strategy runs the batch. Thread-safe: Explain may be called
// concurrently; it blocks until `out` is filled.
//
// ## Strategies (the seam)
// A strategy is one way to compute the explanation of a batch (CPU reference recursion, CPU path
// algorithm, GPU warp kernels, quadrature, ...). Each implements ExplainStrategy (explain_strategy.h) and is made
// by a factory `ExplainStrategyFactory` from the model's StrategyContext at engine creation. The
// factories live in one table in explain_engine.cc (kStrategyFactories); adding a strategy is one
// line there (plus its files), e.g.
//   {"quadrature_gpu", &MakeQuadratureGpuExplainStrategy},
// A factory returns nullptr (or an error, logged and skipped) when the strategy cannot serve the
// model at all (no GPU, unsupported model). At Explain time:
//  * ExplainEngineOptions::strategy names a strategy: only that one runs (FAILED_PRECONDITION when
//    it does not support the request), except for groups and Banzhaf values (NeedsReference),
//    which the reference serves when the forced strategy does not (treeshap_gpu forced: Shapley
//    values of a grouping it holds no device copy of run on treeshap_cpu); "cpu" means the
//    cheapest CPU strategy.
//  * "auto": among strategies whose Supports(options) is true, the lowest EstimateSeconds(rows,
//    interactions) wins. Estimates come from costs each strategy measured at creation; RunInfo
//    records the device, the strategy and the predicted times that decided it.
// Strategies must be exact (the CPU reference's results within 1e-5 x max(1, |margin|)).
//
// ## Feature groups
// The path strategies explain groups through a grouped path layout (PathLayoutOptions::groups). A
// model's declared grouping (groups.json) is prepared at load by PinGroups: its host layout and,
// with a GPU, the device copy treeshap_gpu explains it with, kept while the pin lives, never
// evicted. A grouping that only requests name is served on the CPU (treeshap_cpu; the reference
// for what the path strategies do not serve) with a host layout built by the first request that
// names it, once however many ask for it together, and kept among the kGroupedLayoutsCached most
// recently used: a host layout costs about one pass over the model's paths, while a device copy
// (streams, device buffers, an upload of the layout) is what a request must never build and what
// a few ad-hoc groupings could exhaust device memory with.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/common/keyed_cache.h"
#include "core/common/rows.h"
#include "core/common/run_info.h"
#include "core/explain/explain.h"
#include "core/explain/explain_strategy.h"
#include "core/explain/paths.h"
#include "core/model/forest.h"

namespace grove {

class ThreadPool;

// Built-in factories (explain_engine.cc).
absl::StatusOr<std::unique_ptr<ExplainStrategy>> MakeReferenceStrategy(const StrategyContext& c);
absl::StatusOr<std::unique_ptr<ExplainStrategy>> MakeTreeShapCpuStrategy(const StrategyContext& c);
absl::StatusOr<std::unique_ptr<ExplainStrategy>> MakeTreeShapGpuStrategy(const StrategyContext& c);

// OK when `name` is an explanation strategy option: "auto", "cpu", "cpu_reference" or a strategy
// of the table; INVALID_ARGUMENT naming the accepted ones otherwise.
absl::Status CheckExplainStrategyName(absl::string_view name);

class ExplainEngine {
 public:
  virtual ~ExplainEngine() = default;
  // `layout`: the model's merged path layout when the caller has built it (shared with an
  // InterventionalEngine); null: built here with options.packing.
  static absl::StatusOr<std::unique_ptr<ExplainEngine>> Create(ForestPtr forest,
                                                                const ExplainEngineOptions& options,
                                                                ThreadPool* pool,
                                                                PathLayoutPtr layout = nullptr);
  // Host rows in, host results out. `out` is rows.rows x ExplainWidth(forest, interactions).
  virtual absl::Status Explain(RowsView rows, const ExplainOptions& options, MatrixView<float> out,
                               RunInfo* info) const = 0;
  virtual std::string Describe() const = 0;
  virtual int64_t DeviceBytes() const = 0;
  // Names of the strategies available for this model, in registration order.
  virtual std::vector<std::string> StrategyNames() const = 0;
  // The merged path layout (its stats are what `grove inspect` prints).
  virtual PathLayoutPtr layout() const = 0;
  // Builds what the strategies need to explain `groups` (the grouped path layout; its device copy
  // when treeshap_gpu serves the model) now, and keeps it while the returned pin lives: requests
  // with this grouping then build nothing. Blocks for the build (seconds for a large model on a
  // GPU). FAILED_PRECONDITION when the model cannot be explained; the layout's or the device's
  // errors otherwise.
  virtual absl::StatusOr<CachePin> PinGroups(const FeatureGroups& groups) const = 0;
  // The grouped host layouts held (pinned, cached) and built so far.
  virtual KeyedCacheStats grouped_layouts() const = 0;
};

}  // namespace grove
