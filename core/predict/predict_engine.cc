#include "core/predict/predict_engine.h"

#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace grove {
namespace {

class CpuPredictEngine final : public PredictEngine {
 public:
  CpuPredictEngine(ForestPtr forest, ThreadPool* pool) : forest_(std::move(forest)), pool_(pool) {}

  absl::Status Predict(RowsView rows, const PredictOptions& options, MatrixView<float> out,
                       RunInfo* info) const override {
    const auto start = std::chrono::steady_clock::now();
    absl::Status status = PredictCpu(*forest_, rows, options, out, pool_);
    if (info != nullptr) {
      info->device = "cpu";
      info->strategy = "cpu";
      info->reason = "no GPU engine";
      info->compute_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    return status;
  }
  std::string Describe() const override { return "cpu"; }
  int64_t DeviceBytes() const override { return 0; }

 private:
  ForestPtr forest_;
  ThreadPool* pool_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PredictEngine>> PredictEngine::Create(
    ForestPtr forest, const PredictEngineOptions& options, ThreadPool* pool) {
  if (forest == nullptr) return absl::InvalidArgumentError("PredictEngine: no model");
  if (options.strategy != "auto" && options.strategy != "cpu") {
    return absl::InvalidArgumentError(
        absl::StrCat("prediction strategy '", options.strategy, "' needs a GPU build"));
  }
  return std::unique_ptr<PredictEngine>(new CpuPredictEngine(std::move(forest), pool));
}

}  // namespace grove
