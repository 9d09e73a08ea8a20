#include "core/predict/predict_strategy.h"

#include <utility>

namespace grove {
namespace {

class CpuPredictStrategy final : public PredictStrategy {
 public:
  CpuPredictStrategy(ForestPtr forest, ThreadPool* pool) : forest_(std::move(forest)), pool_(pool) {}
  StrategyId id() const override { return StrategyId::kCpu; }
  absl::Status Run(RowsView rows, const PredictOptions& options, int /*groups*/,
                   MatrixView<float> out, std::string* device) const override {
    *device = "cpu";
    return PredictCpu(*forest_, rows, options, out, pool_);
  }

 private:
  ForestPtr forest_;
  ThreadPool* pool_;
};

}  // namespace

std::unique_ptr<PredictStrategy> MakeCpuPredictStrategy(ForestPtr forest, ThreadPool* pool) {
  return std::make_unique<CpuPredictStrategy>(std::move(forest), pool);
}

}  // namespace grove
