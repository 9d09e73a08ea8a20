// Quadrature GPU entry points in a build without CUDA: they answer UNAVAILABLE.
#include "absl/status/status.h"
#include "core/explain/quadrature/quadrature.h"

namespace grove {

struct QuadratureGpuModel::Device {};
struct QuadratureGpuExplainer::Buffers {};

absl::StatusOr<std::unique_ptr<QuadratureGpuModel>> QuadratureGpuModel::Upload(
    QuadratureModelPtr model, int device) {
  return absl::UnavailableError("quadrature_gpu: Grove was built without CUDA");
}

QuadratureGpuModel::~QuadratureGpuModel() = default;

int64_t QuadratureGpuModel::WorkspaceBytes(int64_t rows, bool interactions) const { return 0; }

absl::Status QuadratureGpuModel::Explain(const float*, int64_t, int64_t, const ExplainOptions&,
                                         QuadraturePrecision, float*, int64_t, void*, int64_t,
                                         CUstream_st*) const {
  return absl::UnavailableError("quadrature_gpu: Grove was built without CUDA");
}

absl::StatusOr<std::unique_ptr<QuadratureGpuExplainer>> QuadratureGpuExplainer::Create(
    QuadratureModelPtr model, int device, QuadraturePrecision precision,
    int64_t workspace_budget_bytes) {
  return absl::UnavailableError("quadrature_gpu: Grove was built without CUDA");
}

QuadratureGpuExplainer::~QuadratureGpuExplainer() = default;

absl::Status QuadratureGpuExplainer::Explain(RowsView, const ExplainOptions&,
                                             MatrixView<float>) const {
  return absl::UnavailableError("quadrature_gpu: Grove was built without CUDA");
}

}  // namespace grove
