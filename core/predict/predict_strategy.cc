#include "core/predict/predict_strategy.h"

#include <utility>

#include "core/common/log.h"
#include "core/predict/cpu/cpu_infer.h"

namespace grove {

CpuPredictStrategy::CpuPredictStrategy(ForestPtr forest, ThreadPool* pool)
    : forest_(std::move(forest)), pool_(pool) {
  absl::StatusOr<cpu::CpuForestPtr> layout = cpu::CpuForest::Build(forest_);
  if (layout.ok()) {
    layout_ = *std::move(layout);
  } else {
    GROVE_LOG(WARNING) << "CPU prediction engine unavailable; using the reference walk"
                       << KV("error", layout.status().ToString());
  }
}

std::string CpuPredictStrategy::Describe() const {
  return layout_ != nullptr ? layout_->Describe() : "cpu (reference walk)";
}

absl::Status CpuPredictStrategy::Run(RowsView rows, const PredictOptions& options, int /*groups*/,
                                     MatrixView<float> out, std::string* device) const {
  *device = "cpu";
  if (layout_ == nullptr) return PredictCpu(*forest_, rows, options, out, pool_);
  return cpu::Predict(*layout_, rows, options, out, pool_);
}

absl::Status CpuPredictStrategy::RunOnCallingThread(RowsView rows, const PredictOptions& options,
                                                    MatrixView<float> out) const {
  if (layout_ == nullptr) return PredictCpu(*forest_, rows, options, out, nullptr);
  return cpu::Predict(*layout_, rows, options, out, nullptr);
}

absl::Status CpuPredictStrategy::RunRow(const float* row, const PredictOptions& options,
                                        float* out) const {
  if (layout_ != nullptr) return cpu::PredictRow(*layout_, row, options, out);
  const int64_t width = PredictWidth(*forest_, options);
  return PredictCpu(*forest_, MakeRowsView(row, 1, forest_->num_features), options,
                    MakeMatrixView(out, 1, width), nullptr);
}

std::unique_ptr<CpuPredictStrategy> MakeCpuPredictStrategy(ForestPtr forest, ThreadPool* pool) {
  return std::make_unique<CpuPredictStrategy>(std::move(forest), pool);
}

}  // namespace grove
