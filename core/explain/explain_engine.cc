#include "core/explain/explain_engine.h"

#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace grove {
namespace {

class CpuExplainEngine final : public ExplainEngine {
 public:
  CpuExplainEngine(ForestPtr forest, ThreadPool* pool) : forest_(std::move(forest)), pool_(pool) {}

  absl::Status Explain(RowsView rows, const ExplainOptions& options, MatrixView<float> out,
                       RunInfo* info) const override {
    const auto start = std::chrono::steady_clock::now();
    absl::Status status = ExplainCpuReference(*forest_, rows, options, out, pool_);
    if (info != nullptr) {
      info->device = "cpu";
      info->strategy = "cpu_reference";
      info->reason = "no GPU engine";
      info->compute_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    return status;
  }
  std::string Describe() const override { return "cpu_reference"; }
  int64_t DeviceBytes() const override { return 0; }

 private:
  ForestPtr forest_;
  ThreadPool* pool_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ExplainEngine>> ExplainEngine::Create(
    ForestPtr forest, const ExplainEngineOptions& options, ThreadPool* pool) {
  if (forest == nullptr) return absl::InvalidArgumentError("ExplainEngine: no model");
  if (options.strategy != "auto" && options.strategy != "cpu" &&
      options.strategy != "cpu_reference") {
    return absl::InvalidArgumentError(
        absl::StrCat("explanation strategy '", options.strategy, "' is not available"));
  }
  return std::unique_ptr<ExplainEngine>(new CpuExplainEngine(std::move(forest), pool));
}

}  // namespace grove
