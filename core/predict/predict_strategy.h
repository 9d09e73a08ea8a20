// PredictStrategy: one way to run a model's predictions on host rows (the seam every prediction
// engine selects through, as ExplainStrategy is for explanations).
//
// The strategies are the StrategyId table of perf_model.h: the CPU reference and Tahoe's GPU
// kernels. An engine holds one object per strategy it can run, made by its factory table, and runs
// the one its selector picks; the CPU strategy is the same code in the CPU-only engine and in the GPU
// engine. Thread-safe: Run may be called concurrently; it blocks until the results are in `out`.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "core/common/rows.h"
#include "core/model/forest.h"
#include "core/predict/perf_model.h"
#include "core/predict/predict.h"

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

// The CPU reference (PredictCpu) on `pool` (not owned, may be null: the calling thread).
std::unique_ptr<PredictStrategy> MakeCpuPredictStrategy(ForestPtr forest, ThreadPool* pool);

}  // namespace grove
