// BanzhafEngine: path-dependent Banzhaf values and Banzhaf interaction values of one model
// (attribution.h for the definitions), built once and shared by every request.
//
// Banzhaf values of the path-dependent value function are the quadrature integrand evaluated at
// t = 1/2 instead of integrated (quadrature.h, AttributionRule): the engine is the quadrature
// strategies (CPU, and GPU where one is visible) over a QuadratureModel built with Banzhaf's
// rule, so the per-path arithmetic, the tree recursion and the GPU kernels are those of
// path-dependent SHAP, and the output layout and the bias (the expected value) too. The values are
// not additive: a row's values and bias do not in general sum to its margin.
//
// Per call the strategy with the lower estimated time runs (costs measured at creation).
// Thread-safe: Explain may be called concurrently; it blocks until `out` is filled.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/common/rows.h"
#include "core/common/run_info.h"
#include "core/explain/explain.h"
#include "core/explain/paths.h"
#include "core/model/forest.h"

namespace grove {

class ThreadPool;
class QuadratureStrategy;

struct BanzhafEngineOptions {
  bool use_gpu = true;        // also the GPU strategy when a GPU is visible and serves the model
  bool measure_costs = true;  // time the strategies at creation (false: static estimates)
};

class BanzhafEngine {
 public:
  // `layout`: the model's merged path layout (built from `forest`). FAILED_PRECONDITION for a
  // model that cannot be explained (CheckExplainable). `pool` is not owned and must outlive the
  // engine.
  static absl::StatusOr<std::unique_ptr<BanzhafEngine>> Create(
      ForestPtr forest, PathLayoutPtr layout, const BanzhafEngineOptions& options,
      ThreadPool* pool);
  ~BanzhafEngine();

  // Host rows in, host results out: rows.rows x ExplainWidth(forest, options.interactions), laid
  // out as SHAP values / interaction values. CheckExplainCall's errors. Deterministic.
  absl::Status Explain(RowsView rows, const ExplainOptions& options, MatrixView<float> out,
                       RunInfo* info) const;
  std::string Describe() const;
  int64_t DeviceBytes() const;

 private:
  BanzhafEngine() = default;
  std::unique_ptr<QuadratureStrategy> cpu_;
  std::unique_ptr<QuadratureStrategy> gpu_;  // null without a GPU
};

}  // namespace grove
