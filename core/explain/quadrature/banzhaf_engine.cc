#include "core/explain/quadrature/banzhaf_engine.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/log.h"
#include "core/explain/quadrature/quadrature.h"
#include "core/gpu/device_set.h"

namespace grove {

BanzhafEngine::~BanzhafEngine() = default;

absl::StatusOr<std::unique_ptr<BanzhafEngine>> BanzhafEngine::Create(
    ForestPtr forest, PathLayoutPtr layout, const BanzhafEngineOptions& options,
    ThreadPool* pool) {
  if (forest == nullptr) return absl::InvalidArgumentError("BanzhafEngine: no model");
  if (absl::Status s = CheckExplainable(*forest); !s.ok()) return s;
  absl::StatusOr<QuadratureModelPtr> model =
      BuildQuadratureModel(forest, std::move(layout), Attribution::kBanzhaf);
  if (!model.ok()) return model.status();
  std::unique_ptr<BanzhafEngine> engine(new BanzhafEngine());
  QuadratureStrategyOptions strategy_options;
  strategy_options.calibrate = options.measure_costs;
  absl::StatusOr<std::unique_ptr<QuadratureStrategy>> cpu =
      MakeQuadratureCpuStrategy(*model, pool, strategy_options);
  if (!cpu.ok()) return cpu.status();
  engine->cpu_ = *std::move(cpu);
  if (options.use_gpu && gpu::VisibleGpuCount() > 0) {
    absl::StatusOr<std::unique_ptr<QuadratureStrategy>> gpu =
        MakeQuadratureGpuStrategy(*model, strategy_options);
    if (gpu.ok()) {
      engine->gpu_ = *std::move(gpu);
    } else {
      // Paths longer than 32 features, or no usable device: the CPU strategy serves them all.
      GROVE_LOG(WARNING) << "banzhaf: GPU strategy unavailable" << KV("why", gpu.status().message());
    }
  }
  return engine;
}

absl::Status BanzhafEngine::Explain(RowsView rows, const ExplainOptions& options,
                                    MatrixView<float> out, RunInfo* info) const {
  const QuadratureStrategy* chosen = cpu_.get();
  if (gpu_ != nullptr && gpu_->Supports(options) &&
      gpu_->EstimateSeconds(rows.rows, options) < cpu_->EstimateSeconds(rows.rows, options)) {
    chosen = gpu_.get();
  }
  absl::Status s = chosen->Run(rows, options, out, info);
  if (info != nullptr) info->strategy = absl::StrCat("banzhaf_", chosen->name());
  return s;
}

std::string BanzhafEngine::Describe() const {
  return absl::StrCat("banzhaf: ", cpu_->Describe(), gpu_ != nullptr ? "; " : "",
                      gpu_ != nullptr ? gpu_->Describe() : "");
}

int64_t BanzhafEngine::DeviceBytes() const {
  return gpu_ != nullptr ? gpu_->DeviceBytes() : 0;
}

}  // namespace grove
