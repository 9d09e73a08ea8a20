// GPU interventional SHAP engine: resident layouts, workspace and launches (see
// interventional_gpu.h).
#include "core/explain/interventional/interventional_gpu.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/explain/explain.h"
#include "core/explain/path_layout_gpu.h"
#include "core/explain/interventional/interventional_gpu.cuh"
#include "core/explain/interventional/interventional_interactions_gpu.cuh"
#include "core/gpu/cuda_status.h"
#include "core/gpu/device_buffer.h"
#include "core/gpu/device_set.h"
#include "core/model/traverse.h"

namespace grove {
namespace {

namespace ik = interventional_kernels;

#define GROVE_CUDA_RETURN(expr) GROVE_CUDA_RETURN_IF_ERROR(expr, "interventional_gpu: " #expr)

constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxChunkRows = kMaxGridY * ik::kRowsPerWarp;

// prefix[(i + 1) * K + k] = sum of the background means of output k over trees of rounds <= i.
std::vector<double> IterationPrefix(const Forest& forest, const InterventionalLayout& il) {
  const int k = forest.num_outputs;
  std::vector<double> prefix((forest.num_iterations + 1) * k, 0.0);
  for (size_t t = 0; t < forest.trees.size(); ++t) {
    const int it = forest.trees[t].iteration;
    for (int i = 0; i < k; ++i) prefix[(it + 1) * k + i] += il.tree_means[t * k + i];
  }
  for (int it = 1; it <= forest.num_iterations; ++it) {
    for (int i = 0; i < k; ++i) prefix[it * k + i] += prefix[(it - 1) * k + i];
  }
  return prefix;
}

template <typename T>
absl::Status UploadTo(const std::vector<T>& host, gpu::DeviceBuffer* b, int64_t* accounted) {
  return gpu::UploadCounted(host, "interventional_gpu: layout upload", b, accounted);
}

class InterventionalGpuImpl final : public InterventionalGpu {
 public:
  using InterventionalGpu::WorkspaceBytes;

  InterventionalGpuImpl(ForestPtr forest, PathLayoutPtr layout, InterventionalLayoutPtr il)
      : forest_(std::move(forest)), layout_(std::move(layout)), il_(std::move(il)) {}

