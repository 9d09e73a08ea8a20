// Quadrature SHAP on the GPU: device-resident model, launches, host-facing explainer.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/explain/quadrature/quadrature.h"
#include "core/explain/quadrature/quadrature_gpu.cuh"
#include "core/gpu/cuda_status.h"
#include "core/gpu/device_buffer.h"
#include "core/gpu/device_set.h"
#include "core/model/traverse.h"

namespace grove {
namespace {

#define GROVE_QCUDA(expr) GROVE_CUDA_RETURN_IF_ERROR(expr, "quadrature_gpu: " #expr)

int64_t AlignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

}  // namespace

struct QuadratureGpuModel::Device {
  // The model's arrays on the device (the per-call fields are set by Explain).
  quadrature_gpu::DeviceView view;
  int sm_count = 132;
  std::vector<gpu::DeviceBuffer> buffers;  // own the arrays of `view`

  // A device copy of `host` owned by `buffers` (null for an empty vector).
  template <typename T>
  absl::Status Upload(const std::vector<T>& host, const T** device, int64_t* bytes) {
    *device = nullptr;
    if (host.empty()) return absl::OkStatus();
    absl::StatusOr<gpu::DeviceBuffer> b = gpu::DeviceBuffer::Upload(host, "quadrature_gpu: model upload");
    if (!b.ok()) return b.status();
    *bytes += b->bytes();
    *device = b->as<T>();
    buffers.push_back(*std::move(b));
    return absl::OkStatus();
  }
};

absl::StatusOr<std::unique_ptr<QuadratureGpuModel>> QuadratureGpuModel::Upload(
    QuadratureModelPtr model, int device) {
  if (model == nullptr) return absl::InvalidArgumentError("quadrature_gpu: no model");
  if (device >= gpu::VisibleGpuCount()) {
    return absl::UnavailableError(absl::StrCat("quadrature_gpu: no CUDA device ", device));
  }
  if (model->max_unique > 32) {
    return absl::FailedPreconditionError(absl::StrCat(
        "quadrature_gpu: a path has ", model->max_unique,
        " unique features; the GPU kernels hold at most 32 (use quadrature_cpu)"));
  }
  GROVE_QCUDA(cudaSetDevice(device));
  std::unique_ptr<QuadratureGpuModel> gpu(new QuadratureGpuModel());
  gpu->model_ = model;
  gpu->device_ = device;
  gpu->d_ = std::make_unique<Device>();
  Device& d = *gpu->d_;
  int64_t bytes = 0;
  quadrature_gpu::DeviceView& v = d.view;
  if (absl::Status s = d.Upload(model->paths, &v.paths, &bytes); !s.ok()) return s;
  if (absl::Status s = d.Upload(model->elements, &v.elements, &bytes); !s.ok()) return s;
  if (absl::Status s = d.Upload(model->layout->values, &v.values, &bytes); !s.ok()) return s;
  if (absl::Status s = d.Upload(model->layout->category_bits, &v.category_bits, &bytes);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = d.Upload(model->rule_nodes, &v.rule_nodes, &bytes); !s.ok()) return s;
  if (absl::Status s = d.Upload(model->rule_weights, &v.rule_weights, &bytes); !s.ok()) return s;
  std::vector<float> nodes_f(model->rule_nodes.begin(), model->rule_nodes.end());
  std::vector<float> weights_f(model->rule_weights.begin(), model->rule_weights.end());
  if (absl::Status s = d.Upload(nodes_f, &v.rule_nodes_f, &bytes); !s.ok()) return s;
  if (absl::Status s = d.Upload(weights_f, &v.rule_weights_f, &bytes); !s.ok()) return s;
  GROVE_QCUDA(cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, device));
  gpu->device_bytes_ = bytes;
  return gpu;
}

QuadratureGpuModel::~QuadratureGpuModel() {
  if (d_ != nullptr) cudaSetDevice(device_);
}

