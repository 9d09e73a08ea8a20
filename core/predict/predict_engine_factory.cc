// PredictEngine::Create: the engine a model gets (Tahoe with a GPU, else the CPU engine). Apart
// from predict_engine.h, which the engines implement, so that the seam that names the engines and
// the engines do not include each other.
#include "core/predict/predict_engine.h"

#include <chrono>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/log.h"
#include "core/predict/predict_strategy.h"
#include "core/predict/strategy_id.h"
#include "core/predict/tahoe/tahoe_engine.h"

namespace grove {
namespace {

// The engine without a GPU: the CPU strategy alone.
class CpuPredictEngine final : public PredictEngine {
 public:
  CpuPredictEngine(ForestPtr forest, ThreadPool* pool, std::string reason)
      : cpu_(MakeCpuPredictStrategy(std::move(forest), pool)), reason_(std::move(reason)) {}

  absl::Status Predict(RowsView rows, const PredictOptions& options, MatrixView<float> out,
                       RunInfo* info) const override {
    const auto start = std::chrono::steady_clock::now();
    std::string device;
    absl::Status status = cpu_->Run(rows, options, /*groups=*/1, out, &device);
    if (info != nullptr) {
      info->device = device;
      info->strategy = cpu_->name();
      info->reason = reason_;
      info->compute_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    return status;
  }
  absl::Status PredictRow(const float* row, const PredictOptions& options,
                          float* out) const override {
    return cpu_->RunRow(row, options, out);
  }
  std::string Describe() const override { return cpu_->Describe(); }
  int64_t DeviceBytes() const override { return 0; }

 private:
  std::unique_ptr<CpuPredictStrategy> cpu_;
  std::string reason_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PredictEngine>> PredictEngine::Create(
    ForestPtr forest, const PredictEngineOptions& options, ThreadPool* pool) {
  if (forest == nullptr) return absl::InvalidArgumentError("PredictEngine: no model");
  const std::string& strategy = options.strategy;
  absl::StatusOr<std::optional<StrategyId>> forced = ParseStrategy(strategy);
  if (!forced.ok()) return forced.status();
  if (*forced == StrategyId::kCpu) {
    return std::unique_ptr<PredictEngine>(new CpuPredictEngine(std::move(forest), pool, "override"));
  }
  std::string why = "use_gpu off";
  if (options.use_gpu) {
    TahoeEngineOptions o;
    o.engine = options;
    absl::StatusOr<std::unique_ptr<TahoeEngine>> gpu = TahoeEngine::Create(forest, o, pool);
    if (gpu.ok()) return std::unique_ptr<PredictEngine>(std::move(*gpu));
    why = std::string(gpu.status().message());
    // A forced GPU strategy must not silently run on the CPU.
    if (forced->has_value()) return gpu.status();
    if (!absl::IsUnavailable(gpu.status())) {
      GROVE_LOG(WARNING) << "GPU prediction engine unavailable; using the CPU"
                         << KV("error", gpu.status().ToString());
    }
  } else if (forced->has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("prediction strategy '", strategy, "' needs the GPU (use_gpu is off)"));
  }
  return std::unique_ptr<PredictEngine>(
      new CpuPredictEngine(std::move(forest), pool, absl::StrCat("no GPU engine: ", why)));
}

}  // namespace grove