  ~InterventionalGpuImpl() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init() {
    GROVE_CUDA_RETURN(cudaSetDevice(0));
    absl::StatusOr<ResidentPathLayoutPtr> resident = ResidentPathLayout::On(layout_, 0);
    if (!resident.ok()) return resident.status();
    resident_ = *std::move(resident);
    int64_t& b = resident_bytes_;
    for (absl::Status s :
         {UploadTo(il_->mask_begin, &mask_begin_, &b),
          UploadTo(il_->masks, &masks_, &b), UploadTo(il_->counts, &counts_, &b),
          UploadTo(il_->weights, &weights_, &b),
          UploadTo(il_->banzhaf_weights, &banzhaf_weights_, &b),
          UploadTo(forest_->base_margin, &base_margin_, &b),
          UploadTo(IterationPrefix(*forest_, *il_), &iteration_prefix_, &b)}) {
      if (!s.ok()) return s;
    }
    GROVE_CUDA_RETURN(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    return absl::OkStatus();
  }

  int64_t WorkspaceBytes(int64_t num_rows, const InterventionalOptions& options) const override {
    const int64_t rows = std::max<int64_t>(num_rows, 1);
    const OutputSpace space = options.output_space;
    if (options.interactions && !Exact(space)) return rows * Width(true) * 8;
    int64_t bytes = rows * Width() * 8;
    if (space == OutputSpace::kProbabilityLinearized) bytes += LinearizedBytes(rows);
    if (Exact(space)) bytes += ExactLayoutFor(rows).bytes;
    // The exact space's interaction values: double accumulators after its layout.
    if (Exact(space) && options.interactions) bytes += rows * Width(true) * 8;
    return bytes;
  }

  absl::Status EnableLinearized(LinearizedLayoutPtr ll) override {
    std::lock_guard<std::mutex> lock(linearized_mu_);
    if (linearized_ != nullptr) return absl::OkStatus();
    if (ll == nullptr || ll->background_rows != il_->background_rows ||
        ll->mask_rows.size() != layout_->paths.size() * static_cast<size_t>(ll->background_rows)) {
      return absl::InvalidArgumentError(
          "interventional_gpu: the linearized layout is not of this model and background");
    }
    GROVE_CUDA_RETURN(cudaSetDevice(0));
    int64_t bytes = 0;
    for (absl::Status s : {UploadTo(ll->mask_rows, &mask_rows_, &bytes),
                           UploadTo(ll->background, &background_, &bytes)}) {
      if (!s.ok()) return s;
    }
    linearized_bytes_.store(bytes);
    linearized_ = std::move(ll);
    linearized_ready_.store(true);
    return absl::OkStatus();
  }
  bool linearized_enabled() const override { return linearized_ready_.load(); }

  absl::Status ExplainOnDevice(const float* d_rows, int64_t num_rows,
                               const InterventionalOptions& options, void* d_workspace,
                               int64_t workspace_bytes, float* d_out,
                               CUstream_st* stream) const override {
    return ExplainRows(d_rows, num_rows, 0, options, d_workspace, workspace_bytes, d_out, stream,
                       nullptr);
  }

  // ExplainOnDevice of rows numbered from `first_row` (in a refused pair's message).
  // `exact_bias`: the exact space's bias for the options' range when the caller has it (null:
  // ExactBiasFor here).
  absl::Status ExplainRows(const float* d_rows, int64_t num_rows, int64_t first_row,
                           const InterventionalOptions& options, void* d_workspace,
                           int64_t workspace_bytes, float* d_out, CUstream_st* stream,
                           const std::vector<double>* exact_bias) const {
    IterationRange range;
    if (absl::Status s = CheckOptions(options, &range); !s.ok()) return s;
    const OutputSpace space = options.output_space;
    if (workspace_bytes < WorkspaceBytes(num_rows, options) ||
        (num_rows > 0 && d_workspace == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "interventional_gpu: the workspace holds ", workspace_bytes, " bytes; ", num_rows,
          " rows need ", WorkspaceBytes(num_rows, options)));
    }
    if (num_rows == 0) return absl::OkStatus();
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    auto* d_acc = static_cast<unsigned long long*>(d_workspace);
    if (options.interactions && !Exact(space)) {
      return ExplainInteractions(range, options, d_rows, num_rows, d_acc, d_out, s);
    }
    GROVE_CUDA_RETURN(cudaMemsetAsync(d_acc, 0, num_rows * Width() * 8, s));
    if (Exact(space)) {
      return ExplainExact(range, options.attribution, options.interactions, d_rows, num_rows,
                          first_row, reinterpret_cast<char*>(d_workspace), d_out, s, exact_bias);
    }
    ik::KernelArgs a = Args(range, options.attribution);
    ik::LinearizedArgs la;
    const double* d_bias = nullptr;
    if (space == OutputSpace::kProbabilityLinearized) {
      auto* d_extra = reinterpret_cast<char*>(d_acc + num_rows * Width());
      if (absl::Status st = PrepareLinearized(a, range, d_rows, num_rows, d_extra, s, &la, &d_bias);
          !st.ok()) {
        return st;
      }
    }
    for (int64_t begin = 0; begin < num_rows; begin += kMaxChunkRows) {
      a.num_rows = std::min(kMaxChunkRows, num_rows - begin);
      a.d_rows = d_rows + begin * forest_->num_features;
      a.d_acc = d_acc + begin * Width();
      const dim3 grid = Grid(a.num_rows);
      if (grid.x == 0) continue;
      if (space == OutputSpace::kProbabilityLinearized) {
        ik::LinearizedArgs chunk = la;
        chunk.d_rho = la.d_rho + begin * forest_->num_outputs * la.n;
        ik::LinearizedKernel<<<grid, ik::kBlockThreads, 0, s>>>(a, chunk);
      } else {
        ik::InterventionalKernel<<<grid, ik::kBlockThreads, 0, s>>>(a);
      }
      GROVE_CUDA_RETURN(cudaGetLastError());
    }
    const int64_t n = num_rows * Width();
    // The identity link's probability space: the margin space over the average divisor.
    const double divisor = MarginFormDivisor(*forest_, space, range.size());
    ik::FinishKernel<<<Blocks(n), 256, 0, s>>>(
        d_acc, nullptr, num_rows, forest_->num_outputs, layout_->num_players, resident_->scale(false),
        base_margin_.as<double>(), iteration_prefix_.as<double>(), range.begin, range.end, d_bias,
        divisor, d_out);
    GROVE_CUDA_RETURN(cudaGetLastError());
    return absl::OkStatus();
  }