int64_t QuadratureGpuModel::WorkspaceBytes(int64_t rows, bool interactions) const {
  const int64_t rows_ld = AlignUp(std::max<int64_t>(rows, 1), 32);
  const int64_t width = ExplainWidth(*model_->forest, interactions);
  return AlignUp(static_cast<int64_t>(model_->num_features) * rows_ld * 4, 256) +
         AlignUp(width * rows_ld * 8, 256) + AlignUp(model_->num_outputs * 8, 256);
}

absl::Status QuadratureGpuModel::Explain(const float* d_rows, int64_t rows, int64_t row_stride,
                                         const ExplainOptions& options,
                                         QuadraturePrecision precision, float* d_out,
                                         int64_t out_stride, void* d_workspace,
                                         int64_t workspace_bytes, CUstream_st* stream) const {
  namespace q = quadrature_gpu;
  const QuadratureModel& m = *model_;
  const Forest& forest = *m.forest;
  IterationRange range;
  if (absl::Status s = ResolveIterationRange(forest, options.iteration_begin,
                                             options.iteration_end, &range);
      !s.ok()) {
    return s;
  }
  if (rows <= 0) return absl::OkStatus();
  if (rows > int64_t{65535} * 32) {
    return absl::InvalidArgumentError("quadrature_gpu: too many rows for one call");
  }
  if (workspace_bytes < WorkspaceBytes(rows, options.interactions)) {
    return absl::InvalidArgumentError("quadrature_gpu: workspace too small");
  }
  GROVE_QCUDA(cudaSetDevice(device_));
  // Launch errors are read with cudaGetLastError below; drop a stale one left on this thread by
  // other code, so that it is not reported as ours.
  (void)cudaGetLastError();
  const bool interactions = options.interactions;
  const int64_t f1 = m.num_features + 1;
  const int64_t width = ExplainWidth(forest, interactions);
  const int64_t rows_ld = AlignUp(rows, 32);
  char* ws = static_cast<char*>(d_workspace);
  float* d_xt = reinterpret_cast<float*>(ws);
  ws += AlignUp(static_cast<int64_t>(m.num_features) * rows_ld * 4, 256);
  auto* d_acc = reinterpret_cast<unsigned long long*>(ws);
  ws += AlignUp(width * rows_ld * 8, 256);
  auto* d_bias = reinterpret_cast<double*>(ws);

  const std::vector<double> bias = m.Bias(range.begin, range.end);
  GROVE_QCUDA(cudaMemcpyAsync(d_bias, bias.data(), bias.size() * sizeof(double),
                              cudaMemcpyHostToDevice, stream));
  GROVE_QCUDA(cudaMemsetAsync(d_acc, 0, width * rows_ld * 8, stream));
  if (m.num_features > 0) {
    const dim3 grid(static_cast<unsigned>((rows + 31) / 32),
                    static_cast<unsigned>((m.num_features + 31) / 32));
    q::TransposeRowsKernel<<<grid, dim3(32, 8), 0, stream>>>(d_rows, rows, row_stride,
                                                             m.num_features, d_xt, rows_ld);
    GROVE_QCUDA(cudaGetLastError());
  }

  q::DeviceView view = d_->view;
  view.num_features = m.num_features;
  view.num_outputs = m.num_outputs;
  view.scale = m.fixed_point_scale;

  const int64_t row_tiles = (rows + q::kRowsPerBlock - 1) / q::kRowsPerBlock;
  const bool shared = !interactions && width * q::kRowsPerBlock * 8 <= q::kSharedAccBytes;
  const size_t shared_bytes = shared ? static_cast<size_t>(width * q::kRowsPerBlock * 8) : 0;
  // Enough blocks for a few waves; shared-accumulator blocks need long chunks to amortise
  // their flush.
  const int64_t target_blocks = static_cast<int64_t>(d_->sm_count) * 8;
  for (const QuadratureBucketRange& bucket : m.buckets) {
    const int64_t num_paths = bucket.end - bucket.begin;
    if (num_paths == 0) continue;
    const int64_t min_chunk = shared ? std::max<int64_t>(64, width * 4) : 16;
    int64_t chunks = std::max<int64_t>(1, (target_blocks + row_tiles - 1) / row_tiles);
    chunks = std::min(chunks, std::max<int64_t>(1, num_paths / min_chunk));
    q::LaunchArgs a;
    a.path_begin = bucket.begin;
    a.path_end = bucket.end;
    a.paths_per_chunk = static_cast<uint32_t>((num_paths + chunks - 1) / chunks);
    chunks = (num_paths + a.paths_per_chunk - 1) / a.paths_per_chunk;
    a.iteration_begin = range.begin;
    a.iteration_end = range.end;
    a.d_xt = d_xt;
    a.rows = rows;
    a.rows_ld = rows_ld;
    a.d_acc = d_acc;
    a.width = width;
    a.block_size = interactions ? f1 * f1 : f1;
    const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(row_tiles));
    const dim3 block(q::kRowsPerBlock);
    const bool use_float = precision == QuadraturePrecision::kFloat;
#define GROVE_QLAUNCH(N)                                                                  \
  if (interactions) {                                                                     \
    if (use_float) {                                                                      \
      q::InteractionsKernel<N, float><<<grid, block, 0, stream>>>(view, a);               \
    } else {                                                                              \
      q::InteractionsKernel<N, double><<<grid, block, 0, stream>>>(view, a);              \
    }                                                                                     \
  } else if (shared) {                                                                    \
    if (use_float) {                                                                      \
      q::ShapKernel<N, float, true><<<grid, block, shared_bytes, stream>>>(view, a);      \
    } else {                                                                              \
      q::ShapKernel<N, double, true><<<grid, block, shared_bytes, stream>>>(view, a);     \
    }                                                                                     \
  } else {                                                                                \
    if (use_float) {                                                                      \
      q::ShapKernel<N, float, false><<<grid, block, 0, stream>>>(view, a);                \
    } else {                                                                              \
      q::ShapKernel<N, double, false><<<grid, block, 0, stream>>>(view, a);               \
    }                                                                                     \
  }
    switch (bucket.capacity) {
      case 4: GROVE_QLAUNCH(4); break;
      case 8: GROVE_QLAUNCH(8); break;
      case 16: GROVE_QLAUNCH(16); break;
      case 32: GROVE_QLAUNCH(32); break;
      default:
        return absl::FailedPreconditionError("quadrature_gpu: path longer than 32 features");
    }
#undef GROVE_QLAUNCH
    GROVE_QCUDA(cudaGetLastError());
  }

  const int64_t bias_offset = interactions ? m.num_features * f1 + m.num_features : m.num_features;
  const dim3 grid(static_cast<unsigned>((width + 31) / 32), static_cast<unsigned>((rows + 31) / 32));
  q::FinalizeKernel<<<grid, dim3(32, 8), 0, stream>>>(d_acc, rows, rows_ld, width,
                                                      interactions ? f1 * f1 : f1, bias_offset,
                                                      d_bias, 1.0 / m.fixed_point_scale, d_out,
                                                      out_stride);
  GROVE_QCUDA(cudaGetLastError());
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------

