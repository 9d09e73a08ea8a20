// PredictStrategy: one way to run a model's predictions on host rows (the seam every prediction
// engine selects through, as ExplainStrategy is for explanations).
//
// The strategies are the StrategyId table of strategy_id.h: the CPU reference and Tahoe's GPU
// kernels. An engine holds one object per strategy it can run, made by its factory table, and runs
// the one its selector picks; the CPU strategy is the same code in the CPU-only engine and in the GPU
// engine. Thread-safe: Run may be called concurrently; it blocks until the results are in `out`.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "core/common/rows.h"
#include "core/model/forest.h"
#include "core/predict/cpu/cpu_forest.h"
#include "core/predict/predict.h"
#include "core/predict/strategy_id.h"

namespace grove {

class ThreadPool;

class PredictStrategy {
 public:
  virtual ~PredictStrategy() = default;
  virtual StrategyId id() const = 0;
  const char* name() const { return StrategyName(id()); }
  // Host rows in, host results out (rows x PredictWidth). `groups`: the selector's shared-data
  // groups or row-chunk shape code (StrategyCost::groups; ignored where the strategy has none).
  // `device` (not null) gets where it ran: "cpu", "cuda:0", "cuda:0+1", ...
  virtual absl::Status Run(RowsView rows, const PredictOptions& options, int groups,
                           MatrixView<float> out, std::string* device) const = 0;
};

// The CPU engine (core/predict/cpu/, exact against the reference PredictCpu) on `pool` (not
// owned, may be null: the calling thread). Builds the engine's layout of the forest once; a forest
// the layout cannot index (over 2^31 nodes) runs the reference walk.
class CpuPredictStrategy final : public PredictStrategy {
 public:
  CpuPredictStrategy(ForestPtr forest, ThreadPool* pool);
  StrategyId id() const override { return StrategyId::kCpu; }
  absl::Status Run(RowsView rows, const PredictOptions& options, int groups,
                   MatrixView<float> out, std::string* device) const override;
  // One row of forest.num_features values on the calling thread, PredictWidth values to `out`:
  // no pool hop, and no allocation for models of up to 64 outputs (cpu::PredictRow).
  absl::Status RunRow(const float* row, const PredictOptions& options, float* out) const;
  // Run on the calling thread alone, whatever the pool (the selector's per-thread cost).
  absl::Status RunOnCallingThread(RowsView rows, const PredictOptions& options,
                                  MatrixView<float> out) const;
  // The layout's description (cpu::CpuForest::Describe), or "cpu (reference walk)".
  std::string Describe() const;

 private:
  ForestPtr forest_;
  cpu::CpuForestPtr layout_;  // null: the reference walk
  ThreadPool* pool_;
};

std::unique_ptr<CpuPredictStrategy> MakeCpuPredictStrategy(ForestPtr forest, ThreadPool* pool);

}  // namespace grove