  absl::Status Explain(RowsView rows, const InterventionalOptions& options,
                       MatrixView<float> out) override {
    if (absl::Status s = CheckInterventionalCall(*forest_, rows, options, out); !s.ok()) return s;
    if (rows.rows == 0) return absl::OkStatus();
    // The exact space's bias is host work on the first call of a range (ExactBiasFor keeps it):
    // done once, before taking the engine's lock, which other callers would otherwise wait on.
    std::shared_ptr<const std::vector<double>> exact_bias;
    if (Exact(options.output_space) && linearized_enabled()) {
      IterationRange range;
      if (CheckOptions(options, &range).ok()) {
        exact_bias = ExactBiasFor(*forest_, *layout_, *il_, *linearized_, range.begin, range.end);
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    GROVE_CUDA_RETURN(cudaSetDevice(0));
    const int64_t F = forest_->num_features;
    const int64_t width = Width(options.interactions);
    // Chunks bound the workspace at ~256 MB of accumulators.
    const int64_t per_row = WorkspaceBytes(2, options) - WorkspaceBytes(1, options);
    const int64_t chunk = std::clamp<int64_t>((int64_t{256} << 20) / per_row, 1, rows.rows);
    for (absl::Status st :
         {h_rows_.Reserve(chunk * F * 4, "interventional_gpu: pinned rows"),
          h_out_.Reserve(chunk * width * 4, "interventional_gpu: pinned results"),
          d_rows_.Reserve(chunk * F * 4, "interventional_gpu: rows"),
          d_out_.Reserve(chunk * width * 4, "interventional_gpu: results"),
          workspace_.Reserve(WorkspaceBytes(chunk, options),
                             "interventional_gpu: workspace")}) {
      if (!st.ok()) return st;
    }
    for (int64_t begin = 0; begin < rows.rows; begin += chunk) {
      const int64_t n = std::min(chunk, rows.rows - begin);
      for (int64_t r = 0; r < n; ++r) {
        std::copy(rows.Row(begin + r), rows.Row(begin + r) + F, h_rows_.as<float>() + r * F);
      }
      GROVE_CUDA_RETURN(cudaMemcpyAsync(d_rows_.get(), h_rows_.get(), n * F * 4,
                                        cudaMemcpyHostToDevice, stream_));
      if (absl::Status st = ExplainRows(d_rows_.as<float>(), n, begin, options, workspace_.get(),
                                        workspace_.bytes(), d_out_.as<float>(), stream_,
                                        exact_bias.get());
          !st.ok()) {
        return st;
      }
      GROVE_CUDA_RETURN(cudaMemcpyAsync(h_out_.get(), d_out_.get(), n * width * 4,
                                        cudaMemcpyDeviceToHost, stream_));
      GROVE_CUDA_RETURN(cudaStreamSynchronize(stream_));
      for (int64_t r = 0; r < n; ++r) {
        const float* src = h_out_.as<float>() + r * width;
        std::copy(src, src + width, out.Row(begin + r));
      }
    }
    return absl::OkStatus();
  }

  int64_t DeviceBytes() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return resident_bytes_ + linearized_bytes_.load() + workspace_.bytes() + d_rows_.bytes() +
           d_out_.bytes();
  }
  std::string DeviceName() const override { return "cuda:0"; }
  const PathLayoutPtr& layout() const override { return layout_; }
  std::string Describe() const override {
    return absl::StrFormat(
        "interventional_gpu on cuda:0, %d background rows, %d masks, %.2f MB (+ %.2f MB of paths)",
        il_->background_rows, il_->masks.size(), resident_bytes_ / 1e6, resident_->bytes() / 1e6);
  }

 private:
  // Columns per row: the layout's players' (the features, or a grouping's groups).
  int64_t Width(bool interactions = false) const {
    const int64_t p1 = layout_->num_players + 1;
    return forest_->num_outputs * (interactions ? p1 * p1 : p1);
  }

  // PathLayout::player_of on the device; null for a layout of the features.
  const int32_t* DevicePlayerOf() const {
    return resident_->player_of();
  }

  // The weight table of `attribution` (InterventionalLayout::Weights), on the device.
  const double* DeviceWeights(Attribution attribution) const {
    return attribution == Attribution::kBanzhaf ? banzhaf_weights_.as<double>()
                                                : weights_.as<double>();
  }

  // Interaction values (PathFormExplainsInteractions): d_acc (num_rows x Width(true) fixed-point
  // values) zeroed, the kernel per chunk of rows, the finish into d_out. Enqueued on `s`.
  absl::Status ExplainInteractions(const IterationRange& range,
                                   const InterventionalOptions& options, const float* d_rows,
                                   int64_t num_rows, unsigned long long* d_acc, float* d_out,
                                   cudaStream_t s) const {
    const int64_t width = Width(true);
    GROVE_CUDA_RETURN(cudaMemsetAsync(d_acc, 0, num_rows * width * 8, s));
    ik::KernelArgs a = Args(range, options.attribution);
    a.d_scale = resident_->scale(true);
    a.acc_width = width;
    for (int64_t begin = 0; begin < num_rows; begin += kMaxChunkRows) {
      a.num_rows = std::min(kMaxChunkRows, num_rows - begin);
      a.d_rows = d_rows + begin * forest_->num_features;
      a.d_acc = d_acc + begin * width;
      const dim3 grid = Grid(a.num_rows);
      if (grid.x == 0) continue;
      ik::InteractionsKernel<<<grid, ik::kBlockThreads, 0, s>>>(a);
      GROVE_CUDA_RETURN(cudaGetLastError());
    }
    const double divisor = MarginFormDivisor(*forest_, options.output_space, range.size());
    const int64_t threads = num_rows * forest_->num_outputs * (layout_->num_players + 1);
    ik::InteractionsFinishKernel<<<Blocks(threads), 256, 0, s>>>(
        d_acc, num_rows, forest_->num_outputs, layout_->num_players,
        resident_->scale(true), base_margin_.as<double>(),
        iteration_prefix_.as<double>(), range.begin, range.end, divisor, d_out);
    GROVE_CUDA_RETURN(cudaGetLastError());
    return absl::OkStatus();
  }

  // The exact probability space's own kernels (an identity link's is the margin space's).
  bool Exact(OutputSpace space) const { return IsExactSpace(*forest_, space); }

  // The exact space's workspace after the accumulators (each part 256-byte aligned): background
  // masks (n x paths), the bias (ExactBiasFor's, copied in), the refusal word, and
  // `warps` teams' ExactScratch arrays. Warps: one per row up to kExactWarps, fewer when their
  // scratch would pass kExactScratchBytes.
  struct ExactWorkspace {
    int64_t warps = 0;
    ExactScratchSizes sizes{};
    int64_t z_masks = 0, bias = 0, refused = 0, x_masks = 0, slot_of = 0,
            slot_feature = 0, partial = 0, table = 0;  // byte offsets
    int64_t bytes = 0;
  };
  static constexpr int64_t kExactWarps = 2048;
  static constexpr int64_t kExactScratchBytes = int64_t{512} << 20;

  ExactWorkspace ExactLayoutFor(int64_t rows) const {
    ExactWorkspace w;
    const int64_t paths = static_cast<int64_t>(layout_->paths.size());
    const int k = forest_->num_outputs;
    w.sizes = ExactScratchSizesFor(paths, layout_->num_players, k, 32);
    const ExactScratchSizes& z = w.sizes;
    const int64_t per_warp = (z.x_masks + z.slot_of + z.slot_feature) * 4 + (z.partial + z.table) * 8;
    w.warps = std::clamp<int64_t>(std::min(rows, kExactWarps), 1,
                                  std::max<int64_t>(1, kExactScratchBytes / per_warp));
    int64_t at = 0;
    auto take = [&](int64_t bytes) {
      const int64_t offset = at;
      at += (bytes + 255) / 256 * 256;
      return offset;
    };
    const int64_t n = il_->background_rows;
    w.z_masks = take(n * paths * 4);
    w.bias = take(k * 8);
    w.refused = take(8);
    w.x_masks = take(w.warps * z.x_masks * 4);
    w.slot_of = take(w.warps * z.slot_of * 4);
    w.slot_feature = take(w.warps * z.slot_feature * 4);
    w.partial = take(w.warps * z.partial * 8);
    w.table = take(w.warps * z.table * 8);
    w.bytes = at + 256;  // the accumulators' end may leave the first part unaligned
    return w;
  }

  ExactArgs DeviceExactArgs(const IterationRange& range, Attribution attribution) const {
    ExactArgs a = ExactCallArgs(*forest_, *layout_, range.begin, range.end);
    a.player_of = DevicePlayerOf();
    a.elements = resident_->arrays().elements;
    a.paths = resident_->arrays().paths;
    a.values = resident_->arrays().values;
    a.category_bits = resident_->arrays().category_bits;
    a.base_margin = base_margin_.as<double>();
    a.weights = DeviceWeights(attribution);
    return a;
  }

  // The exact space: background masks and bias, one warp per row, the results; then waits for
  // `s` to read whether a pair was refused (ExactPairTooWideError, rows numbered from first_row).
  absl::Status ExplainExact(const IterationRange& range, Attribution attribution,
                            bool interactions, const float* d_rows, int64_t num_rows,
                            int64_t first_row, char* d_workspace, float* d_out, cudaStream_t s,
                            const std::vector<double>* known_bias) const {
    const ExactWorkspace w = ExactLayoutFor(num_rows);
    const int64_t width = Width();
    auto* d_phi = reinterpret_cast<double*>(d_workspace);  // zeroed by the caller
    char* base = d_workspace + num_rows * width * 8;
    base += (256 - reinterpret_cast<uintptr_t>(base) % 256) % 256;
    const ExactArgs a = DeviceExactArgs(range, attribution);
    const int64_t n = il_->background_rows;
    const int k = forest_->num_outputs;
    auto* d_z = reinterpret_cast<uint32_t*>(base + w.z_masks);
    auto* d_bias = reinterpret_cast<double*>(base + w.bias);
    auto* d_refused = reinterpret_cast<unsigned long long*>(base + w.refused);
    ik::ExactKernelArgs ka;
    ka.d_rows = d_rows;
    ka.num_rows = num_rows;
    ka.d_z_masks = d_z;
    ka.n = n;
    ka.d_x_masks = reinterpret_cast<uint32_t*>(base + w.x_masks);
    ka.d_slot_of = reinterpret_cast<int32_t*>(base + w.slot_of);
    ka.d_slot_feature = reinterpret_cast<int32_t*>(base + w.slot_feature);
    ka.d_partial = reinterpret_cast<double*>(base + w.partial);
    ka.d_table = reinterpret_cast<double*>(base + w.table);
    ka.sizes = w.sizes;
    ka.num_warps = w.warps;
    ka.d_phi = d_phi;
    ka.acc_width = width;
    ka.d_refused = d_refused;
    if (interactions) {  // after the layout's parts (w.bytes keeps 256 bytes of slack for base)
      ka.d_inter = reinterpret_cast<double*>(base + w.bytes - 256);
      ka.inter_width = Width(true);
      GROVE_CUDA_RETURN(cudaMemsetAsync(ka.d_inter, 0, num_rows * ka.inter_width * 8, s));
    }
    GROVE_CUDA_RETURN(cudaMemsetAsync(d_refused, 0xff, 8, s));
    GROVE_CUDA_RETURN(cudaMemsetAsync(ka.d_slot_of, 0xff, w.warps * w.sizes.slot_of * 4, s));
    GROVE_CUDA_RETURN(cudaMemsetAsync(
        ka.d_partial, 0, (w.table - w.partial) + w.warps * w.sizes.table * 8, s));
    const int64_t paths = a.num_paths;
    ik::ScatterMasksKernel<<<Blocks(paths), 256, 0, s>>>(paths, n, mask_begin_.as<uint32_t>(),
                                                          masks_.as<uint32_t>(),
                                                          counts_.as<uint32_t>(),
                                                          mask_rows_.as<uint16_t>(), d_z);
    // The bias is background rows x paths of serial path walks: computed once per iteration
    // range on the host and kept with the linearized layout (ExactBiasFor), not per call. (A
    // pageable source: the copy has left it when cudaMemcpyAsync returns.)
    std::shared_ptr<const std::vector<double>> found;
    if (known_bias == nullptr) {
      found = ExactBiasFor(*forest_, *layout_, *il_, *linearized_, range.begin, range.end);
      known_bias = found.get();
    }
    GROVE_CUDA_RETURN(cudaMemcpyAsync(d_bias, known_bias->data(), k * sizeof(double),
                                      cudaMemcpyHostToDevice, s));
    const int64_t blocks = (w.warps + ik::kWarpsPerBlock - 1) / ik::kWarpsPerBlock;
    ik::ExactKernel<<<static_cast<unsigned>(blocks), ik::kBlockThreads, 0, s>>>(a, ka);
    if (interactions) {
      ik::ExactInteractionsFinishKernel<<<Blocks(num_rows * k * (layout_->num_players + 1)), 256,
                                          0, s>>>(d_phi, ka.d_inter, num_rows, k,
                                                  layout_->num_players, d_bias, d_out);
    } else {
      ik::FinishKernel<<<Blocks(num_rows * width), 256, 0, s>>>(
          nullptr, d_phi, num_rows, k, layout_->num_players, nullptr, nullptr, nullptr, 0, 0,
          d_bias, 1.0, d_out);
    }
    GROVE_CUDA_RETURN(cudaGetLastError());
    unsigned long long refused = 0;
    GROVE_CUDA_RETURN(cudaMemcpyAsync(&refused, d_refused, 8, cudaMemcpyDeviceToHost, s));
    GROVE_CUDA_RETURN(cudaStreamSynchronize(s));
    if (refused == ~0ull) return absl::OkStatus();
    const int64_t pair = static_cast<int64_t>(refused >> 16);
    return ExactPairTooWideError(first_row + pair / n, pair % n, static_cast<int>(refused & 0xffff));
  }

  absl::Status CheckOptions(const InterventionalOptions& options, IterationRange* range) const {
    if (absl::Status s = CheckLayoutPlayers(*layout_, options.groups); !s.ok()) return s;
    const OutputSpace space = options.output_space;
    if (space != OutputSpace::kMargin) {
      if (absl::Status s = CheckOutputSpace(*forest_, space); !s.ok()) return s;
      if ((space == OutputSpace::kProbabilityLinearized || Exact(space)) && !linearized_enabled()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "interventional_gpu: output space ", OutputSpaceName(space),
            " needs EnableLinearized first"));
      }
    }
    if (options.interactions && !PathFormsExplainInteractions(*forest_, options)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "interventional_gpu explains interaction values in the margin and exact probability "
          "spaces, not ", OutputSpaceName(space), "; the CPU reference does"));
    }
    return ResolveIterationRange(*forest_, options.iteration_begin, options.iteration_end, range);
  }

  ik::KernelArgs Args(const IterationRange& range, Attribution attribution) const {
    ik::KernelArgs a;
    a.d_layout = resident_->arrays();
    a.d_mask_begin = mask_begin_.as<uint32_t>();
    a.d_masks = masks_.as<uint32_t>();
    a.d_counts = counts_.as<uint32_t>();
    a.d_weights = DeviceWeights(attribution);
    a.d_scale = resident_->scale(false);
    a.inv_background = 1.0 / static_cast<double>(il_->background_rows);
    a.num_bins = layout_->num_bins();
    a.num_features = forest_->num_features;
    a.d_player_of = DevicePlayerOf();
    a.num_players = layout_->num_players;
    a.iteration_begin = range.begin;
    a.iteration_end = range.end;
    a.acc_width = Width();
    return a;
  }

  static dim3 Grid(int64_t rows_in_chunk, int64_t num_bins) {
    return dim3(static_cast<unsigned>((num_bins + ik::kWarpsPerBlock - 1) / ik::kWarpsPerBlock),
                static_cast<unsigned>((rows_in_chunk + ik::kRowsPerWarp - 1) / ik::kRowsPerWarp));
  }
  dim3 Grid(int64_t rows_in_chunk) const { return Grid(rows_in_chunk, layout_->num_bins()); }
  static int Blocks(int64_t n) { return static_cast<int>(std::clamp<int64_t>((n + 255) / 256, 1, 4096)); }

  // Linearized workspace after the accumulators: margin accumulators and margins of the rows and
  // the background, each pair's factor, the bias.
  int64_t LinearizedBytes(int64_t rows) const {
    const int64_t k = forest_->num_outputs, n = il_->background_rows;
    return (rows + n) * k * 16 + rows * k * n * 8 + k * 8;
  }

  // Margins of the rows and of the background by paths, each pair's factor and the bias, into
  // `d_extra` (LinearizedBytes); fills `la` and `d_bias`. Enqueued on `s`.
  absl::Status PrepareLinearized(ik::KernelArgs a, const IterationRange& range, const float* d_rows,
                                 int64_t num_rows, char* d_extra, cudaStream_t s,
                                 ik::LinearizedArgs* la, const double** d_bias) const {
    const int k = forest_->num_outputs;
    const int64_t n = il_->background_rows;
    auto* d_margin_acc = reinterpret_cast<unsigned long long*>(d_extra);
    auto* d_margins = reinterpret_cast<double*>(d_margin_acc + (num_rows + n) * k);
    double* d_rho = d_margins + (num_rows + n) * k;
    double* bias = d_rho + num_rows * k * n;
    GROVE_CUDA_RETURN(cudaMemsetAsync(d_margin_acc, 0, (num_rows + n) * k * 8, s));
    // Rows, then the background rows after them.
    const float* sources[2] = {d_rows, background_.as<float>()};
    const int64_t counts[2] = {num_rows, n};
    int64_t offset = 0;
    for (int i = 0; i < 2; ++i) {
      for (int64_t begin = 0; begin < counts[i]; begin += kMaxChunkRows) {
        a.num_rows = std::min(kMaxChunkRows, counts[i] - begin);
        a.d_rows = sources[i] + begin * forest_->num_features;
        const dim3 grid = Grid(a.num_rows);
        if (grid.x == 0) continue;
        ik::MarginKernel<<<grid, ik::kBlockThreads, 0, s>>>(a, d_margin_acc + (offset + begin) * k, k);
        GROVE_CUDA_RETURN(cudaGetLastError());
      }
      offset += counts[i];
    }
    const int64_t margins = (num_rows + n) * k;
    ik::MarginsFromFixed<<<Blocks(margins), 256, 0, s>>>(d_margin_acc, margins, k,
                                                          resident_->scale(false),
                                                          base_margin_.as<double>(), d_margins);
    const TransformParams tp = MakeTransformParams(*forest_, range.size());
    const double* d_background_margins = d_margins + num_rows * k;
    ik::RhoKernel<<<Blocks(num_rows * k * n), 256, 0, s>>>(tp, d_margins, num_rows,
                                                          d_background_margins, n, k, d_rho);
    ik::LinkMeanKernel<<<(k + 31) / 32, 32, 0, s>>>(tp, d_background_margins, n, k, bias);
    GROVE_CUDA_RETURN(cudaGetLastError());
    la->d_mask_rows = mask_rows_.as<uint16_t>();
    la->n = n;
    la->d_rho = d_rho;
    *d_bias = bias;
    return absl::OkStatus();
  }

  ForestPtr forest_;
  PathLayoutPtr layout_;
  InterventionalLayoutPtr il_;
  std::mutex linearized_mu_;  // EnableLinearized
  std::atomic<bool> linearized_ready_{false};
  std::atomic<int64_t> linearized_bytes_{0};
  LinearizedLayoutPtr linearized_;
  gpu::DeviceBuffer mask_rows_, background_;
  // The path layout's copy on GPU 0, shared with the other engines built on it (path_layout_gpu.h).
  ResidentPathLayoutPtr resident_;
  // The background's masks, counts and weight tables, the base margins and iteration prefixes.
  gpu::DeviceBuffer mask_begin_, masks_, counts_, weights_, banzhaf_weights_, base_margin_,
      iteration_prefix_;
  int64_t resident_bytes_ = 0;  // of the buffers above
  cudaStream_t stream_ = nullptr;
  mutable std::mutex mu_;  // guards the workspace and pinned buffers below
  gpu::PinnedBuffer h_rows_, h_out_;
  gpu::DeviceBuffer d_rows_, d_out_, workspace_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<InterventionalGpu>> InterventionalGpu::Create(
    ForestPtr forest, PathLayoutPtr layout, InterventionalLayoutPtr il) {
  if (forest == nullptr || layout == nullptr || il == nullptr) {
    return absl::InvalidArgumentError("InterventionalGpu: no model, path layout or background");
  }
  if (!layout->long_paths.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "interventional_gpu: ", layout->long_paths.size(), " paths have more than ", kWarpLanes,
        " distinct features; the CPU strategies explain this model"));
  }
  if (gpu::VisibleGpuCount() == 0) return absl::UnavailableError("no GPU: no CUDA device is visible");
  auto engine = std::make_unique<InterventionalGpuImpl>(std::move(forest), std::move(layout),
                                                        std::move(il));
  if (absl::Status s = engine->Init(); !s.ok()) return s;
  return std::unique_ptr<InterventionalGpu>(std::move(engine));
}

}  // namespace grove