struct QuadratureGpuExplainer::Buffers {
  cudaStream_t stream = nullptr;
  // Grown to the largest batch seen (the steady state allocates nothing).
  gpu::DeviceBuffer d_rows, d_out, d_workspace;
  gpu::PinnedBuffer h_rows, h_out;
  ~Buffers() {
    if (stream) cudaStreamDestroy(stream);
  }
};

absl::StatusOr<std::unique_ptr<QuadratureGpuExplainer>> QuadratureGpuExplainer::Create(
    QuadratureModelPtr model, int device, QuadraturePrecision precision,
    int64_t workspace_budget_bytes) {
  const gpu::ScopedCurrentDevice keep_device;  // the caller's device, as it was
  absl::StatusOr<std::unique_ptr<QuadratureGpuModel>> gpu =
      QuadratureGpuModel::Upload(std::move(model), device);
  if (!gpu.ok()) return gpu.status();
  std::unique_ptr<QuadratureGpuExplainer> e(new QuadratureGpuExplainer());
  e->gpu_ = std::move(*gpu);
  e->precision_ = precision;
  e->workspace_budget_ = workspace_budget_bytes;
  e->buffers_ = std::make_unique<Buffers>();
  GROVE_QCUDA(cudaSetDevice(device));
  GROVE_QCUDA(cudaStreamCreateWithFlags(&e->buffers_->stream, cudaStreamNonBlocking));
  return e;
}

QuadratureGpuExplainer::~QuadratureGpuExplainer() {
  const gpu::ScopedCurrentDevice keep_device;  // released on this GPU; the caller's device kept
  if (gpu_ != nullptr) cudaSetDevice(gpu_->device());
  buffers_.reset();
  gpu_.reset();
}

absl::Status QuadratureGpuExplainer::Explain(RowsView rows, const ExplainOptions& options,
                                             MatrixView<float> out) const {
  const QuadratureModel& m = gpu_->model();
  const Forest& forest = *m.forest;
  if (absl::Status s = CheckExplainable(forest); !s.ok()) return s;
  if (rows.cols != forest.num_features || rows.rows < 0 || rows.stride < rows.cols ||
      (rows.rows > 0 && rows.data == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("rows have ", rows.cols, " columns; the model has ",
                                                   forest.num_features, " features"));
  }
  const int64_t width = ExplainWidth(forest, options.interactions);
  if (out.rows != rows.rows || out.cols != width || out.stride < out.cols ||
      (out.rows > 0 && out.data == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("output is ", out.rows, " x ", out.cols,
                                                   "; expected ", rows.rows, " x ", width));
  }
  IterationRange range;
  if (absl::Status s = ResolveIterationRange(forest, options.iteration_begin,
                                             options.iteration_end, &range);
      !s.ok()) {
    return s;
  }
  if (rows.rows == 0) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  Buffers& b = *buffers_;
  GROVE_QCUDA(cudaSetDevice(gpu_->device()));
  const int64_t per_row = gpu_->WorkspaceBytes(64, options.interactions) / 64 + width * 4 +
                          forest.num_features * 4;
  int64_t batch = std::clamp<int64_t>(workspace_budget_ / std::max<int64_t>(per_row, 1), 1,
                                      int64_t{1} << 20);
  batch = std::min(batch, rows.rows);
  const int64_t f = forest.num_features;
  const int64_t ws_bytes = gpu_->WorkspaceBytes(batch, options.interactions);
  for (absl::Status st : {b.d_rows.Reserve(batch * f * 4, "quadrature_gpu: device rows"),
                          b.h_rows.Reserve(batch * f * 4, "quadrature_gpu: pinned rows"),
                          b.d_out.Reserve(batch * width * 4, "quadrature_gpu: device results"),
                          b.h_out.Reserve(batch * width * 4, "quadrature_gpu: pinned results"),
                          b.d_workspace.Reserve(ws_bytes, "quadrature_gpu: workspace")}) {
    if (!st.ok()) return st;
  }
  float* const d_rows = b.d_rows.as<float>();
  float* const d_out = b.d_out.as<float>();
  float* const h_rows = b.h_rows.as<float>();
  float* const h_out = b.h_out.as<float>();
  for (int64_t r0 = 0; r0 < rows.rows; r0 += batch) {
    const int64_t n = std::min(batch, rows.rows - r0);
    for (int64_t r = 0; r < n; ++r) std::memcpy(h_rows + r * f, rows.Row(r0 + r), f * 4);
    GROVE_QCUDA(cudaMemcpyAsync(d_rows, h_rows, n * f * 4, cudaMemcpyHostToDevice, b.stream));
    if (absl::Status s = gpu_->Explain(d_rows, n, f, options, precision_, d_out, width,
                                       b.d_workspace.get(), b.d_workspace.bytes(), b.stream);
        !s.ok()) {
      return s;
    }
    GROVE_QCUDA(cudaMemcpyAsync(h_out, d_out, n * width * 4, cudaMemcpyDeviceToHost, b.stream));
    GROVE_QCUDA(cudaStreamSynchronize(b.stream));
    for (int64_t r = 0; r < n; ++r) std::memcpy(out.Row(r0 + r), h_out + r * width, width * 4);
  }
  return absl::OkStatus();
}

}  // namespace grove
